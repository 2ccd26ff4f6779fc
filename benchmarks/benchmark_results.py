"""What every benchmark in benchmarks/ leaves behind: its figures as a Markdown file that says which
benchmark, machine, date and command produced them.

The README quotes these files (benchmarks/results/<benchmark>.md) rather than numbers typed in,
so every figure there can be traced to a run and re-measured with the command it names. The
machine line gives the load average too: on shared machines it moves the figures more than any
code change.

    benchmark_results.write("serve", "Serving through the SavedModel", table, out_path)

A benchmark whose measurements take minutes each keeps a journal beside its table (<out>.jsonl):
it appends each measurement as soon as it has it, and a rerun after a kill reads the journal and
measures only what is missing (delete it to measure anew).
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import platform
import re
import shlex
import sys

from tpu_graphs.data import locations, storage

RESULTS_DIR = locations.REPOSITORY / "benchmarks" / "results"


def default_path(benchmark: str) -> pathlib.Path:
  """benchmarks/results/<benchmark>.md: where a benchmark writes unless told otherwise."""
  return RESULTS_DIR / f"{benchmark}.md"


def machine() -> str:
  """'Linux x86_64, 2 cores, 24 GiB, Python 3.11.7, load average 3.1' (1-minute load, now)."""
  memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
  return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, {memory_gib:.0f} GiB, "
          f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}")


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
  benchmark, today's date, this machine and the command; returns the file's path."""
  path = pathlib.Path(path) if path else default_path(benchmark)
  text = (f"{title} (`benchmarks/{benchmark}.py`), {datetime.date.today()}, on {machine()}.\n"
          f"Command: `{command(benchmark)}`\n\n{body.rstrip()}\n")
  path.parent.mkdir(parents=True, exist_ok=True)
  with storage.atomic_path(path) as temporary:
    pathlib.Path(temporary).write_text(text)
  print(text, end="", flush=True)
  print(f"\nwritten to {path}")
  return path


def read_journal(path) -> list[dict]:
  """Every entry earlier runs appended to the journal at `path`, oldest first; none without one."""
  path = pathlib.Path(path)
  return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def append_to_journal(path, entry: dict) -> str:
  """Appends `entry` to the journal at `path` (creating its folder) as one JSON line; returns the line."""
  path = pathlib.Path(path)
  line = json.dumps(entry)
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "a") as stream:
    stream.write(line + "\n")
  return line
