"""The program edge: expected failures become one line naming the file; flags are checked as parsed."""

import dataclasses
import errno
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import pytest
import tensorflow as tf

import hang_guard
import program_modules
from baselines import program
from tpu_graphs.data import graphs, locations, npz, storage
from tpu_graphs.export import saved_model
from tpu_graphs.train import experiments

REPO = pathlib.Path(__file__).resolve().parents[2]
PROGRAM = """
import sys
from absl import flags
from baselines import program
from tpu_graphs.data import errors
_COUNT = flags.DEFINE_integer("count", 1, "A count.")
_NAME = flags.DEFINE_string("name", "ok", "A name.")
program.require_at_least(1, _COUNT)
def is_a_name(name):
  if name == "x":
    raise ValueError(f"{name!r} is not a name")
program.check_flag(_NAME, is_a_name)
def main(argv):
  if _NAME.value == "missing":
    open("/nonexistent/input.csv")
  if _NAME.value == "bug":
    raise KeyError("a bug keeps its traceback")
  raise errors.InputError("data.npz: not what was expected")
program.run(main)
"""


@pytest.mark.parametrize("error, line", [
    (graphs.GraphFileError("x.npz", "a FIFO (named pipe), not a regular file"), "x.npz: a FIFO (named pipe), not a regular file"),
    (OSError(errno.ENOSPC, "No space left on device", "out/records"), "out/records: No space left on device"),
    (OSError(errno.EXDEV, "Invalid cross-device link", "a", None, "b"), "a -> b: Invalid cross-device link"),
    (FileNotFoundError("out/export: no saved_model.pb"), "out/export: no saved_model.pb"),
    (KeyError("bug"), None),
])
def test_failure_line_names_the_file_for_expected_failures_only(error, line):
  assert program.failure_line(error) == line


def _run(script: pathlib.Path, *flags: str) -> subprocess.CompletedProcess:
  """Runs the program with this checkout's tpu_graphs."""
  paths = [str(REPO)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
  return subprocess.run([sys.executable, str(script), *flags], capture_output=True, text=True,
                        timeout=hang_guard.SECONDS, env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)})


def test_a_training_program_writes_its_run_directory_at_a_url(tmp_path, monkeypatch, capsys):
  # ram:// lives inside one process, where a bucket outlives any: the program's main runs in this
  # process, so that what it wrote there can be read back.
  monkeypatch.chdir(tmp_path)
  program_modules.run_main("tiles_train", ["--experiment=smallest", "--out_dir=ram://url_run",
                                           "--records_dir=ram://url_records"])
  assert "run directory: ram://url_run" in capsys.readouterr().out
  written = {name.rstrip("/") for name in tf.io.gfile.listdir("ram://url_run")}
  assert {"config.json", "data_derived.json", "history.json", "metrics.json", "predictions.csv", "checkpoints",
          "best", "export"} <= written, written
  assert json.loads(storage.read_text("ram://url_run/metrics.json"))["epochs_run"] == 1
  test_graphs = sorted((locations.EMBEDDED_NPZ / "tile/xla/test").glob("*.npz"))
  rows = storage.read_text("ram://url_run/predictions.csv").splitlines()
  assert rows[0] == "ID,TopConfigs" and sorted(row.split(",")[0] for row in rows[1:]) == [
      f"tile:xla:{path.stem}" for path in test_graphs]
  served = tf.saved_model.load("ram://url_run/export").signatures[saved_model.PLAIN_SIGNATURE]
  graph = npz.read_graph(test_graphs[0])
  scores = served(node_feat=graph.node_feat, node_opcode=graph.node_opcode, edge_index=graph.edge_index,
                  config_feat=graph.config_feat)["scores"]
  assert scores.shape == (graph.num_configs,)
  assert tf.io.gfile.glob("ram://url_records/tile/xla/train/*.tfrecord.gz")
  assert not list(tmp_path.iterdir())  # nothing local, such as a folder "ram:" from a mangled URL


@pytest.mark.parametrize("flag, message", [
    ("--name=input", "program: data.npz: not what was expected"),
    ("--name=missing", "program: /nonexistent/input.csv: No such file or directory"),
    ("--count=0", "--count must be at least 1"),
    ("--name=x", "--name: 'x' is not a name"),
])
def test_expected_failures_and_bad_flags_end_with_status_1_and_no_traceback(tmp_path, flag, message):
  script = tmp_path / "program.py"
  script.write_text(PROGRAM)
  completed = _run(script, flag)
  assert completed.returncode == 1 and "Traceback" not in completed.stderr
  assert message in completed.stderr


def test_a_bug_keeps_its_traceback(tmp_path):
  script = tmp_path / "program.py"
  script.write_text(PROGRAM)
  completed = _run(script, "--name=bug")
  assert completed.returncode == 1 and "Traceback" in completed.stderr and "KeyError" in completed.stderr


STOPPABLE_PROGRAM = """
import sys, time
from baselines import program
from tpu_graphs.data import storage
def main(argv):
  with storage.atomic_path(argv[1]) as temporary:
    temporary.write_text("half of it")
    print("writing", flush=True)
    time.sleep(hang_guard_seconds)
program.run(main, rerun="rerun it to write the file")
"""


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_sigint_and_sigterm_stop_a_program_with_one_line_leaving_nothing_half_written(tmp_path, stop):
  script = tmp_path / "stoppable.py"
  script.write_text(STOPPABLE_PROGRAM.replace("hang_guard_seconds", str(hang_guard.SECONDS)))
  (tmp_path / "out").mkdir()
  paths = [str(REPO)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
  running = subprocess.Popen([sys.executable, str(script), str(tmp_path / "out" / "result.txt")], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)})
  assert running.stdout.readline() == "writing\n"
  running.send_signal(stop)
  _, stderr = running.communicate(timeout=hang_guard.SECONDS)
  assert running.returncode == 128 + stop
  assert stderr == f"stoppable: stopped by {stop.name}; rerun it to write the file\n"
  assert list((tmp_path / "out").iterdir()) == []  # neither the file nor its temporary


RECORD_SIZES_PROGRAM = """
from baselines import program
record_sizes = program.define_record_size_flags()
program.run(lambda argv: print(sorted(record_sizes().items())))
"""


@pytest.mark.parametrize("flag, status, output", [
    ("--chunk_kb=2", 0, "[('chunk_bytes', 2048), ('configs_per_chunk', 1000), ('shard_bytes', 67108864)]"),
    ("--configs_per_chunk=0", 1, "--configs_per_chunk must be at least 1"),
    ("--shard_mb=-1", 1, "--shard_mb must be at least 0"),
])
def test_record_size_flags_are_checked_and_given_as_converter_arguments(tmp_path, flag, status, output):
  script = tmp_path / "program.py"
  script.write_text(RECORD_SIZES_PROGRAM)
  completed = _run(script, flag)
  assert completed.returncode == status and output in completed.stdout + completed.stderr
NOISY_PROGRAM = """
import os
import warnings
from baselines import program
import tensorflow as tf
def main(argv):
  print("TF_CPP_MIN_LOG_LEVEL", os.environ["TF_CPP_MIN_LOG_LEVEL"])
  tf.get_logger().warning("a warning of TensorFlow's logger")
  warnings.warn_explicit("a UserWarning raised in TensorFlow", UserWarning, "nested_structure_coder.py", 1,
                         module="tensorflow.python.saved_model.nested_structure_coder")
program.run(main)
"""


@pytest.mark.parametrize("argv, verbosity", [
    ([], None), (["--out_dir=x"], None), (["--verbosity=0"], 0), (["--verbosity", "-1"], -1), (["-v", "1"], 1),
    (["-v=-2"], -2), (["--verbosity=loud"], None), (["--", "--verbosity=0"], None)])
def test_requested_verbosity_reads_absl_spellings_before_flags_are_parsed(argv, verbosity):
  assert program.requested_verbosity(argv) == verbosity


@pytest.mark.parametrize("verbosity, level", [(None, 3), (-3, 3), (-2, 2), (-1, 1), (0, 0), (1, 0)])
def test_tensorflow_log_level_follows_absl_verbosity_and_is_silent_by_default(verbosity, level):
  assert program.tensorflow_log_level(verbosity) == level


@pytest.mark.parametrize("flags, level, shown", [((), "3", False), (("--verbosity=-1",), "1", True)])
def test_tensorflow_logs_and_warnings_are_silenced_unless_verbosity_asks(tmp_path, flags, level, shown):
  script = tmp_path / "program.py"
  script.write_text(NOISY_PROGRAM)
  environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
  environment.pop("TF_CPP_MIN_LOG_LEVEL", None)
  completed = subprocess.run([sys.executable, str(script), *flags], capture_output=True, text=True,
                             timeout=hang_guard.SECONDS, env=environment)
  assert completed.returncode == 0, completed.stderr[-2000:]
  assert f"TF_CPP_MIN_LOG_LEVEL {level}" in completed.stdout
  assert ("a warning of TensorFlow's logger" in completed.stderr) == shown
  assert ("a UserWarning raised in TensorFlow" in completed.stderr) == shown


# Flags a user of each training program needs first; TensorFlow's own flags (those its modules define
# with absl) belong in --helpfull only.
SHARED_TRAINING_FLAGS = ("--data_root", "--epochs", "--experiment", "--out_dir", "--batch_size", "--seed")


@pytest.mark.parametrize("program, settings", [("tiles_train.py", experiments.TileSettings),
                                               ("layout_train.py", experiments.LayoutSettings)])
def test_help_lists_the_shared_training_flags_a_flag_per_model_setting_and_nothing_of_tensorflow(program, settings):
  completed = _run(REPO / "baselines" / program, "--help")  # absl ends --help with status 1
  assert "\nflags:\n" in completed.stdout, completed.stderr[-2000:]
  flag_lines = completed.stdout.split("\nflags:\n", 1)[1]
  assert [flag for flag in SHARED_TRAINING_FLAGS if f"  {flag}:" not in flag_lines] == []
  assert [f.name for f in dataclasses.fields(settings)
          if f"  --{f.name}:" not in flag_lines and f"  --[no]{f.name}:" not in flag_lines] == []
  sections = [line[:-1] for line in flag_lines.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
  assert len(sections) == 1 and sections[0].endswith(f"baselines/{program}")  # none from tensorflow.* modules
  assert "tensorflow" not in flag_lines.lower() and "--helpfull" in completed.stdout


def test_a_tile_run_its_split_cannot_batch_is_refused_before_anything_is_written(tmp_path):
  train, valid = tmp_path / "npz/tile/xla/train", tmp_path / "npz/tile/xla/valid"
  for split, count in ((train, 2), (valid, 1)):
    split.mkdir(parents=True)
    for path in sorted((locations.EMBEDDED_NPZ / "tile/xla" / split.name).glob("*.npz"))[:count]:
      shutil.copy(path, split / path.name)
  completed = _run(REPO / "baselines/tiles_train.py", f"--data_root={tmp_path / 'npz'}", "--batch_size=8",
                   f"--out_dir={tmp_path / 'run'}")
  assert completed.returncode == 1 and "Traceback" not in completed.stderr, completed.stderr[-2000:]
  assert f"{train}: 2 training graph(s) give 2 config chunk(s)" in completed.stderr
  assert "cannot fill one batch of 8; pass a --batch_size of at most 2" in completed.stderr
  assert not (tmp_path / "run").exists()  # so a retry with --batch_size 2 starts afresh, not "configured otherwise"


@pytest.mark.parametrize("flag, message", [
    ("--warmup_steps=-5", "--warmup_steps must be at least 0"),
    ("--steps_per_epoch=-1", "--steps_per_epoch must be at least 0"),
    ("--segment_size=-256", "--segment_size must be at least 0"),
    ("--prune_hops=-2", "--prune_hops must be at least -1"),
])
def test_layout_training_refuses_a_negative_count_its_help_does_not_document(tmp_path, flag, message):
  completed = _run(REPO / "baselines/layout_train.py", flag, f"--out_dir={tmp_path / 'run'}")
  assert completed.returncode == 1 and message in completed.stderr and "Traceback" not in completed.stderr, \
      completed.stderr[-2000:]
  assert not (tmp_path / "run").exists()


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
