"""Whole-graph layout training against pruned: peak memory, speed, held-out ranking, and the memory plan.

  python benchmarks/full_graph.py                                   # unet3d config split, 3 settings
  python benchmarks/full_graph.py --epochs 1 --hops=0,-1 --nlp      # shorter; also the 21,918-op nlp graph

For each --hops setting (0, 1: pruned to the configurable ops' k-hop neighbourhood; -1: the whole
graph, trained with Graph Segment Training, the recipe's --segment_size), `baselines/layout_train.py`
runs with its default flags but --prune_hops (and --epochs, stated in the table) on a config split
of the real unet3d file (seed 0: train half, valid quarter, test quarter, as benchmarks/real_layout.py
splits it), in a child process measured alone: peak RSS (os.wait4 of that child), training configs
per second (configs of the training steps over the seconds Keras reports for the epochs), the
run's printed memory plan, and Kendall's tau of its predictions on the test quarter, whose
runtimes the run never sees.

With --nlp, the sample's 21,918-op nlp default file (a test file: no runtimes) runs one epoch of
--nlp_steps steps per --nlp_hops setting for memory and speed only: its copies for train (all configs) and valid (the first
256 configs, one scoring chunk) carry placeholder runtimes (config index + 1), so no ranking figure
is reported for it.

Each run's figures are appended to a journal (out/benchmarks/<--out's name>.jsonl) as soon as they
are known; a rerun after a kill measures only the runs missing there (delete it to measure anew).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from benchmarks import benchmark_results
from tpu_graphs.data import config_split, locations, npz, predictions
from tpu_graphs.train import experiments, memory_plan, metrics

_HOPS = flags.DEFINE_list("hops", ["0", "1", "-1"], "--prune_hops settings to compare (-1 = whole graph).")
_EPOCHS = flags.DEFINE_integer("epochs", 10, "Epochs of each unet3d run (the recipe's 10 by default).")
_NLP = flags.DEFINE_bool("nlp", False, "Also run the 21,918-op nlp graph (memory and speed only).")
_NLP_HOPS = flags.DEFINE_list("nlp_hops", ["-1"], "--prune_hops settings of the nlp graph.")
_NLP_STEPS = flags.DEFINE_integer("nlp_steps", 4, "Steps of the nlp graph's one epoch.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("full_graph")), "Markdown table to write.")
UNET3D = "npz/layout/xla/default/train/unet3d.npz"
NLP = "npz/layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz"
ROOT = pathlib.Path(__file__).resolve().parents[1]
NLP_NAME = "nlp (21,918 ops)"


@dataclasses.dataclass
class Measured:
  name: str
  hops: int
  peak_rss: float  # bytes
  planned: float  # bytes, from the run's printed plan
  configs_per_second: float
  seconds: float
  tau: float | None


def journal_path() -> pathlib.Path:
  return benchmark_results.working_path(_OUT.value, ".jsonl")


def measured_once(name: str, hops: int, epochs: int, measure) -> Measured:
  """The journal's figures of (graph, hops, epochs), else `measure()`'s, appended to the journal."""
  for entry in benchmark_results.read_journal(journal_path()):
    if (entry["name"], entry["hops"], entry.pop("epochs")) == (name, hops, epochs):
      return Measured(**entry)
  result = measure()
  print(benchmark_results.append_to_journal(journal_path(), {**dataclasses.asdict(result), "epochs": epochs}),
        flush=True)
  return result


def run_measured(command: list[str], log: pathlib.Path) -> tuple[float, str, float]:
  """Runs `command` as a child; (its peak RSS in bytes, its output, wall seconds). Raises on failure."""
  start = time.perf_counter()
  with open(log, "w") as output:
    child = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, cwd=ROOT)
    _, status, usage = os.wait4(child.pid, 0)
  text = log.read_text()
  if os.waitstatus_to_exitcode(status) != 0:
    raise RuntimeError(f"{' '.join(command)} failed; its output is in {log}:\n{text[-3000:]}")
  return usage.ru_maxrss * 1024.0, text, time.perf_counter() - start


def planned_peak(output: str) -> float:
  found = re.search(r"memory plan: peak ([0-9.]+) GiB", output)
  return float(found.group(1)) * memory_plan.GIB if found else float("nan")


def training_seconds(output: str) -> float:
  """Seconds of the epochs as Keras's progress bar reports them ('50/50 [====] - 47s 933ms/step - loss')."""
  return float(sum(int(seconds) for seconds in re.findall(r"\] - (\d+)s \d+m?s/step - loss", output)))


def train(data_root: pathlib.Path, run_dir: pathlib.Path, hops: int, extra: list[str]) -> tuple[float, str, float]:
  command = [sys.executable, "baselines/layout_train.py", f"--data_root={data_root}", f"--out_dir={run_dir}",
             f"--prune_hops={hops}", *extra]
  return run_measured(command, run_dir.parent / f"{run_dir.name}.log")


def unet3d_runs(work: pathlib.Path) -> list[Measured]:
  graph = npz.read_graph(locations.sample_path() / UNET3D)
  data_root = work / "unet3d"
  config_split.write_config_split(graph, data_root, 0)
  test_runtimes = graph.config_runtime[config_split.split_rows(graph.num_configs, 0)["test"]]

  def measure(hops: int) -> Measured:
    run_dir = work / f"unet3d_hops{hops}"
    peak, output, wall = train(data_root, run_dir, hops, ["--source=xla", "--search=default",
                                                          f"--epochs={_EPOCHS.value}"])
    prediction, = predictions.read_predictions(run_dir / "predictions.csv")
    tau = metrics.kendall_tau(test_runtimes, prediction.positions(len(test_runtimes)))
    recipe = experiments.LAYOUT_TRAINING
    configs = _EPOCHS.value * recipe["steps_per_epoch"] * recipe["batch_size"] * recipe["configs_per_graph"]
    return Measured("unet3d", hops, peak, planned_peak(output), configs / max(training_seconds(output), 1e-9), wall,
                    tau)

  return [measured_once("unet3d", hops, _EPOCHS.value, lambda hops=hops: measure(hops))
          for hops in map(int, _HOPS.value)]


def nlp_runs(work: pathlib.Path) -> list[Measured]:
  graph = npz.read_graph(locations.sample_path() / NLP)
  placeholder = np.arange(1, graph.num_configs + 1, dtype=np.int64)  # no runtimes in a test file
  labelled = dataclasses.replace(graph, config_runtime=placeholder)
  data_root = work / "nlp"
  npz.write_graph(data_root / "layout/nlp/default/train/nlp.npz", dataclasses.replace(labelled, split="train"))
  # One chunk of configs to validate on: scoring's peak is a chunk's (--configs_per_chunk), in a quarter of the time.
  npz.write_graph(data_root / "layout/nlp/default/valid/nlp.npz",
                  config_split.select_configs(labelled, np.arange(256), "valid", hide_runtimes=False))

  def measure(hops: int) -> Measured:
    run_dir = work / f"nlp_hops{hops}"
    peak, output, wall = train(data_root, run_dir, hops, ["--source=nlp", "--search=default", "--epochs=1",
                                                          f"--steps_per_epoch={_NLP_STEPS.value}"])
    configs = _NLP_STEPS.value * 4 * 128
    return Measured(NLP_NAME, hops, peak, planned_peak(output), configs / max(training_seconds(output), 1e-9), wall,
                    None)

  return [measured_once(NLP_NAME, hops, _NLP_STEPS.value, lambda hops=hops: measure(hops))
          for hops in map(int, _NLP_HOPS.value)]


def table(results: list[Measured]) -> str:
  lines = ["| graph | --prune_hops | peak RSS (GiB) | memory plan (GiB) | plan / measured | training configs/s | "
           "run wall time (s) | test-quarter tau |", "|---|---|---|---|---|---|---|---|"]
  for r in results:
    tau = f"{r.tau:.3f}" if r.tau is not None else "n/a (placeholder runtimes)"
    lines.append(f"| {r.name} | {r.hops} | {r.peak_rss / memory_plan.GIB:.2f} | {r.planned / memory_plan.GIB:.2f} | "
                 f"{r.planned / r.peak_rss:.2f} | {r.configs_per_second:.0f} | {r.seconds:.0f} | {tau} |")
  return "\n".join(lines)


def main(argv):
  del argv
  with tempfile.TemporaryDirectory() as work_dir:
    work = pathlib.Path(work_dir)
    results = unet3d_runs(work)
    if _NLP.value:
      results += nlp_runs(work)
  recipe = experiments.LAYOUT_TRAINING
  body = (f"unet3d: layout_train.py's default flags but --prune_hops, {_EPOCHS.value} epoch(s) of "
          f"{recipe['steps_per_epoch']} steps of {recipe['batch_size']} lists of {recipe['configs_per_graph']} "
          "configs, on config split seed 0 of the real file (one split, one seed: no spread). "
          "-1 trains the whole graph with Graph Segment Training (the recipe's --segment_size). Peak RSS: "
          "os.wait4 of the run's process; configs/s over the epochs' Keras-reported seconds (validation "
          "included), on a machine shared with other jobs (see the load average).\n\n" + table(results))
  if _NLP.value:
    body += (f"\n\nnlp: one epoch of {_NLP_STEPS.value} steps, memory and speed only (its runtimes are "
             "placeholders: the sample's file is a test file).")
  benchmark_results.write("full_graph", "Whole-graph against pruned layout training", body, _OUT.value)


if __name__ == "__main__":
  program.run(main)
