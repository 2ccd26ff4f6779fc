"""Fault matrix: every program run as a hostile but fair user would, each case a real subprocess.

A case gives a program bad input (corrupt, special or missing files), a bad flag, an unusable
output path (a file where a folder should be, a full disk: a file-size limit the kernel enforces,
which works unprivileged) or a damaged earlier result, and expects either the correct result or
exit status 1 with a line naming the input and the problem: never a traceback, never a hang, and
nothing already written lost. A tile run killed with SIGKILL during its second epoch and rerun
must end exactly as an uninterrupted run: every tensor of its checkpoint and its history.

The cases share one small tile dataset and one trained run (module fixtures) and run a few at a
time, since most of each one's time is importing TensorFlow.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import http.server
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
import zipfile
from typing import Callable, Optional

import numpy as np
import pytest
import tensorflow as tf

import tile_test_data
from tpu_graphs.data import convert, download, graphs, locations, npz

REPO = pathlib.Path(__file__).resolve().parents[1]
TRAINING_FLAGS = ["--epochs=2", "--batch_size=4", "--configs_per_graph=8", "--units=16", "--layers=1",
                  "--learning_rate=3e-3", "--patience=3"]
CONCURRENT_CASES = 3


def _environment() -> dict:
  """The children import this checkout's tpu_graphs, whatever is installed."""
  paths = [str(REPO)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
  return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "TF_CPP_MIN_LOG_LEVEL": "2"}


def _command(program: str, flags: list[str]) -> list[str]:
  return [sys.executable, str(REPO / "baselines" / f"{program}.py"), *flags]


def run_program(program: str, flags: list[str], file_size_limit: Optional[int] = None,
                timeout: float = 300) -> subprocess.CompletedProcess:
  """Runs baselines/<program>.py; file_size_limit (bytes) makes writes beyond it fail as on a full disk."""
  limit = (lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))) \
      if file_size_limit else None
  return subprocess.run(_command(program, flags), capture_output=True, text=True, errors="replace", timeout=timeout,
                        env=_environment(), cwd=REPO, preexec_fn=limit)


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


def write_tied_tile_tree(root: pathlib.Path, graphs_per_split: dict) -> pathlib.Path:
  """<root>/npz/tile/xla/<split>/*.npz whose measured runtimes take 4 values per kernel, so that
  sampled configs tie, as measured runtimes often do (ties are where ListMLE draws at random)."""
  rng = np.random.default_rng(0)
  for split, count in graphs_per_split.items():
    for index in range(count):
      graph = tile_test_data.tile_graph(rng, f"{split}_kernel_{index:03d}", split, 24)
      if split != "test":
        levels = np.quantile(graph.config_runtime, [0.25, 0.5, 0.75])
        graph = dataclasses.replace(graph, config_runtime=(np.searchsorted(levels, graph.config_runtime) + 1) * 1000)
      npz.write_graph(root / "npz/tile/xla" / split / f"{graph.graph_id}.npz", graph)
  return root / "npz"


def _train_killed_and_whole(root: pathlib.Path, npz_root: pathlib.Path) -> list[str]:
  """Trains two tile runs of the default loss: <root>/whole, uninterrupted, and <root>/resumed,
  killed with SIGKILL after its first checkpoint (during its second epoch), then rerun. Returns the
  checkpoints the kill left."""
  flags = lambda name: [f"--data_root={npz_root}", f"--records_dir={root / 'records'}", f"--out_dir={root / name}",
                        *TRAINING_FLAGS]
  whole = subprocess.Popen(_command("tiles_train", flags("whole")), env=_environment(), cwd=REPO,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
  killed = subprocess.Popen(_command("tiles_train", flags("resumed")), env=_environment(), cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  checkpoints = root / "resumed" / "checkpoints"
  deadline = time.monotonic() + 600
  while not (checkpoints / "checkpoint").exists() and killed.poll() is None and time.monotonic() < deadline:
    time.sleep(0.02)
  killed.send_signal(signal.SIGKILL)
  killed.wait()
  left = sorted(path.name for path in checkpoints.glob("ckpt-*.index"))
  assert whole.wait(timeout=600) == 0, whole.stderr.read()[-3000:]
  resumed = run_program("tiles_train", flags("resumed"))
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  return left


@pytest.fixture(scope="module")
def results(tmp_path_factory):
  """Trains the runs of the resume test while the cases that need no trained run run beside it,
  CONCURRENT_CASES at a time; then the rest. Returns {"left_by_kill": [...], "workspace": ...,
  "outcomes": {case name: Outcome}}. The download cases share the release server, so they run one
  after the other."""
  root = tmp_path_factory.mktemp("faults")
  npz_root = write_tied_tile_tree(root, {"train": 24, "valid": 4, "test": 2})
  convert.convert_directory(npz_root, root / "records", progress=False)
  release = root / "release"
  release.mkdir()
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(release)))
  threading.Thread(target=server.serve_forever, daemon=True).start()
  workspace = Workspace(root, npz_root, root / "records" / "tile" / "xla", root / "whole", release,
                        f"http://127.0.0.1:{server.server_address[1]}")
  cases = [case for case in CASES if not (case.unprivileged and os.geteuid() == 0)]
  downloads = [case for case in cases if case.program == "download"]
  with concurrent.futures.ThreadPoolExecutor(CONCURRENT_CASES) as pool:
    futures = {case.name: pool.submit(_run_case, workspace, case) for case in cases
               if not case.after_training and case not in downloads}
    sequence = pool.submit(lambda: [_run_case(workspace, case) for case in downloads])
    left_by_kill = _train_killed_and_whole(root, npz_root)
    futures.update({case.name: pool.submit(_run_case, workspace, case) for case in cases if case.after_training})
    outcomes = {name: future.result() for name, future in futures.items()}
    outcomes.update(zip((case.name for case in downloads), sequence.result()))
  server.shutdown()
  return {"left_by_kill": left_by_kill, "workspace": workspace, "outcomes": outcomes}


def test_run_killed_during_its_second_epoch_resumes_to_every_tensor_and_the_history_of_an_uninterrupted_run(results):
  assert results["left_by_kill"] == ["ckpt-1.index"]  # killed after epoch 1's checkpoint, before epoch 2's
  root = results["workspace"].root
  whole, resumed = (tf.train.load_checkpoint(str(root / name / "checkpoints")) for name in ("whole", "resumed"))
  names = sorted(whole.get_variable_to_shape_map())
  assert names == sorted(resumed.get_variable_to_shape_map()) and len(names) > 20
  for name in names:
    if name != "_CHECKPOINTABLE_OBJECT_GRAPH":
      np.testing.assert_array_equal(resumed.get_tensor(name), whole.get_tensor(name), err_msg=name)
  history = [json.loads((root / name / "history.json").read_text()) for name in ("whole", "resumed")]
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
  after_training: bool = False  # uses the trained run (workspace.run)
  unprivileged: bool = False  # root may write anywhere: the case runs only for other users


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
  flags = [f"--data_root={workspace.npz_root}", f"--records_dir={workspace.records.parents[1]}",
           f"--out_dir={workspace.run}", *TRAINING_FLAGS, "--units=32"]
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


CASES = [
    # Bad input files: refused naming the file, no hang on special files.
    Case("stats_fifo_named_npz", "stats", _stats_of(_special("fifo")), r"bad\.npz: a FIFO \(named pipe\)"),
    Case("stats_dangling_symlink", "stats", _stats_of(_special("dangling")), r"bad\.npz: a dangling symbolic link"),
    Case("stats_directory_named_npz", "stats", _stats_of(_special("directory")), r"bad\.npz: a directory, not a file"),
    Case("stats_header_claims_1_5_tib", "stats", _stats_of(_huge_header), r"bad\.npz: 'config_feat' header promises"),
    Case("convert_fifo_named_npz", "convert", _convert_of(_special("fifo")), r"bad\.npz: a FIFO \(named pipe\)"),
    Case("convert_crc_error_in_streamed_array", "convert", _convert_of(_crc_damaged),
         r"bad\.npz: 'config_feat' is unreadable \(BadZipFile: Bad CRC-32 for file 'config_feat\.npy'\)"),
    Case("rank_fifo_named_npz", "rank", _rank_of(_special("fifo")), r"bad\.npz: a FIFO \(named pipe\)",
         after_training=True),
    Case("featurize_fifo_input", "featurize", _with(_featurize_fifo), r"in\.pb: a FIFO \(named pipe\)"),
    Case("combine_non_utf8_csv", "combine_csvs", _combine(lambda workspace, folder: workspace.npz_root,
                                                          predictions=_non_utf8_predictions),
         r"latin1\.csv: not UTF-8 text"),
    Case("combine_data_root_without_test_files", "combine_csvs", _combine(_empty_root),
         r"empty: no test-split \.npz files"),
    Case("evaluate_tile_run_as_layout", "evaluate",
         _flags("--collection=layout:xla:default", "--run_dir={run}", "--data_root={embedded}", "--out_dir={case}/eval"),
         r"trained a TileTask, which cannot score layout:xla:default graphs", after_training=True),
    Case("tiles_train_epochs_0", "tiles_train", _flags("--epochs=0", "--out_dir={case}/run"), r"--epochs must be at least 1"),
    Case("tiles_train_negative_epochs", "tiles_train", _flags("--epochs=-2", "--out_dir={case}/run"),
         r"--epochs must be at least 1"),
    Case("tiles_train_batch_size_0", "tiles_train", _flags("--batch_size=0", "--out_dir={case}/run"),
         r"--batch_size must be at least 1"),
    Case("tiles_train_configs_per_graph_0", "tiles_train", _flags("--configs_per_graph=0", "--out_dir={case}/run"),
         r"--configs_per_graph must be at least 1"),
    Case("tiles_train_unknown_loss", "tiles_train", _flags("--loss=bogus:1", "--out_dir={case}/run"),
         r"--loss: unknown ranking loss 'bogus'"),
    Case("layout_train_epochs_0", "layout_train", _flags("--epochs=0", "--out_dir={case}/run"),
         r"--epochs must be at least 1"),
    Case("rank_top_negative", "rank", _flags("--model={export}", "--input={test_graph}", "--top=-1"),
         r"--top must be at least 1"),
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
    Case("rank_json_to_dev_full", "rank", _flags("--model={export}", "--input={test_graph}", "--json=/dev/full"),
         r"/dev/full: a device or socket, not a regular file; refusing to replace it", after_training=True),
    Case("download_dest_under_a_file", "download", prepare_download_under_a_file,
         r"a_file.*: Not a directory|a_file: File exists"),
    Case("convert_disk_full_then_rerun", "convert", prepare_full_disk_convert, r"\.tfrecord\.gz: File too large"),
    # Earlier results that changed or collide: verified, redone or refused, nothing lost.
    Case("convert_truncated_finished_shard_is_redone", "convert", prepare_truncated_shard,
         r"configs-00000-of-00001\.tfrecord\.gz has \d+ bytes, \d+ were written; converting the shard again", status=0),
    Case("convert_two_converters_in_one_folder", "convert", prepare_two_converters, r"Converted \d+ graphs, skipped \d+ already converted", status=0),
    Case("tiles_train_rerun_with_other_model_flags", "tiles_train", prepare_changed_model_flags,
         r"config\.json: this run was configured otherwise \(model\.units 16 -> 32\); use another run directory",
         after_training=True),
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
    completed = list(pool.map(lambda _: run_program(case.program, call.flags, call.file_size_limit),
                              range(call.copies)))
  after = _contents(call.kept)
  try:
    if call.check:
      call.check(completed)
  except Exception as failure:  # pylint: disable=broad-except
    return Outcome(call, completed, before, after, failure)
  return Outcome(call, completed, before, after, None)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_fault_ends_in_one_clean_line_or_the_correct_result_and_loses_nothing(case, results):
  if case.name not in results["outcomes"]:
    pytest.skip("root may write into read-only folders; run the tests as another user for this case")
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


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
