"""The fault matrix: programs of baselines/ run as a hostile but fair user would, each case a real
subprocess (tests/programs/test_*_program_faults.py hold the cases, one module per group of programs).

A case gives a program bad input (corrupt, special or missing files), a bad flag, an unusable
output path (a file where a folder should be, a full disk: a file-size limit the kernel enforces,
which works unprivileged; a read-only folder, written by a program without root's power to write
anywhere) or a damaged earlier result, and expects either the correct result or exit status 1 with
a line naming the input and the problem: never a traceback, never a hang, and nothing already
written lost (check_outcome).

The cases of a module share one small tile dataset and one trained run (the shared fixture tile_run,
built once by Bazel: tests/shared_fixtures.py) and run a few at a time (run_cases), since most of
each one's time is importing TensorFlow.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import dataclasses
import functools
import http.server
import os
import pathlib
import re
import resource
import subprocess
import sys
import threading
from typing import Callable, Iterator, Optional

import numpy as np

import hang_guard
import shared_fixtures
import tile_test_data

from tpu_graphs.data import locations, npz

REPO = pathlib.Path(__file__).resolve().parents[1]


CONCURRENT_CASES = 3


def command(program: str, flags: list[str]) -> list[str]:
  return [sys.executable, str(REPO / "baselines" / f"{program}.py"), *flags]


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

  return subprocess.run(command(program, flags), capture_output=True, text=True, errors="replace",
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


class QuietHandler(http.server.SimpleHTTPRequestHandler):
  """A plain static server: sizes but no published MD5, as a mirror may be."""

  def log_message(self, *args):
    pass


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


def tile_dir(folder: pathlib.Path, split: str = "valid") -> pathlib.Path:
  """A fresh <folder>/npz/tile/xla/<split> holding one valid graph; returns that split folder."""
  split_dir = folder / "npz" / "tile" / "xla" / split
  split_dir.mkdir(parents=True)
  npz.write_graph(split_dir / "good.npz", tile_test_data.tile_graph(np.random.default_rng(1), "good", split, 24))
  return split_dir


def special_file(kind: str) -> Callable[[pathlib.Path], None]:
  """Makes `path` a FIFO, a dangling symbolic link or a directory."""
  return {"fifo": os.mkfifo, "dangling": lambda path: path.symlink_to(path.with_name("gone.npz")),
          "directory": lambda path: path.mkdir()}[kind]


def a_file(folder: pathlib.Path) -> pathlib.Path:
  path = folder / "a_file"
  path.write_text("in the way\n")
  return path


def read_only_folder(folder: pathlib.Path) -> pathlib.Path:
  path = folder / "read_only"
  path.mkdir()
  path.chmod(0o555)
  return path


def flags_only(*flags: str):
  """prepare() for a case that is only flags ('{run}', '{export}', '{case}', ... filled in), refused
  before anything is written: the case's folder stays empty."""
  def prepare(workspace: Workspace, folder: pathlib.Path) -> Call:
    fill = {"run": workspace.run, "export": workspace.run / "export", "case": folder,
            "embedded": locations.EMBEDDED_NPZ, "test_graph": sorted((workspace.npz_root / "tile/xla/test").glob("*.npz"))[0]}

    def nothing_written(completed):
      assert not list(folder.iterdir())

    return Call([flag.format(**fill) for flag in flags], check=nothing_written)
  return prepare


def with_flags(make: Callable[[Workspace, pathlib.Path], list[str]], **call):
  def prepare(workspace: Workspace, folder: pathlib.Path) -> Call:
    return Call(make(workspace, folder), **call)
  return prepare


UNUSUAL_NAME = "gräph with spaces, and a comma"  # any file name a file system allows, but ':'


@dataclasses.dataclass
class Outcome:
  call: Call
  completed: list[subprocess.CompletedProcess]
  kept_before: dict
  kept_after: dict
  check_failure: Optional[BaseException]  # what call.check raised, run at once (the server is still up)


def contents(paths: list[pathlib.Path]) -> dict:
  files = [f for path in paths for f in ([path] if path.is_file() else sorted(path.rglob("*")))]
  return {str(f): f.read_bytes() for f in files if f.is_file()}


def run_case(workspace: Workspace, case: Case) -> Outcome:
  folder = workspace.root / "cases" / case.name
  folder.mkdir(parents=True)
  call = case.prepare(workspace, folder)
  before = contents(call.kept)
  with concurrent.futures.ThreadPoolExecutor(call.copies) as pool:
    completed = list(pool.map(lambda _: run_program(case.program, call.flags, call.file_size_limit,
                                                    case.unprivileged), range(call.copies)))
  after = contents(call.kept)
  try:
    if call.check:
      call.check(completed)
  except Exception as failure:  # pylint: disable=broad-except
    return Outcome(call, completed, before, after, failure)
  return Outcome(call, completed, before, after, None)


@contextlib.contextmanager
def workspace(folder: pathlib.Path) -> Iterator[Workspace]:
  """The shared tile run unpacked into `folder`, with a release server (a static mirror) over
  <folder>/release while the context is open."""
  root = shared_fixtures.unpack("tile_run", folder)
  release = root / "release"
  release.mkdir()
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(release)))
  threading.Thread(target=server.serve_forever, daemon=True).start()
  try:
    yield Workspace(root, root / "npz", root / "records" / "tile" / "xla", root / "run", release,
                    f"http://127.0.0.1:{server.server_address[1]}")
  finally:
    server.shutdown()


def run_cases(workspace: Workspace, cases: list[Case], beside: Callable[[], object] = lambda: None
              ) -> tuple[dict[str, Outcome], object]:
  """Runs `cases`, CONCURRENT_CASES at a time, while `beside()` runs in this thread; the download
  cases share the release server, so they run one after the other. Returns ({case name: Outcome},
  what `beside` returned)."""
  downloads = [case for case in cases if case.program == "download"]
  with concurrent.futures.ThreadPoolExecutor(CONCURRENT_CASES) as pool:
    futures = {case.name: pool.submit(run_case, workspace, case) for case in cases if case not in downloads}
    sequence = pool.submit(lambda: [run_case(workspace, case) for case in downloads])
    besides = beside()
    outcomes = {name: future.result() for name, future in futures.items()}
    outcomes.update(zip((case.name for case in downloads), sequence.result()))
  return outcomes, besides


def check_outcome(case: Case, outcome: Outcome) -> None:
  """Asserts that every process of the case ended as the case expects, in one clean line naming the
  problem where it failed, and that nothing the case keeps changed."""
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
