"""The main job's wall time with its collections one after another against side by side.

  python benchmarks/main_job.py [--experiment quickstart] [--repeats 1] [--out benchmarks/results/main_job.md]

Runs this tree's baselines/quickstart.py (the README's main command) on the embedded data,
alternating `--parallel 1` (one collection after another, in the quickstart's own process) and
its default (one collection per core, each in its own process), each time in a fresh output
directory, and times the whole command as a user would. Both ways must print the same
validation table: the collections are independent, seeded runs, so running them side by side may
change the time, never the figures; a difference is reported in the table. Each finished run is
appended to a journal (out/benchmarks/<--out's name>.jsonl), and a rerun after a kill goes on from
there. Writes the times and their ratio to --out, and when each collection started and finished
as a plot beside the journal.
"""

import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from benchmarks import benchmark_results
from tpu_graphs.data import locations

_EXPERIMENT = flags.DEFINE_enum("experiment", "quickstart", ["quickstart", "smallest"], "The main job's experiment.")
_REPEATS = flags.DEFINE_integer("repeats", 1, "Runs of each way, alternating.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("main_job")), "Where the Markdown table goes.")
program.require_at_least(1, _REPEATS)

QUICKSTART = locations.REPOSITORY / "baselines" / "quickstart.py"
# Way name -> the quickstart's extra flags.
WAYS = {"one at a time": ["--parallel=1"], "side by side": []}
_STARTED = re.compile(r"^\[quickstart \d/6\] (\S+): convert")
_FINISHED = re.compile(r"^  \[(\S+)\] valid: ")


def timed_main_job(extra: list[str], out_dir: pathlib.Path) -> dict:
  """Runs the main job; its wall seconds, each collection's [start, end] seconds and its
  validation table (the lines of the table it prints at the end)."""
  command = [sys.executable, str(QUICKSTART), f"--experiment={_EXPERIMENT.value}", f"--out_dir={out_dir}", *extra]
  started, spans, output = time.perf_counter(), {}, []
  # Lines are read as they come (their times are the timeline), so not locations.run_with_tree; its
  # PYTHONPATH, though: this tree's tpu_graphs, whatever the virtualenv has installed.
  with subprocess.Popen(command, cwd=locations.REPOSITORY, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        text=True, env={**os.environ, "PYTHONPATH": str(locations.REPOSITORY)}) as process:
    for line in process.stdout:
      now = time.perf_counter() - started
      output.append(line)
      if match := _STARTED.match(line):
        spans[match.group(1)] = [now, None]
      elif match := _FINISHED.match(line):
        spans[match.group(1)][1] = now
  seconds = time.perf_counter() - started
  if process.returncode:
    raise RuntimeError(f"{' '.join(command)} failed ({process.returncode}):\n{''.join(output[-40:])}")
  table = [line.rstrip("\n") for line in output if line.startswith("|")]
  return {"seconds": seconds, "spans": spans, "table": table}


def plot(runs: dict[str, dict], path: pathlib.Path) -> None:
  """One timeline per way: a bar from each collection's start to its finish."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  figure, axes = plt.subplots(len(runs), 1, figsize=(7, 1.2 + 1.1 * len(runs)), sharex=True)
  for axis, (way, run) in zip(axes, runs.items()):
    collections = list(run["spans"])
    for row, collection in enumerate(collections):
      start, end = run["spans"][collection]
      axis.barh(row, end - start, left=start, color=f"C{row}")
    axis.axvline(run["seconds"], color="black", linewidth=1)
    axis.set_yticks(range(len(collections)), collections, fontsize=7)
    axis.invert_yaxis()
    axis.set_title(f"{way}: {run['seconds']:.0f} s", fontsize=9)
  axes[-1].set_xlabel("seconds since the command started")
  figure.tight_layout()
  figure.savefig(path, dpi=110)
  plt.close(figure)


def main(argv):
  del argv
  out = pathlib.Path(_OUT.value)
  journal = benchmark_results.working_path(out, ".jsonl")
  done = benchmark_results.read_journal(journal)
  with tempfile.TemporaryDirectory(prefix="main_job_") as scratch:
    for repeat in range(_REPEATS.value):
      for way, extra in WAYS.items():
        if any(r["way"] == way and r["repeat"] == repeat for r in done):
          continue
        print(f"repeat {repeat}, {way}: running the main job ...", flush=True)
        run_dir = pathlib.Path(scratch) / f"{repeat}_{way.replace(' ', '_')}"
        result = {"way": way, "repeat": repeat, "flags": extra, **timed_main_job(extra, run_dir)}
        shutil.rmtree(run_dir)
        done.append(result)
        benchmark_results.append_to_journal(journal, result)
        print(f"  {result['seconds']:.0f} s", flush=True)

  runs = {way: [r for r in done if r["way"] == way and r["repeat"] < _REPEATS.value] for way in WAYS}
  reference = runs["one at a time"][0]["table"]
  median = {way: statistics.median(r["seconds"] for r in results) for way, results in runs.items()}
  lines = [f"`baselines/quickstart.py --experiment={_EXPERIMENT.value}` on the embedded data, {_REPEATS.value} "
           "run(s) of each way, alternating, each in a fresh output directory; wall seconds of the whole command "
           "(median, then every run). Same table: whether the run printed the validation table of the first "
           "one-at-a-time run.", "",
           "| way | flags | wall seconds | runs | same table |", "|---|---|---:|---|---|"]
  for way, results in runs.items():
    same = "yes" if all(r["table"] == reference for r in results) else "**no**"
    every_run = ", ".join(f"{r['seconds']:.0f}" for r in results)
    flags_cell = f"`{' '.join(WAYS[way])}`" if WAYS[way] else "none (one per core)"
    lines.append(f"| {way} | {flags_cell} | {median[way]:.0f} | {every_run} | {same} |")
  lines += ["", f"Side by side / one at a time: {median['side by side'] / median['one at a time']:.2f}× the time.", "",
            "The validation table both printed:", "", *reference]
  path = benchmark_results.write("main_job", "The main job's wall time", "\n".join(lines), out)
  plot({way: results[0] for way, results in runs.items()}, benchmark_results.working_path(path, ".png"))


if __name__ == "__main__":
  program.run(main)
