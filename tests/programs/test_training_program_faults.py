"""The training programs, tiles_train.py and layout_train.py, under faults: the fault matrix's cases
(tests/fault_matrix.py), a tile run killed with SIGKILL during its second epoch and rerun, which must
end exactly as an uninterrupted run (every tensor of its checkpoint and its history), and, where a
subprocess would add nothing to what the matrix checks of every program, tiles_train.py's main in
this process: the training flags that cannot train, and reruns of damaged or otherwise configured
copies of the run (truncated config.json or history.json, damaged checkpoints or best weights must
resume from what verifies or be refused unchanged)."""

from __future__ import annotations

import json
import pathlib
import shutil
import signal
import subprocess
import sys
import time
from typing import Callable

from absl import flags
import numpy as np
import pytest
import tensorflow as tf

import fault_matrix
import hang_guard
import program_modules
import shared_fixtures

from tpu_graphs.data import errors
from tpu_graphs.export import saved_model

Call, Case, Workspace = fault_matrix.Call, fault_matrix.Case, fault_matrix.Workspace


def _train_killed_and_resumed(root: pathlib.Path) -> list[str]:
  """Trains <root>/resumed as tile_run's run was trained, killed with SIGKILL after its first
  checkpoint (during its second epoch), then rerun. Returns the checkpoints the kill left."""
  flags = shared_fixtures.tile_run_flags(root, root / "resumed")
  killed = subprocess.Popen(fault_matrix.command("tiles_train", flags), env=shared_fixtures.program_environment(),
                            cwd=fault_matrix.REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  checkpoints = root / "resumed" / "checkpoints"
  deadline = time.monotonic() + hang_guard.SECONDS
  while not (checkpoints / "checkpoint").exists() and killed.poll() is None and time.monotonic() < deadline:
    time.sleep(0.02)
  killed.send_signal(signal.SIGKILL)
  killed.wait()
  left = sorted(path.name for path in checkpoints.glob("ckpt-*.index"))
  resumed = fault_matrix.run_program("tiles_train", flags)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  return left


def _run_copy(workspace: Workspace, folder: pathlib.Path) -> pathlib.Path:
  """A copy of the trained run (finished: 2 epochs, checkpoints ckpt-1 and ckpt-2)."""
  shutil.copytree(workspace.run, folder / "run")
  return folder / "run"


def _rerun_flags(workspace: Workspace, run: pathlib.Path) -> list[str]:
  return shared_fixtures.tile_run_flags(workspace.root, run)


def prepare_changed_model_flags(workspace: Workspace, folder: pathlib.Path) -> Call:
  flags = [*_rerun_flags(workspace, workspace.run), "--units=32"]
  return Call(flags, kept=[workspace.run / "config.json", workspace.run / "checkpoints", workspace.run / "export"])


def _damaged_run(damage: Callable[[pathlib.Path], None]):
  """prepare() of a rerun of a copy of the trained run that `damage` changed; the copy's other
  files must survive the refusal."""
  def prepare(workspace: Workspace, folder: pathlib.Path) -> Call:
    run = _run_copy(workspace, folder)
    damage(run)
    return Call(_rerun_flags(workspace, run), kept=[run])
  return prepare


def _truncate(path: pathlib.Path) -> None:
  path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2])


def _flip_a_byte(path: pathlib.Path) -> None:
  content = bytearray(path.read_bytes())
  content[len(content) // 2] ^= 0xFF
  path.write_bytes(bytes(content))


def _checkpoint_data(run: pathlib.Path, number: int) -> pathlib.Path:
  return next((run / "checkpoints").glob(f"ckpt-{number}.data-*"))


def _recorded_nan_learning_rate(run: pathlib.Path) -> None:
  """config.json as an older version wrote it for --learning_rate=nan (NaN is no JSON number)."""
  config = json.loads((run / "config.json").read_text())
  config["learning_rate"] = float("nan")
  (run / "config.json").write_text(json.dumps(config))


def prepare_newest_checkpoint_damaged(workspace: Workspace, folder: pathlib.Path) -> Call:
  run = _run_copy(workspace, folder)
  _flip_a_byte(_checkpoint_data(run, 2))

  def check(completed):  # epoch 2 trained again from ckpt-1 ends as the uninterrupted run did
    whole, resumed = (tf.train.load_checkpoint(str(path / "checkpoints" / "ckpt-2")) for path in (workspace.run, run))
    for name in whole.get_variable_to_shape_map():
      if name != "_CHECKPOINTABLE_OBJECT_GRAPH":
        np.testing.assert_array_equal(resumed.get_tensor(name), whole.get_tensor(name), err_msg=name)
    assert (run / "history.json").read_text() == (workspace.run / "history.json").read_text()

  return Call(_rerun_flags(workspace, run), check=check)


def prepare_diverging_learning_rate(workspace: Workspace, folder: pathlib.Path) -> Call:
  run = folder / "run"

  def check(completed):  # nothing of the diverged epoch was kept: no checkpoint, no best weights
    assert not list(run.glob("checkpoints/ckpt-*")) and not (run / "best").exists()

  return Call([*_rerun_flags(workspace, run), "--epochs=1", "--learning_rate=1e30"], check=check)


def prepare_layout_train_into_a_tile_run(workspace: Workspace, folder: pathlib.Path) -> Call:
  run = _run_copy(workspace, folder)

  def check(completed):  # refused before converting or deduplicating into it
    assert not (run / "records").exists() and not (run / "dedup").exists()

  return Call([f"--out_dir={run}", "--epochs=1"], kept=[run], check=check)


def prepare_rerun_with_a_compiled_library(workspace: Workspace, folder: pathlib.Path) -> Call:
  """A finished run whose export/ the user compiled into native/ (as compile_native.py writes it,
  recording the weights it compiled): a rerun exports again and must keep native/ as it is."""
  run = _run_copy(workspace, folder)
  native = run / "export" / "native"
  native.mkdir()
  (native / "libtpu_graphs_model.so").write_bytes(b"\x7fELF the library the user compiled")
  (native / "buckets.json").write_text(json.dumps({"cpus": ["x86-64"], "weights": saved_model.weights_fingerprint(
      run / "export")}))
  return Call(_rerun_flags(workspace, run), kept=[native])


CASES = [
    Case("tiles_train_epochs_0", "tiles_train", fault_matrix.flags_only("--epochs=0", "--out_dir={case}/run"), r"--epochs must be at least 1"),
    Case("tiles_train_rerun_keeps_the_library_compiled_from_its_export", "tiles_train",
         prepare_rerun_with_a_compiled_library, r"resume: all 2 epoch\(s\) trained already", status=0),
    Case("tiles_train_truncated_config_json", "tiles_train", _damaged_run(lambda run: _truncate(run / "config.json")),
         r"config\.json: damaged \(JSONDecodeError: .*\); delete .*run .*to start over"),
    Case("tiles_train_newest_checkpoint_damaged_resumes_from_the_previous", "tiles_train",
         prepare_newest_checkpoint_damaged, r"ckpt-2: damaged \(.*\); resuming from .*ckpt-1", status=0),
    Case("tiles_train_loss_becomes_nan", "tiles_train", prepare_diverging_learning_rate,
         r"the training loss became (nan|inf) in epoch 0 .*stopped, nothing of epoch 0 was saved"),
    Case("layout_train_epochs_0", "layout_train", fault_matrix.flags_only("--epochs=0", "--out_dir={case}/run"),
         r"--epochs must be at least 1"),
    Case("layout_train_into_a_tile_run", "layout_train", prepare_layout_train_into_a_tile_run,
         r"config\.json: this run was configured otherwise \(.*task 'TileTask' -> 'LayoutTask'"),
]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
  """Every case run, CONCURRENT_CASES at a time, beside the killed and resumed run of the resume
  test: {"left_by_kill": [...], "workspace": ..., "outcomes": {case name: Outcome}}."""
  with fault_matrix.workspace(tmp_path_factory.mktemp("faults")) as workspace:
    outcomes, left_by_kill = fault_matrix.run_cases(workspace, CASES, lambda: _train_killed_and_resumed(workspace.root))
  return {"left_by_kill": left_by_kill, "workspace": workspace, "outcomes": outcomes}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_fault_ends_in_one_clean_line_or_the_correct_result_and_loses_nothing(case, results):
  fault_matrix.check_outcome(case, results["outcomes"][case.name])


def test_run_killed_during_its_second_epoch_resumes_to_every_tensor_and_the_history_of_an_uninterrupted_run(results):
  assert results["left_by_kill"] == ["ckpt-1.index"]  # killed after epoch 1's checkpoint, before epoch 2's
  root = results["workspace"].root
  whole, resumed = (tf.train.load_checkpoint(str(root / name / "checkpoints")) for name in ("run", "resumed"))
  names = sorted(whole.get_variable_to_shape_map())
  assert names == sorted(resumed.get_variable_to_shape_map()) and len(names) > 20
  for name in names:
    if name != "_CHECKPOINTABLE_OBJECT_GRAPH":
      np.testing.assert_array_equal(resumed.get_tensor(name), whole.get_tensor(name), err_msg=name)
  history = [json.loads((root / name / "history.json").read_text()) for name in ("run", "resumed")]
  assert [entry["epoch"] for entry in history[0]] == [0, 1] and history[1] == history[0]


@pytest.mark.parametrize("flag, message", [
    ("--epochs=-2", r"--epochs must be at least 1"),
    ("--batch_size=0", r"--batch_size must be at least 1"),
    ("--configs_per_graph=0", r"--configs_per_graph must be at least 1"),
    ("--loss=bogus:1", r"--loss: unknown ranking loss 'bogus'"),
    ("--learning_rate=nan", r"--learning_rate: learning rate nan is not a positive finite number"),
    ("--loss=listmle:1,mse:-0.5", r"--loss: loss weight '-0.5' of 'mse' .* is not a finite number >= 0"),
], ids=["negative_epochs", "batch_size_0", "configs_per_graph_0", "unknown_loss", "learning_rate_nan",
        "negative_loss_weight"])
def test_training_flag_that_cannot_train_is_refused_as_parsed_before_anything_is_written(flag, message, tmp_path):
  with pytest.raises(flags.IllegalFlagValueError, match=message):
    program_modules.run_main("tiles_train", [flag, f"--out_dir={tmp_path / 'run'}"])
  assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("prepare, message", [
    (prepare_changed_model_flags,
     r"config\.json: this run was configured otherwise \(model\.units 16 -> 32\); use another run directory"),
    (_damaged_run(_recorded_nan_learning_rate),
     r"config\.json: this run was configured otherwise \(learning_rate nan -> 0\.003\)"),
    (_damaged_run(lambda run: _truncate(run / "history.json")),
     r"history\.json: damaged \(JSONDecodeError: .*\); delete .*run .*to start over"),
    (_damaged_run(lambda run: [_truncate(_checkpoint_data(run, n)) for n in (1, 2)]),
     r"ckpt-1: damaged .*no intact checkpoint is left: delete .*run .*to start over"),
    (_damaged_run(lambda run: _flip_a_byte(next((run / "best").glob("weights.data-*")))),
     r"best/weights: damaged \(.*\); the weights of the best epoch \d are lost: delete"),
], ids=["other_model_flags", "recorded_nan_learning_rate", "truncated_history_json", "every_checkpoint_damaged",
        "damaged_best_weights"])
def test_rerun_of_a_run_configured_otherwise_or_damaged_is_refused_naming_the_file_and_loses_nothing(
    prepare, message, results, tmp_path):
  call = prepare(results["workspace"], tmp_path)
  before = fault_matrix.contents(call.kept)
  with pytest.raises(errors.InputError, match=message):
    program_modules.run_main("tiles_train", call.flags)
  assert fault_matrix.contents(call.kept) == before



if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
