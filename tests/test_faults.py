"""Fault matrix: every program run as a hostile but fair user would, each case a real subprocess.

A case gives a program bad input (corrupt, special or missing files), a bad flag, an unusable
output path (a file where a folder should be, a full disk: a file-size limit the kernel enforces,
which works unprivileged; a read-only folder, written by a program without root's power to write
anywhere) or a damaged earlier result, and expects either the correct result or exit status 1 with
a line naming the input and the problem: never a traceback, never a hang, and nothing already
written lost. A tile run killed with SIGKILL during its second epoch and rerun must end exactly as
an uninterrupted run: every tensor of its checkpoint and its history.

The cases share one small tile dataset and one trained run (the shared fixture tile_run, built
once by Bazel: tests/shared_fixtures.py) and run a few at a time, since most of each one's time is
importing TensorFlow. Damaged copies of the trained run (truncated config.json or history.json,
damaged checkpoints or best weights) must resume from what verifies or be refused unchanged. Where
a subprocess would add nothing to what the matrix checks of every program, tiles_train.py's main
runs in this process: the training flags that cannot train, and reruns of damaged or otherwise
configured copies of the run.

The kinds of fault whose check lives in one function (the reader's values, the featurizer's
module check, checkpoint verification, metrics of NaN scores, the downloader's wait budget and
lock, Beam options) are also tested in this process, each kind on several cases.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import dataclasses
import functools
import http.server
import io
import json
import os
import pathlib
import re
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import urllib.request
import zipfile
from typing import Callable, Optional

from absl import flags
import numpy as np
import pytest
import tensorflow as tf

import hang_guard
import malformed_modules
import program_modules
import shared_fixtures
import tile_test_data

from tpu_graphs.data import beam_pipeline
from tpu_graphs.data import convert, download, errors, graphs, locations, npz, readers, storage
from tpu_graphs.export import saved_model
from tpu_graphs.hlo import featurize, fusion_kernels
from tpu_graphs.train import losses, metrics, run_directory, scoring, tasks

REPO = pathlib.Path(__file__).resolve().parents[1]
CONCURRENT_CASES = 3


def _command(program: str, flags: list[str]) -> list[str]:
  return [sys.executable, str(REPO / "baselines" / f"{program}.py"), *flags]


# linux/prctl.h and linux/capability.h: the capabilities that let root read, search and write past
# file permissions.
_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


def _as_unprivileged_user() -> None:
  """In the child, before it execs the program: where the tests run as root, drops the capabilities
  that let root write where permissions forbid it, so that the program is refused there as any other
  user is. Root keeps its uid, so the interpreter and the checkout it owns stay readable (the
  interpreter may live in root's home, which `nobody` cannot enter). Other users are unprivileged
  already."""
  if os.geteuid() != 0:
    return
  libc = ctypes.CDLL(None, use_errno=True)
  for capability in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
    if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
      raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {capability}) failed")


def run_program(program: str, flags: list[str], file_size_limit: Optional[int] = None,
                unprivileged: bool = False) -> subprocess.CompletedProcess:
  """Runs baselines/<program>.py; file_size_limit (bytes) makes writes beyond it fail as on a full disk;
  unprivileged runs it as a user who cannot write past permissions (_as_unprivileged_user)."""
  def before_exec():
    if file_size_limit:
      resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))
    if unprivileged:
      _as_unprivileged_user()

  return subprocess.run(_command(program, flags), capture_output=True, text=True, errors="replace",
                        timeout=hang_guard.SECONDS, env=shared_fixtures.program_environment(), cwd=REPO,
                        preexec_fn=before_exec)


@dataclasses.dataclass
class Workspace:
  """What the cases share: a small tile npz tree, its records, one finished run, a release server."""
  root: pathlib.Path
  npz_root: pathlib.Path  # <npz_root>/tile/xla/{train,valid,test}/*.npz
  records: pathlib.Path  # converted from npz_root
  run: pathlib.Path  # a finished tiles_train.py run (export/ included)
  release: pathlib.Path  # files served at release_url
  release_url: str


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
  """A plain static server: sizes but no published MD5, as a mirror may be."""

  def log_message(self, *args):
    pass


def _train_killed_and_resumed(root: pathlib.Path) -> list[str]:
  """Trains <root>/resumed as tile_run's run was trained, killed with SIGKILL after its first
  checkpoint (during its second epoch), then rerun. Returns the checkpoints the kill left."""
  flags = shared_fixtures.tile_run_flags(root, root / "resumed")
  killed = subprocess.Popen(_command("tiles_train", flags), env=shared_fixtures.program_environment(), cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  checkpoints = root / "resumed" / "checkpoints"
  deadline = time.monotonic() + hang_guard.SECONDS
  while not (checkpoints / "checkpoint").exists() and killed.poll() is None and time.monotonic() < deadline:
    time.sleep(0.02)
  killed.send_signal(signal.SIGKILL)
  killed.wait()
  left = sorted(path.name for path in checkpoints.glob("ckpt-*.index"))
  resumed = run_program("tiles_train", flags)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  return left


@pytest.fixture(scope="module")
def results(tmp_path_factory):
  """Runs every case, CONCURRENT_CASES at a time, beside the killed and resumed run of the resume
  test; the download cases share the release server, so they run one after the other. Returns
  {"left_by_kill": [...], "workspace": ..., "outcomes": {case name: Outcome}}."""
  root = shared_fixtures.unpack("tile_run", tmp_path_factory.mktemp("faults"))
  release = root / "release"
  release.mkdir()
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(release)))
  threading.Thread(target=server.serve_forever, daemon=True).start()
  workspace = Workspace(root, root / "npz", root / "records" / "tile" / "xla", root / "run", release,
                        f"http://127.0.0.1:{server.server_address[1]}")
  downloads = [case for case in CASES if case.program == "download"]
  with concurrent.futures.ThreadPoolExecutor(CONCURRENT_CASES) as pool:
    futures = {case.name: pool.submit(_run_case, workspace, case) for case in CASES if case not in downloads}
    sequence = pool.submit(lambda: [_run_case(workspace, case) for case in downloads])
    left_by_kill = _train_killed_and_resumed(root)
    outcomes = {name: future.result() for name, future in futures.items()}
    outcomes.update(zip((case.name for case in downloads), sequence.result()))
  server.shutdown()
  return {"left_by_kill": left_by_kill, "workspace": workspace, "outcomes": outcomes}


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


# ---- The matrix. Each case prepares its inputs in its own folder and says how to call the program.


@dataclasses.dataclass
class Call:
  """How a case calls its program, what must survive the call byte for byte, and what else to check."""
  flags: list[str]
  kept: list[pathlib.Path] = dataclasses.field(default_factory=list)  # files, or folders of files
  file_size_limit: Optional[int] = None
  copies: int = 1  # processes started at once with the same flags
  check: Optional[Callable[[list[subprocess.CompletedProcess]], None]] = None


@dataclasses.dataclass(frozen=True)
class Case:
  name: str
  program: str
  prepare: Callable[[Workspace, pathlib.Path], Call]
  message: str  # regular expression a line of stderr must match: the problem, naming the input
  status: int = 1  # 0 where the correct result is expected
  unprivileged: bool = False  # runs as _as_unprivileged_user: root may write anywhere


def _tile_dir(folder: pathlib.Path, split: str = "valid") -> pathlib.Path:
  """A fresh <folder>/npz/tile/xla/<split> holding one valid graph; returns that split folder."""
  split_dir = folder / "npz" / "tile" / "xla" / split
  split_dir.mkdir(parents=True)
  npz.write_graph(split_dir / "good.npz", tile_test_data.tile_graph(np.random.default_rng(1), "good", split, 24))
  return split_dir


def _stored_tile_arrays() -> dict:
  """A graph with 200 configs: its config_feat outgrows zipfile's first read (4 KB), so that the
  CRC is checked only once the array is streamed."""
  return graphs.graph_arrays(tile_test_data.tile_graph(np.random.default_rng(2), "g", "valid", 200))


def _crc_damaged(path: pathlib.Path) -> None:
  """An uncompressed npz whose config_feat bytes were altered, near their end, after its CRC was computed."""
  arrays = _stored_tile_arrays()
  npz.write_npz(path, arrays, compress=False)
  content = bytearray(path.read_bytes())
  tail = arrays["config_feat"].tobytes()[-96:]
  content[bytes(content).find(tail) + 48] ^= 0xFF
  path.write_bytes(bytes(content))


def _huge_header(path: pathlib.Path) -> None:
  """An npz whose config_feat header promises a 1.5 TiB array."""
  arrays = _stored_tile_arrays()
  with zipfile.ZipFile(path, "w") as archive:
    for name, array in arrays.items():
      with archive.open(name + ".npy", "w") as stream:
        if name == "config_feat":
          np.lib.format.write_array_header_1_0(stream, {"descr": "<f4", "fortran_order": False,
                                                        "shape": (17_179_869_184, 24)})
          stream.write(array.tobytes())
        else:
          np.lib.format.write_array(stream, array)


def _special(kind: str) -> Callable[[pathlib.Path], None]:
  """Makes `path` a FIFO, a dangling symbolic link or a directory."""
  return {"fifo": os.mkfifo, "dangling": lambda path: path.symlink_to(path.with_name("gone.npz")),
          "directory": lambda path: path.mkdir()}[kind]


def _predictions(workspace: Workspace, folder: pathlib.Path) -> pathlib.Path:
  """A valid predictions CSV for the workspace's test graphs."""
  path = folder / "predictions.csv"
  rows = [f"tile:xla:{p.stem},0;1;2;3;4" for p in sorted((workspace.npz_root / "tile/xla/test").glob("*.npz"))]
  path.write_text("ID,TopConfigs\n" + "\n".join(rows) + "\n")
  return path


def _old_submission(folder: pathlib.Path) -> pathlib.Path:
  path = folder / "submission.csv"
  path.write_text("ID,TopConfigs\nan earlier submission\n")
  return path


def _read_only_folder(folder: pathlib.Path) -> pathlib.Path:
  path = folder / "read_only"
  path.mkdir()
  path.chmod(0o555)
  return path


def _a_file(folder: pathlib.Path) -> pathlib.Path:
  path = folder / "a_file"
  path.write_text("in the way\n")
  return path


def _release_archive(workspace: Workspace, path: pathlib.Path) -> bytes:
  """A tar of the workspace's first two training graphs, as the release packs them."""
  with tarfile.open(path, "w") as archive:
    for source in sorted((workspace.npz_root / "tile/xla/train").glob("*.npz"))[:2]:
      archive.add(source, arcname=f"npz/tile/xla/train/{source.name}")
  return path.read_bytes()


def _damaged(content: bytes) -> bytes:
  """The same number of bytes, with a stretch inside the first member's data overwritten."""
  return content[:1024] + b"\0" * 512 + content[1536:]


ARCHIVE = download.archive_name("tile:xla", "train")


def _download_flags(workspace: Workspace, dest: pathlib.Path) -> list[str]:
  return ["--collections=tile:xla", "--splits=train", f"--dest={dest}", f"--base_url={workspace.release_url}"]


def prepare_download_under_a_file(workspace: Workspace, folder: pathlib.Path) -> Call:
  _release_archive(workspace, workspace.release / ARCHIVE)
  return Call(_download_flags(workspace, _a_file(folder) / "dest"))


def prepare_corrupt_download(workspace: Workspace, folder: pathlib.Path) -> Call:
  good = _release_archive(workspace, folder / "good.tar")
  (workspace.release / ARCHIVE).write_bytes(_damaged(good))  # the server's copy is corrupt, no MD5 to tell
  dest = folder / "dest"

  def check(completed):
    assert (dest / f"{ARCHIVE}.corrupt").read_bytes() == _damaged(good) and not (dest / ARCHIVE).exists()
    (workspace.release / ARCHIVE).write_bytes(good)  # the server is fixed: a rerun fetches and installs
    rerun = run_program("download", _download_flags(workspace, dest))
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert download.Downloader(dest).is_installed(ARCHIVE)

  return Call(_download_flags(workspace, dest), check=check)


def prepare_corrupt_kept_archive(workspace: Workspace, folder: pathlib.Path) -> Call:
  dest = folder / "dest"
  dest.mkdir()
  good = _release_archive(workspace, folder / "good.tar")
  (workspace.release / ARCHIVE).write_bytes(good)
  (dest / ARCHIVE).write_bytes(_damaged(good))  # kept by an earlier run: right size, corrupt

  def check(completed):
    assert download.Downloader(dest).is_installed(ARCHIVE)
    assert (dest / f"{ARCHIVE}.corrupt").read_bytes() == _damaged(good)

  return Call(_download_flags(workspace, dest), check=check)


def prepare_truncated_shard(workspace: Workspace, folder: pathlib.Path) -> Call:
  output = folder / "records"
  shutil.copytree(workspace.records.parents[1], output)
  shard = output / "tile/xla/train/configs-00000-of-00001.tfrecord.gz"
  intact = shard.read_bytes()
  with open(shard, "r+b") as stream:
    stream.truncate(len(intact) // 2)

  def check(completed):
    assert shard.read_bytes() == intact
    assert "skipped 6 already converted" in completed[0].stdout  # valid and test were intact

  return Call([f"--input_dir={workspace.npz_root}", f"--output_dir={output}"], check=check)


def prepare_two_converters(workspace: Workspace, folder: pathlib.Path) -> Call:
  output = folder / "records"

  def check(completed):
    for name in ("train/manifest.json", "train/configs-00000-of-00001.tfrecord.gz", "valid/shard-00000-of-00001.json"):
      assert (output / "tile/xla" / name).read_bytes() == (workspace.records / name).read_bytes()

  return Call([f"--input_dir={workspace.npz_root}", f"--output_dir={output}"], copies=2, check=check)


def prepare_full_disk_convert(workspace: Workspace, folder: pathlib.Path) -> Call:
  output = folder / "records"

  def check(completed):  # what was written stays valid; the rest follows once there is room
    convert.convert_directory(workspace.npz_root, output, progress=False)
    assert (output / "tile/xla/train/manifest.json").read_bytes() == (workspace.records / "train/manifest.json").read_bytes()

  return Call([f"--input_dir={workspace.npz_root}", f"--output_dir={output}"], file_size_limit=3000, check=check)


def prepare_changed_model_flags(workspace: Workspace, folder: pathlib.Path) -> Call:
  flags = [*_rerun_flags(workspace, workspace.run), "--units=32"]
  return Call(flags, kept=[workspace.run / "config.json", workspace.run / "checkpoints", workspace.run / "export"])


def _tree_with(kind: Callable[[pathlib.Path], None], folder: pathlib.Path) -> pathlib.Path:
  """<folder>/npz: a tile tree holding bad.npz, made by `kind`, beside a good graph."""
  kind(_tile_dir(folder) / "bad.npz")
  return folder / "npz"


def _flags(*flags: str):
  """prepare() for a case that is only flags ('{run}', '{export}', '{case}', ... filled in), refused
  before anything is written: the case's folder stays empty."""
  def prepare(workspace: Workspace, folder: pathlib.Path) -> Call:
    fill = {"run": workspace.run, "export": workspace.run / "export", "case": folder,
            "embedded": locations.EMBEDDED_NPZ, "test_graph": sorted((workspace.npz_root / "tile/xla/test").glob("*.npz"))[0]}

    def nothing_written(completed):
      assert not list(folder.iterdir())

    return Call([flag.format(**fill) for flag in flags], check=nothing_written)
  return prepare


def _with(make: Callable[[Workspace, pathlib.Path], list[str]], **call):
  def prepare(workspace: Workspace, folder: pathlib.Path) -> Call:
    return Call(make(workspace, folder), **call)
  return prepare


def _stats_of(kind):
  return _with(lambda workspace, folder: [f"--data_dir={_tree_with(kind, folder)}"])


def _convert_of(kind):
  return _with(lambda workspace, folder: [f"--input_dir={_tree_with(kind, folder)}", f"--output_dir={folder / 'records'}"])


def _featurize_fifo(workspace, folder):
  os.mkfifo(folder / "in.pb")
  return [f"--input={folder / 'in.pb'}", f"--output_dir={folder / 'out'}"]


def _rank_of(kind):
  def make(workspace, folder):
    kind(folder / "bad.npz")
    return [f"--model={workspace.run / 'export'}", f"--input={folder / 'bad.npz'}"]
  return _with(make)


def _combine(data_root: Callable[[Workspace, pathlib.Path], pathlib.Path],
             output: Callable[[pathlib.Path], pathlib.Path] = lambda folder: folder / "submission.csv",
             predictions: Callable[[Workspace, pathlib.Path], pathlib.Path] = _predictions, **call):
  def prepare(workspace: Workspace, folder: pathlib.Path) -> Call:
    old = _old_submission(folder)
    flags = [f"--predictions={predictions(workspace, folder)}", f"--data_root={data_root(workspace, folder)}",
             f"--output={output(folder)}"]
    return Call(flags, kept=[old], **call)
  return prepare


def _non_utf8_predictions(workspace, folder):
  path = folder / "latin1.csv"
  path.write_bytes("ID,TopConfigs\ntile:xla:caf\xe9,0;1;2;3;4\n".encode("latin-1"))
  return path


def _empty_root(workspace, folder):
  (folder / "empty").mkdir()
  return folder / "empty"


def _run_copy(workspace: Workspace, folder: pathlib.Path) -> pathlib.Path:
  """A copy of the trained run (finished: 2 epochs, checkpoints ckpt-1 and ckpt-2)."""
  shutil.copytree(workspace.run, folder / "run")
  return folder / "run"


def _rerun_flags(workspace: Workspace, run: pathlib.Path) -> list[str]:
  return shared_fixtures.tile_run_flags(workspace.root, run)


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


def prepare_rank_json_naming_its_input(workspace: Workspace, folder: pathlib.Path) -> Call:
  graph = folder / "graph.npz"
  shutil.copy(sorted((workspace.npz_root / "tile/xla/test").glob("*.npz"))[0], graph)
  return Call([f"--model={workspace.run / 'export'}", f"--input={graph}", f"--json={graph}"], kept=[graph])


def prepare_convert_empty_folder(workspace: Workspace, folder: pathlib.Path) -> Call:
  (folder / "empty").mkdir()

  def check(completed):
    assert not (folder / "records").exists()

  return Call([f"--input_dir={folder / 'empty'}", f"--output_dir={folder / 'records'}"], check=check)


def prepare_convert_graph_id_with_colon(workspace: Workspace, folder: pathlib.Path) -> Call:
  split_dir = _tile_dir(folder, "test")
  shutil.copy(split_dir / "good.npz", split_dir / "a:b.npz")

  def check(completed):  # refused before the good file was converted
    assert not (folder / "records").exists()

  return Call([f"--input_dir={folder / 'npz'}", f"--output_dir={folder / 'records'}"], check=check)


UNUSUAL_NAME = "gräph with spaces, and a comma"  # any file name a file system allows, but ':'


def prepare_convert_unusual_file_name(workspace: Workspace, folder: pathlib.Path) -> Call:
  split_dir = _tile_dir(folder, "test")
  shutil.copy(split_dir / "good.npz", split_dir / f"{UNUSUAL_NAME}.npz")

  def check(completed):
    assert len(list((folder / "records" / "tile" / "xla" / "test").glob("*.tfrecord.gz"))) >= 1

  return Call([f"--input_dir={folder / 'npz'}", f"--output_dir={folder / 'records'}"], check=check)


def prepare_rank_unusual_file_name(workspace: Workspace, folder: pathlib.Path) -> Call:
  graph = folder / f"{UNUSUAL_NAME}.npz"
  shutil.copy(sorted((workspace.npz_root / "tile/xla/test").glob("*.npz"))[0], graph)

  def check(completed):
    [ranked] = json.loads((folder / "best.json").read_text())
    assert ranked["id"] == UNUSUAL_NAME

  return Call([f"--model={workspace.run / 'export'}", f"--input={graph}", f"--json={folder / 'best.json'}"],
              check=check)


def prepare_combine_unusual_test_file_name(workspace: Workspace, folder: pathlib.Path) -> Call:
  """A data root whose test graph's file name Kaggle has no ID for; predictions that rank it."""
  split_dir = _tile_dir(folder, "test")
  (split_dir / "good.npz").rename(split_dir / f"{UNUSUAL_NAME}.npz")
  predictions = folder / "predictions.csv"
  predictions.write_text(f'ID,TopConfigs\n"tile:xla:{UNUSUAL_NAME}",0;1;2;3;4\n')
  old = _old_submission(folder)
  return Call([f"--predictions={predictions}", f"--data_root={folder / 'npz'}", f"--output={old}"], kept=[old])


def prepare_combine_runs_of_other_data(workspace: Workspace, folder: pathlib.Path) -> Call:
  """Runs whose predictions combine_csvs.py passes over: one of another data root, one without config.json."""
  for name, config in (("elsewhere", {"experiment": {"data_root": "/data/another/npz"}}), ("bare", None)):
    run = folder / "runs" / name
    run.mkdir(parents=True)
    shutil.copy(_predictions(workspace, folder), run / "predictions.csv")
    if config is not None:
      (run / "config.json").write_text(json.dumps(config))

  def check(completed):
    assert not (folder / "submission.csv").exists()

  return Call([f"--runs_dir={folder / 'runs'}", f"--data_root={workspace.npz_root}",
               f"--output={folder / 'submission.csv'}"], check=check)


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


def prepare_evaluate_split_nothing_measured(workspace: Workspace, folder: pathlib.Path) -> Call:
  """A valid split whose graphs all have runtimes 0: labelled, yet nothing to compute metrics on."""
  split_dir = folder / "npz" / "tile" / "xla" / "valid"
  for index in range(2):
    graph = tile_test_data.tile_graph(np.random.default_rng(index), f"unmeasured_{index}", "valid", 24)
    npz.write_graph(split_dir / f"{graph.graph_id}.npz",
                    dataclasses.replace(graph, config_runtime=np.zeros_like(graph.config_runtime)))

  def check(completed):  # refused before converting or writing anything
    assert not (folder / "eval").exists()

  return Call([f"--run_dir={workspace.run}", f"--data_root={folder / 'npz'}", "--split=valid",
               f"--out_dir={folder / 'eval'}"], check=check)


CASES = [
    # Bad input files: refused naming the file, no hang on special files.
    Case("stats_fifo_named_npz", "stats", _stats_of(_special("fifo")), r"bad\.npz: a FIFO \(named pipe\)"),
    Case("stats_dangling_symlink", "stats", _stats_of(_special("dangling")), r"bad\.npz: a dangling symbolic link"),
    Case("stats_directory_named_npz", "stats", _stats_of(_special("directory")), r"bad\.npz: a directory, not a file"),
    Case("stats_header_claims_1_5_tib", "stats", _stats_of(_huge_header), r"bad\.npz: 'config_feat' header promises"),
    Case("convert_fifo_named_npz", "convert", _convert_of(_special("fifo")), r"bad\.npz: a FIFO \(named pipe\)"),
    Case("convert_crc_error_in_streamed_array", "convert", _convert_of(_crc_damaged),
         r"bad\.npz: 'config_feat' is unreadable \(BadZipFile: Bad CRC-32 for file 'config_feat\.npy'\)"),
    Case("rank_fifo_named_npz", "rank", _rank_of(_special("fifo")), r"bad\.npz: a FIFO \(named pipe\)"),
    Case("featurize_fifo_input", "featurize", _with(_featurize_fifo), r"in\.pb: a FIFO \(named pipe\)"),
    Case("combine_non_utf8_csv", "combine_csvs", _combine(lambda workspace, folder: workspace.npz_root,
                                                          predictions=_non_utf8_predictions),
         r"latin1\.csv: not UTF-8 text"),
    Case("combine_data_root_without_test_files", "combine_csvs", _combine(_empty_root),
         r"empty: no test-split \.npz files"),
    Case("evaluate_tile_run_as_layout", "evaluate",
         _flags("--collection=layout:xla:default", "--run_dir={run}", "--data_root={embedded}", "--out_dir={case}/eval"),
         r"trained a TileTask, which cannot score layout:xla:default graphs"),
    Case("evaluate_labelled_split_with_nothing_measured", "evaluate", prepare_evaluate_split_nothing_measured,
         r"valid: no graph of the valid split has a measured runtime \(every config_runtime is 0\), so there is "
         r"nothing to evaluate against; for predictions only, put the files in a test/ folder and pass --split test"),
    Case("tiles_train_epochs_0", "tiles_train", _flags("--epochs=0", "--out_dir={case}/run"), r"--epochs must be at least 1"),
    Case("layout_train_epochs_0", "layout_train", _flags("--epochs=0", "--out_dir={case}/run"),
         r"--epochs must be at least 1"),
    Case("rank_top_negative", "rank", _flags("--model={export}", "--input={test_graph}", "--top=-1"),
         r"--top must be at least 1"),
    Case("rank_num_candidates_of_an_npz", "rank", _flags("--model={export}", "--input={test_graph}",
                                                         "--num_candidates=5"),
         r"\.npz: an npz file carries its graph and configs; --kernels and --num_candidates are for an HLO module "
         r"\(\.pb\)"),
    Case("generate_unknown_architecture", "generate", _flags("--architectures=resnet50,bogus", "--output_dir={case}/gen"),
         r"--architectures: unknown architecture\(s\) 'bogus'"),
    Case("convert_beam_unknown_pipeline_option", "convert_beam",
         _flags("--input_dir={embedded}", "--output_dir={case}/records", "--", "--direct_num_workerz=2"),
         r"Beam pipeline options: unknown option\(s\) --direct_num_workerz"),
    Case("convert_empty_folder", "convert", prepare_convert_empty_folder, r"empty: no \.npz files below this folder"),
    Case("convert_graph_id_with_colon", "convert", prepare_convert_graph_id_with_colon,
         r"a:b\.npz: graph id 'a:b' \(the file name\) cannot end the ID '<collection>:<graph id>' of its "
         r"prediction rows, which is split at ':'; rename the file without ':'"),
    # File names only a submission cannot take: converted and ranked, refused by what writes a submission.
    Case("convert_file_name_with_spaces_and_non_ascii", "convert", prepare_convert_unusual_file_name,
         r"Converted 2 graphs", status=0),
    Case("rank_file_name_with_spaces_and_non_ascii", "rank", prepare_rank_unusual_file_name,
         rf":{UNUSUAL_NAME}: \d+ configs, best first", status=0),
    Case("combine_test_file_name_kaggle_has_no_id_for", "combine_csvs", prepare_combine_unusual_test_file_name,
         rf"{UNUSUAL_NAME}\.npz: graph id '{UNUSUAL_NAME}' \(the file name\) cannot be in a Kaggle submission, whose "
         r"IDs are the release's file names \(printable ASCII, no spaces\); rename the file"),
    Case("combine_runs_trained_on_other_data", "combine_csvs", prepare_combine_runs_of_other_data,
         r"runs: 2 predictions\.csv found, none of a run trained on .*: .*bare/predictions\.csv: no config\.json "
         r"beside it records its data root; .*elsewhere/predictions\.csv: trained on .*another.*, not "),
    Case("download_unknown_collection", "download", _flags("--collections=tile:tpu", "--dest={case}/dest"),
         r"--collections: unknown collection 'tile:tpu'"),
    # Unusable output paths: a file where a folder should be, a special file, a full disk.
    Case("convert_output_under_a_file", "convert",
         _with(lambda workspace, folder: [f"--input_dir={workspace.npz_root}", f"--output_dir={_a_file(folder)}/records"]),
         r"a_file/records.*: Not a directory|a_file: File exists"),
    Case("convert_into_a_read_only_folder", "convert",
         _with(lambda workspace, folder: [f"--input_dir={workspace.npz_root}",
                                          f"--output_dir={_read_only_folder(folder)}/records"]),
         r"read_only/records.*: Permission denied", unprivileged=True),
    Case("combine_output_under_a_file", "combine_csvs",
         _combine(lambda workspace, folder: workspace.npz_root, output=lambda folder: _a_file(folder) / "submission.csv"),
         r"a_file: File exists|a_file.*: Not a directory"),
    Case("combine_disk_full", "combine_csvs",
         _combine(lambda workspace, folder: workspace.npz_root, file_size_limit=16), r"submission\.csv: File too large"),
    Case("rank_json_naming_its_input", "rank", prepare_rank_json_naming_its_input,
         r"graph\.npz: --json would overwrite the input .*graph\.npz"),
    Case("rank_json_to_dev_full", "rank", _flags("--model={export}", "--input={test_graph}", "--json=/dev/full"),
         r"/dev/full: a device or socket, not a regular file; refusing to replace it"),
    Case("download_dest_under_a_file", "download", prepare_download_under_a_file,
         r"a_file.*: Not a directory|a_file: File exists"),
    Case("convert_disk_full_then_rerun", "convert", prepare_full_disk_convert, r"\.tfrecord\.gz: File too large"),
    # Earlier results that changed or collide: verified, redone or refused, nothing lost.
    Case("convert_truncated_finished_shard_is_redone", "convert", prepare_truncated_shard,
         r"configs-00000-of-00001\.tfrecord\.gz has \d+ bytes, \d+ were written; converting the shard again", status=0),
    Case("convert_two_converters_in_one_folder", "convert", prepare_two_converters, r"Converted \d+ graphs, skipped \d+ already converted", status=0),
    Case("layout_train_into_a_tile_run", "layout_train", prepare_layout_train_into_a_tile_run,
         r"config\.json: this run was configured otherwise \(.*task 'TileTask' -> 'LayoutTask'"),
    # Damaged run directories: resumed from what verifies, or refused naming the file and how to start over.
    Case("tiles_train_rerun_keeps_the_library_compiled_from_its_export", "tiles_train",
         prepare_rerun_with_a_compiled_library, r"resume: all 2 epoch\(s\) trained already", status=0),
    Case("tiles_train_truncated_config_json", "tiles_train", _damaged_run(lambda run: _truncate(run / "config.json")),
         r"config\.json: damaged \(JSONDecodeError: .*\); delete .*run .*to start over"),
    Case("tiles_train_newest_checkpoint_damaged_resumes_from_the_previous", "tiles_train",
         prepare_newest_checkpoint_damaged, r"ckpt-2: damaged \(.*\); resuming from .*ckpt-1", status=0),
    Case("tiles_train_loss_becomes_nan", "tiles_train", prepare_diverging_learning_rate,
         r"the training loss became (nan|inf) in epoch 0 .*stopped, nothing of epoch 0 was saved"),
    Case("download_corrupt_archive_without_md5", "download", prepare_corrupt_download,
         rf"{ARCHIVE}: corrupt, moved it to .*{ARCHIVE}\.corrupt \(a rerun fetches it again\)"),
    Case("download_corrupt_archive_kept_by_an_earlier_run", "download", prepare_corrupt_kept_archive,
         rf"{ARCHIVE}: kept from an earlier run but corrupt, moved it to .*\.corrupt; fetching it again", status=0),
]


@dataclasses.dataclass
class Outcome:
  call: Call
  completed: list[subprocess.CompletedProcess]
  kept_before: dict
  kept_after: dict
  check_failure: Optional[BaseException]  # what call.check raised, run at once (the server is still up)


def _contents(paths: list[pathlib.Path]) -> dict:
  files = [f for path in paths for f in ([path] if path.is_file() else sorted(path.rglob("*")))]
  return {str(f): f.read_bytes() for f in files if f.is_file()}


def _run_case(workspace: Workspace, case: Case) -> Outcome:
  folder = workspace.root / "cases" / case.name
  folder.mkdir(parents=True)
  call = case.prepare(workspace, folder)
  before = _contents(call.kept)
  with concurrent.futures.ThreadPoolExecutor(call.copies) as pool:
    completed = list(pool.map(lambda _: run_program(case.program, call.flags, call.file_size_limit,
                                                    case.unprivileged), range(call.copies)))
  after = _contents(call.kept)
  try:
    if call.check:
      call.check(completed)
  except Exception as failure:  # pylint: disable=broad-except
    return Outcome(call, completed, before, after, failure)
  return Outcome(call, completed, before, after, None)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_fault_ends_in_one_clean_line_or_the_correct_result_and_loses_nothing(case, results):
  outcome = results["outcomes"][case.name]
  for completed in outcome.completed:
    report = f"exit {completed.returncode}\nstdout:\n{completed.stdout[-1500:]}\nstderr:\n{completed.stderr[-3000:]}"
    assert completed.returncode == case.status, report
    assert "Traceback" not in completed.stderr, report
    lines = [line for line in (completed.stderr + completed.stdout).splitlines() if line.strip()]
    assert any(re.search(case.message, line) for line in lines), report
    if case.status:  # the program's own report, or absl's for a flag
      assert "Flags parsing error" in completed.stderr or any(line.startswith(f"{case.program}: ") for line in lines), \
          report
  assert outcome.kept_after == outcome.kept_before
  if outcome.check_failure:
    raise outcome.check_failure


# ---- The training program in this process: where the subprocess adds nothing to what the cases above
# check of every program (absl's flag error or one line naming the problem, exit status 1, no
# traceback: also tests/test_programs.py), tiles_train.py's own main gets the flags.


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
  before = _contents(call.kept)
  with pytest.raises(errors.InputError, match=message):
    program_modules.run_main("tiles_train", call.flags)
  assert _contents(call.kept) == before


# ---- Kinds checked in one process: where numbers and files enter, each the one check of its kind.


def _layout_arrays(**replaced) -> dict:
  """A labelled layout graph of 4 ops (3 configurable) and 4 configs, with `replaced` arrays."""
  arrays = {"node_feat": np.zeros((4, graphs.NODE_FEATURE_WIDTH), np.float32), "node_opcode": np.ones(4, np.uint8),
            "edge_index": np.array([[1, 0], [2, 1], [3, 2]], np.int64), "node_config_ids": np.arange(3, dtype=np.int64),
            "node_config_feat": np.tile(np.array([0, 1, -1] * 6, np.float32), (4, 3, 1)),
            "config_runtime": np.array([4, 3, 2, 1], np.int64), "node_splits": np.array([[0]], np.int64)}
  return {**arrays, **replaced}


def _with_value(array: np.ndarray, value: float) -> np.ndarray:
  changed = array.astype(np.float64 if abs(value) > 3e38 else array.dtype)
  changed.flat[5] = value
  return changed


@pytest.mark.parametrize("split, replaced, message", [
    ("train", {"node_feat": _with_value(np.zeros((4, 140)), 1e39)}, r"'node_feat' holds 1e\+39, beyond float32's range"),
    ("test", {"node_config_feat": _with_value(_layout_arrays()["node_config_feat"], 50)},
     r"'node_config_feat'\[0, 0, 5\] = 50 is not a layout value"),
    ("valid", {"node_config_feat": _with_value(_layout_arrays()["node_config_feat"], 2.5)},
     r"'node_config_feat'\[0, 0, 5\] = 2.5 is not a layout value"),
    ("train", {"config_runtime": np.zeros(4, np.int64)}, r"'config_runtime' is all 0 \(nothing measured\) in the training"),
    ("valid", {"config_runtime": np.array([0, 5, 6, 7], np.int64)},
     r"'config_runtime' is 0 at config 0 \(1 of 4 configs\) in labelled split valid, while others are measured"),
    ("train", {"node_config_ids": np.zeros(0, np.int64), "node_config_feat": np.zeros((4, 0, 18), np.float32)},
     r"'node_config_ids' is empty: no node is configurable"),
], ids=["float64_beyond_float32", "layout_value_50", "layout_value_2_5", "unmeasured_training_graph",
        "partly_measured_validation_graph", "no_configurable_node"])
@pytest.mark.parametrize("streamed", [False, True], ids=["loaded", "streamed"])
def test_reader_refuses_values_the_format_does_not_allow(tmp_path, split, replaced, message, streamed):
  path = tmp_path / "layout/xla/default" / split / "g.npz"
  npz.write_npz(path, _layout_arrays(**replaced))
  with pytest.raises(graphs.GraphFileError, match=message):
    graph = npz.read_graph(path, stream_configs=streamed)
    np.asarray(graph.node_config_feat)  # a streamed array's values are checked as they are read


def test_unmeasured_validation_graph_is_left_out_of_the_metrics_and_listed(tmp_path):
  path = tmp_path / "layout/xla/default/valid/unmeasured.npz"
  npz.write_npz(path, _layout_arrays(config_runtime=np.zeros(4, np.int64)))
  graph = npz.read_graph(path)  # accepted, with a warning
  scored = {"layout:xla:default:unmeasured": (graph.runtimes(), np.arange(4.0)),
            "layout:xla:default:measured": (np.array([4.0, 3, 2, 1]), np.array([3.0, 2, 1, 0]))}
  result = scoring.evaluate(tasks.LayoutTask(), scored)
  assert result["unmeasured"] == ["layout:xla:default:unmeasured"] and result["graphs"] == 1
  assert result["mean"]["kendall_tau"] == 1.0
  with pytest.raises(errors.InputError, match="no scored graph has a measured runtime"):
    scoring.evaluate(tasks.LayoutTask(), {"layout:xla:default:unmeasured": scored["layout:xla:default:unmeasured"]})


@pytest.mark.parametrize("metric", [metrics.kendall_tau, metrics.ordered_pair_accuracy, metrics.tile_score,
                                    lambda runtimes, scores: metrics.top_k_slowdown(runtimes, scores, 1)],
                         ids=["kendall_tau", "opa", "tile_score", "top1_slowdown"])
@pytest.mark.parametrize("scores", [np.full(6, np.nan), np.array([0, 1, np.nan, 3, 4, 5]), np.array([0, np.inf, 2, 3, 4, 5])],
                         ids=["all_nan", "one_nan", "one_inf"])
def test_metrics_of_scores_that_are_not_numbers_are_nan_never_perfect(metric, scores):
  assert np.isnan(metric(np.arange(1.0, 7.0), scores))


@pytest.mark.parametrize("spec, message", [("listmle:-1", "not a finite number >= 0"), ("mse:nan", "not a finite number"),
                                           ("listmle:inf", "not a finite number"), ("listmle:0,mse:0", "every loss weight")])
def test_loss_weights_that_would_train_to_nan_or_backwards_are_refused(spec, message):
  with pytest.raises(ValueError, match=message):
    losses.parse_loss_spec(spec)


@pytest.mark.parametrize("module, message", malformed_modules.CASES)
def test_featurizer_refuses_malformed_modules_naming_module_instruction_and_problem(tmp_path, module, message):
  path = tmp_path / "in.pb"
  path.write_bytes(module.SerializeToString())
  with pytest.raises(graphs.GraphFileError, match=message):
    featurize.graphs_from_file(path)
  with pytest.raises(graphs.GraphFileError, match=message):
    fusion_kernels.kernel_modules(module)


def _small_checkpoints(directory: pathlib.Path) -> None:
  """ckpt-1 and ckpt-2 of one variable (1 and 2) in `directory`, as the trainer's manager keeps them."""
  variable = tf.Variable(0.0)
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=variable), str(directory), max_to_keep=2)
  for number in (1, 2):
    variable.assign(float(number))
    manager.save(checkpoint_number=number)


def test_damaged_checkpoint_state_file_is_rewritten_rather_than_restarting_the_run(tmp_path):
  _small_checkpoints(tmp_path)
  (tmp_path / "checkpoint").write_text("garbage {")  # TensorFlow alone would ignore it: no checkpoint
  assert run_directory.newest_intact_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-2")
  assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-2")


def test_damaged_newest_checkpoint_gives_the_previous_one(tmp_path):
  _small_checkpoints(tmp_path)
  _truncate(tmp_path / "ckpt-2.index")
  assert run_directory.newest_intact_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-1")
  assert tf.train.load_checkpoint(str(tmp_path / "ckpt-1")).get_tensor("v/.ATTRIBUTES/VARIABLE_VALUE") == 1.0


def test_edited_shard_json_is_not_believed_and_the_shard_is_converted_again(tmp_path):
  npz_root = tile_test_data.write_tile_tree(tmp_path, {"valid": 2}, num_configs=8)
  convert.convert_directory(npz_root, tmp_path / "records", progress=False)
  shard_json = tmp_path / "records/tile/xla/valid/shard-00000-of-00001.json"
  written = shard_json.read_text()
  shard = json.loads(written)
  shard["graphs"][0]["configs"] += 100  # readers would believe this count
  shard_json.write_text(json.dumps(shard))
  summary = convert.convert_directory(npz_root, tmp_path / "records", progress=False)
  assert summary.graphs_written == 2 and shard_json.read_text() == written


def test_edited_manifest_is_refused_when_records_are_read(tmp_path):
  npz_root = tile_test_data.write_tile_tree(tmp_path, {"valid": 2}, num_configs=8)
  convert.convert_directory(npz_root, tmp_path / "records", progress=False)
  records_dir = tmp_path / "records/tile/xla/valid"
  manifest = json.loads((records_dir / "manifest.json").read_text())
  manifest["shards"][0]["graphs"][0]["chunks"] += 1  # readers would pair structures with wrong chunks
  (records_dir / "manifest.json").write_text(json.dumps(manifest))
  with pytest.raises(errors.InputError, match=r"manifest.json: shard 0 was edited since it was converted"):
    readers.read_manifest(records_dir)
  (records_dir / "manifest.json").write_text("{")
  with pytest.raises(errors.InputError, match=r"manifest.json: damaged \(JSONDecodeError"):
    readers.read_manifest(records_dir)


class _HeadOnlyHandler(http.server.BaseHTTPRequestHandler):
  """Answers HEAD with a size and never answers GET (until the test lets it go): a server that hangs."""

  def do_HEAD(self):  # pylint: disable=invalid-name
    self.send_response(200)
    self.send_header("Content-Length", "1000")
    self.end_headers()

  def do_GET(self):  # pylint: disable=invalid-name
    self.server.released.wait()

  def log_message(self, *args):
    pass


def test_download_from_a_server_that_never_answers_gives_up_within_its_wait_budget(tmp_path, monkeypatch):
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HeadOnlyHandler)
  server.daemon_threads, server.released = True, threading.Event()
  threading.Thread(target=server.serve_forever, daemon=True).start()
  url = f"http://127.0.0.1:{server.server_address[1]}"
  timeouts = []  # every connection's socket timeout: the budget, not timeout_seconds, bounds each wait

  def urlopen(request, timeout):
    timeouts.append(timeout)
    return opened(request, timeout=timeout)

  opened = urllib.request.urlopen
  monkeypatch.setattr(urllib.request, "urlopen", urlopen)
  said = io.StringIO()
  downloader = download.Downloader(tmp_path, base_url=url, backoff_seconds=0.5, timeout_seconds=60.0,
                                   wait_seconds=2.0, progress=said)
  try:
    with pytest.raises(download.DownloadError,
                       match=r"gave up after waiting \d+ s for the server \(--wait_seconds 2\)"):
      downloader.install("tile:xla", "train")
  finally:
    server.released.set()
    server.shutdown()
  assert len(timeouts) >= 2 and max(timeouts) <= 2.0  # the HEAD and at least one GET, none past the budget
  assert f"fetching {url}/{ARCHIVE}" in said.getvalue()


def test_second_downloader_into_one_folder_waits_for_the_first_and_says_so(tmp_path):
  release = tmp_path / "release"
  release.mkdir()
  npz_root = tile_test_data.write_tile_tree(tmp_path, {"train": 2}, num_configs=8)
  workspace = Workspace(tmp_path, npz_root, tmp_path, tmp_path, release, "")
  _release_archive(workspace, release / ARCHIVE)
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(release)))
  threading.Thread(target=server.serve_forever, daemon=True).start()
  dest, said = tmp_path / "dest", io.StringIO()
  dest.mkdir()
  downloader = download.Downloader(dest, base_url=f"http://127.0.0.1:{server.server_address[1]}", progress=said)
  with storage.exclusive_lock(dest / ".download.lock", lambda: None):  # another downloader is at work
    second = concurrent.futures.ThreadPoolExecutor(1).submit(downloader.install, "tile:xla", "train")
    deadline = time.monotonic() + hang_guard.SECONDS
    while "another download is writing here; waiting" not in said.getvalue() and time.monotonic() < deadline:
      time.sleep(0.05)
    assert "another download is writing here; waiting" in said.getvalue()
    assert not second.done() and not list(dest.glob("*.part"))
  assert second.result(timeout=hang_guard.SECONDS) and downloader.is_installed(ARCHIVE)
  server.shutdown()


@pytest.mark.parametrize("options, message", [(["--runner=NoSuchRunner"], "--runner: Unexpected pipeline runner"),
                                              (["--direct_num_workers=many"], "invalid int value: 'many'")])
def test_bad_beam_pipeline_options_are_refused_in_one_line(options, message):
  with pytest.raises(beam_pipeline.PipelineOptionError, match=message):
    beam_pipeline.checked_options(options)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
