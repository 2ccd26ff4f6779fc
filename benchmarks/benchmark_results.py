"""What every benchmark in benchmarks/ leaves behind: its figures as a Markdown file that says which
benchmark, commit, machine, date and command produced them.

The README and docs/ quote these files (benchmarks/results/<benchmark>.md) rather than numbers
typed in, so every figure there can be traced to the code that measured it and re-measured with
the command it names. The machine line gives the load average too: on shared machines it moves
the figures more than any code change.

    benchmark_results.write("serve", "Serving through the SavedModel", table, out_path)

A benchmark whose measurements take minutes each keeps a journal (`working_path(out, ".jsonl")`,
under out/benchmarks/, never committed): it appends each measurement as soon as it has it, and a
rerun after a kill reads the journal and measures only what is missing (delete it to measure
anew). Plots go there too. A benchmark that needs another's figure reads it from that one's
result file at run time (`table_rows`), so no figure is copied between files.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import platform
import re
import shlex
import subprocess
import sys

from tpu_graphs.data import locations, storage

RESULTS_DIR = locations.REPOSITORY / "benchmarks" / "results"
WORKING_DIR = locations.REPOSITORY / "out" / "benchmarks"


def default_path(benchmark: str) -> pathlib.Path:
  """benchmarks/results/<name>.md: where a benchmark writes unless told otherwise (`benchmark` may
  name a folder under benchmarks/, as research/sim_to_real does; its results sit beside the others)."""
  return RESULTS_DIR / f"{pathlib.PurePosixPath(benchmark).name}.md"


def working_path(out, suffix: str) -> pathlib.Path:
  """out/benchmarks/<name of `out`><suffix> (the folder created): what a benchmark keeps beside its
  result file but does not commit, its journal (".jsonl") and its plot (".png")."""
  WORKING_DIR.mkdir(parents=True, exist_ok=True)
  return WORKING_DIR / (pathlib.Path(out).stem + suffix)


def machine() -> str:
  """'Linux x86_64, 2 cores, 24 GiB, Python 3.11.7, load average 3.1' (1-minute load, now)."""
  memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
  return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, {memory_gib:.0f} GiB, "
          f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}")


def _git(*arguments: str) -> str:
  return subprocess.run(["git", "-C", str(locations.REPOSITORY), *arguments], capture_output=True, text=True,
                        check=True).stdout


def commit() -> str:
  """The commit the figures measure: `git rev-parse HEAD`, plus ' with uncommitted changes' when the
  working tree differs from it (result files aside: a benchmark rewrites its own). 'unknown (not a
  git checkout)' outside one."""
  try:
    head = _git("rev-parse", "HEAD").strip()
    changes = _git("status", "--porcelain", "--", ".", f":(exclude){RESULTS_DIR.relative_to(locations.REPOSITORY)}")
  except (OSError, subprocess.CalledProcessError):
    return "unknown (not a git checkout)"
  return head + (" with uncommitted changes" if changes.strip() else "")


# An absolute path inside an argument: the whole argument, or after `=` or `,` (`--files=/a,/b`).
_ABSOLUTE_PATH = re.compile(r"(^|[=,])(/[^,]*)")


def relative_to_repository(argument: str) -> str:
  """`argument` with every absolute path in it made relative to the repository (the real sample
  at its default place becomes ../shared/tpugraphs_sample/...), so that a results file names no
  machine's folders and its command reruns from the repository root of any checkout."""
  return _ABSOLUTE_PATH.sub(lambda match: match.group(1) + os.path.relpath(match.group(2), locations.REPOSITORY),
                            argument)


def command(benchmark: str, argv: list[str] | None = None) -> str:
  """The command line, run from the repository root, that reruns the benchmark with the arguments
  it was given (sys.argv), its paths relative to the repository."""
  arguments = sys.argv[1:] if argv is None else argv
  return shlex.join(["python", f"benchmarks/{benchmark}.py", *map(relative_to_repository, arguments)])


def write(benchmark: str, title: str, body: str, path=None) -> pathlib.Path:
  """Writes (atomically) and prints `body` (Markdown) under a header naming `title`, the
  benchmark, today's date, this machine, the command and the commit; returns the file's path."""
  path = pathlib.Path(path) if path else default_path(benchmark)
  text = (f"{title} (`benchmarks/{benchmark}.py`), {datetime.date.today()}, on {machine()}.\n"
          f"Command: `{command(benchmark)}`\nCommit: {commit()}\n\n{body.rstrip()}\n")
  path.parent.mkdir(parents=True, exist_ok=True)
  with storage.atomic_path(path) as temporary:
    pathlib.Path(temporary).write_text(text)
  print(text, end="", flush=True)
  print(f"\nwritten to {path}")
  return path


def recorded_commit(path) -> str:
  """The `Commit:` a result file names (its first, where merged files name several)."""
  found = re.search(r"^Commit: (.+)$", pathlib.Path(path).read_text(), flags=re.MULTILINE)
  if not found:
    raise ValueError(f"{path}: no `Commit:` line naming the commit its figures measure")
  return found.group(1).strip()


def table_rows(path) -> list[dict[str, str]]:
  """Every row of every Markdown table in a result file, as {header cell: cell}: how a benchmark
  reads another's figures at run time instead of copying them."""
  rows, header = [], None
  for line in pathlib.Path(path).read_text().splitlines():
    if not line.startswith("|"):
      header = None
      continue
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    if header is None:
      header = cells
    elif not all(set(cell) <= set("-: ") for cell in cells):
      rows.append(dict(zip(header, cells)))
  return rows


def read_journal(path) -> list[dict]:
  """Every entry earlier runs of this commit (`commit()`) appended to the journal at `path`, oldest
  first, without its commit; none without one. A run of other code resumes nothing: its entries
  would measure another model under this commit's name."""
  path = pathlib.Path(path)
  entries = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
  current = commit()
  return [{name: value for name, value in entry.items() if name != "commit"} for entry in entries
          if entry.get("commit") == current]


def append_to_journal(path, entry: dict) -> str:
  """Appends `entry` and the commit it measures to the journal at `path` (creating its folder) as
  one JSON line; returns the line."""
  path = pathlib.Path(path)
  line = json.dumps({**entry, "commit": commit()})
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "a") as stream:
    stream.write(line + "\n")
  return line
