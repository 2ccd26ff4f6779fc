"""Predicted gain on real configurations: how far to trust "0.83x config 0's runtime".

  python benchmarks/predicted_gain.py              # the labelled real files of the sample
  python benchmarks/predicted_gain.py --seeds 2

Every ranking gives, for each best config, its predicted runtime relative to config 0 and an
interval (tpu_graphs/train/calibration.py: a fit of score differences to log runtime ratios on the
run's validation split). This measures that prediction on real configurations the model and its
calibration never saw:

* layout, within a program: for each labelled real layout file and seed, the layout recipe
  (`baselines/layout_train.py`, default flags, as benchmarks/real_layout.py runs it) trains on the
  train half of its configs and is calibrated on the valid quarter (tpu_graphs/data/config_split.py);
  the prediction is judged on the test quarter: every ordered pair of its configs, and each of them
  against config 0 of the file (which may lie in the train half: a row says so);
* layout, across programs: the same model and calibration predict every config of the other file,
  against its config 0 and over pairs (a seeded draw of at most MAX_PAIRS);
* tile: the main job's tile model (the "quickstart" experiment trained on the embedded generated
  data alone, calibrated on its generated validation kernels) predicts the measured configs of the
  15 real fused kernels of op_tuning_data.pb, each against its kernel's config 0 and over pairs;
  also its tile score (1 - top-5 slowdown) on the kernels with more than 5 configs, beside a
  random pick's, computed exactly (metrics.random_top_k_slowdown).

Figures: Spearman's correlation of predicted with measured ratio, the median absolute error of the
predicted ratio (percent of the measured), how often the interval held the measured ratio, and a
decision rule: of the pairs predicted at least X% faster, how many really are, and by how much on
average. Writes the Markdown table (machine, date, command, commit) to --out, prints it, and
draws predicted against measured ratio beside its journal (out/benchmarks/<--out's name>.png).
Runs are kept in out/benchmarks/predicted_gain_runs/ (a rerun resumes them; delete it to train anew).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import sys

import numpy as np
from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from benchmarks import benchmark_results
from tpu_graphs.data import config_split, graphs, locations, npz
from tpu_graphs.export import ranker, run_export, saved_model
from tpu_graphs.hlo import featurize
from tpu_graphs.train import calibration, experiments, metrics, run_experiment

_FILES = flags.DEFINE_list("files", None, "Labelled layout npz files; default: every labelled layout file of the "
                           "sample ($TPUGRAPHS_SAMPLE_DIR).")
_SEEDS = flags.DEFINE_integer("seeds", 1, "Config splits per file (seeds 0..n-1).")
_TILE_PROTO = flags.DEFINE_string("tile_proto", "pb/official_testdata/op_tuning_data.pb",
                                  "TuningData of real kernels, relative to the sample folder; '' = no tile rows.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("predicted_gain")), "Markdown table to write.")
MAX_PAIRS = 200_000  # ordered pairs judged per case, drawn where there are more
THRESHOLDS = (0.01, 0.05, 0.10)  # the decision rule's "predicted at least X% faster"
RUNS_DIR = benchmark_results.WORKING_DIR / "predicted_gain_runs"


@dataclasses.dataclass
class Judged:
  """Predicted (log ratio, low, high) and measured log ratios of one case's pairs, each (p,)."""
  name: str
  predicted: np.ndarray
  low: np.ndarray
  high: np.ndarray
  measured: np.ndarray
  note: str = ""

  @classmethod
  def joined(cls, name: str, parts: list["Judged"], note: str = "") -> "Judged":
    return cls(name, *(np.concatenate([getattr(p, f) for p in parts]) for f in ("predicted", "low", "high",
                                                                                 "measured")), note)


def judge_pairs(name: str, model: calibration.Calibration, scores: np.ndarray, runtimes: np.ndarray,
                first: np.ndarray, second: np.ndarray, note: str = "") -> Judged:
  """The prediction of runtime[first] / runtime[second] from the scores, beside the measured ratio."""
  predicted, low, high = model.log_ratio_interval(scores[first].astype(np.float64) - scores[second])
  return Judged(name, predicted, low, high, np.log(runtimes[first] / runtimes[second]), note)


def ordered_pairs(rows: np.ndarray, rng: np.random.Generator, limit: int = MAX_PAIRS) -> tuple[np.ndarray, np.ndarray]:
  """Ordered pairs (i, j), i != j, of `rows`: all, or `limit` drawn where there are more."""
  if rows.size * (rows.size - 1) <= limit:
    first, second = np.meshgrid(rows, rows, indexing="ij")
    keep = first != second
    return first[keep], second[keep]
  first, second = rng.choice(rows, limit), rng.choice(rows, limit)
  keep = first != second
  return first[keep], second[keep]


def against_reference(rows: np.ndarray, reference: int = 0) -> tuple[np.ndarray, np.ndarray]:
  rows = rows[rows != reference]
  return rows, np.full_like(rows, reference)


def figures(judged: Judged) -> dict:
  """Spearman, median absolute error (% of the measured ratio), interval coverage, and per threshold
  X: (pairs predicted at least X faster, share really faster, their mean measured gain)."""
  predicted, measured = np.exp(judged.predicted), np.exp(judged.measured)
  rule = {}
  for threshold in THRESHOLDS:
    chosen = predicted <= 1.0 - threshold
    rule[threshold] = (int(chosen.sum()), float(np.mean(measured[chosen] < 1.0)) if chosen.any() else float("nan"),
                       float(np.mean(1.0 - measured[chosen])) if chosen.any() else float("nan"))
  return {"pairs": judged.measured.size, "spearman": metrics.spearman(judged.predicted, judged.measured),
          "median_error": float(np.median(np.abs(predicted - measured) / measured)),
          "coverage": float(np.mean((judged.low <= judged.measured) & (judged.measured <= judged.high))),
          "measured_spread": float(np.quantile(np.abs(measured - 1.0), 0.5)), "rule": rule}


def train_layout(graph: graphs.LayoutGraph, seed: int) -> pathlib.Path:
  """The layout recipe trained on the train half of `graph`'s configs (split `seed`), its run folder."""
  root = RUNS_DIR / f"{graph.graph_id}_{seed}"
  run_dir = root / "run"
  if not (run_dir / saved_model.EXPORT_DIR_NAME / calibration.FILE_NAME).exists():
    if not (root / "npz").exists():
      config_split.write_config_split(graph, root / "npz", seed)
    source, search = graph.collection.split(":")[1:]
    locations.run_with_tree([sys.executable, str(locations.REPOSITORY / "baselines/layout_train.py"),
                             f"--source={source}", f"--search={search}", f"--data_root={root / 'npz'}",
                             f"--out_dir={run_dir}", f"--seed={seed}"], locations.REPOSITORY)
  return run_dir


def train_tile() -> pathlib.Path:
  """The main job's tile model: the quickstart experiment on the embedded generated data."""
  run_dir = RUNS_DIR / "tile_quickstart"
  if not (run_dir / saved_model.EXPORT_DIR_NAME / calibration.FILE_NAME).exists():
    run_experiment.train(experiments.experiment("quickstart", "tile:xla"), locations.REPOSITORY / "data/generated/npz",
                         run_dir, exporters=[run_export.export_to_run_directory])
  return run_dir


def layout_cases(files: list[pathlib.Path], seeds: int, rng: np.random.Generator) -> tuple[list[Judged], list[str]]:
  """The judged pairs of every layout case, and lines on config 0's rank."""
  graphs_by_name = {path: npz.read_graph(path) for path in files}
  cases, lines = [], []
  for path, graph in graphs_by_name.items():
    for seed in range(seeds):
      run_dir = train_layout(graph, seed)
      serving = ranker.Ranker(run_dir / saved_model.EXPORT_DIR_NAME)
      model = serving.calibration
      rows = config_split.split_rows(graph.num_configs, seed)
      test = rows["test"]
      runtimes, scores = graph.runtimes(), serving.score(graph)
      place = next(f"{split} {'half' if split == 'train' else 'quarter'}" for split, chosen in rows.items()
                   if 0 in chosen)
      cases.append(judge_pairs(f"{graph.graph_id}: test-quarter pairs (seed {seed})", model, scores, runtimes,
                               *ordered_pairs(test, rng)))
      cases.append(judge_pairs(f"{graph.graph_id}: test quarter against config 0 of the file (seed {seed})", model,
                               scores, runtimes, *against_reference(test),
                               note=f"config 0 in the {place}" + (", which the calibration saw" if place.startswith("valid")
                                                                  else "")))
      for other_path, other in graphs_by_name.items():
        if other_path == path:
          continue
        other_scores, other_runtimes = serving.score(other), other.runtimes()
        every = np.arange(other.num_configs)
        name = f"{graph.graph_id} → {other.graph_id}"
        cases.append(judge_pairs(f"{name}: pairs of all configs (seed {seed})", model, other_scores, other_runtimes,
                                 *ordered_pairs(every, rng)))
        cases.append(judge_pairs(f"{name}: all configs against config 0 (seed {seed})", model, other_scores,
                                 other_runtimes, *against_reference(every), note="no config seen"))
        order = np.argsort(other_scores, kind="stable")
        lines.append(f"- {name} (seed {seed}): config 0 of {other.graph_id} is predicted "
                     f"{calibration.reference_rank(order)} of {other.num_configs}, measured "
                     f"{calibration.reference_rank(np.argsort(other_runtimes, kind='stable'))}.")
      lines.append(f"- {graph.graph_id} (seed {seed}): calibration on {model.pairs} valid-quarter pairs; config 0 of "
                   f"the file ({place}) is predicted "
                   f"{calibration.reference_rank(np.argsort(scores, kind='stable'))} of {graph.num_configs}, "
                   f"measured {calibration.reference_rank(np.argsort(runtimes, kind='stable'))}.")
  return cases, lines


def tile_cases(proto_path: pathlib.Path, rng: np.random.Generator) -> tuple[list[Judged], list[str]]:
  """The judged pairs of the real kernels, pooled, and the tile score lines."""
  serving = ranker.Ranker(train_tile() / saved_model.EXPORT_DIR_NAME)
  model = serving.calibration
  pairs, references, model_scores, random_scores = [], [], [], []
  kernels = [kernel for kernel in featurize.graphs_from_file(proto_path) if kernel.num_configs > 1]
  for kernel in kernels:
    runtimes, scores = kernel.runtimes(), serving.score(kernel)
    every = np.arange(kernel.num_configs)
    pairs.append(judge_pairs("", model, scores, runtimes, *ordered_pairs(every, rng)))
    references.append(judge_pairs("", model, scores, runtimes, *against_reference(every)))
    if kernel.num_configs > 5:
      model_scores.append(metrics.tile_score(runtimes, scores))
      random_scores.append(1.0 - metrics.random_top_k_slowdown(runtimes, 5))
  name = f"real kernels of {proto_path.name}"
  lines = [f"- tile score (1 − top-5 slowdown) on the {len(model_scores)} kernels of {proto_path.name} with more than "
           f"5 configs: the main job's tile model {np.mean(model_scores):.3f}, a random pick of 5 "
           f"{np.mean(random_scores):.3f} (exact expectation).",
           f"- tile calibration on {model.pairs} pairs of {model.graphs} generated validation kernels."]
  return [Judged.joined(f"tile, {name}: pairs within each of {len(kernels)} kernels", pairs),
          Judged.joined(f"tile, {name}: each kernel's configs against its config 0", references,
                        note="config 0: the first measured run")], lines


def table(cases: list[Judged]) -> str:
  header = ("| case | pairs | Spearman | median abs. error | in the 80% interval | median measured change | "
            + " | ".join(f"predicted ≥{t:.0%} faster: pairs, really faster, mean gain" for t in THRESHOLDS) + " |")
  lines = [header, "|---|" + "---:|" * (5 + len(THRESHOLDS))]
  for case in cases:
    found = figures(case)
    rule = " | ".join(f"{count}, {share:.0%}, {gain:+.1%}" if count else "0" for count, share, gain in
                      found["rule"].values())
    lines.append(f"| {case.name}{' (' + case.note + ')' if case.note else ''} | {found['pairs']} | "
                 f"{found['spearman']:.3f} | {found['median_error']:.2%} | {found['coverage']:.0%} | "
                 f"{found['measured_spread']:.2%} | {rule} |")
  return "\n".join(lines)


def plot(cases: list[Judged], path: pathlib.Path, rng: np.random.Generator) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  shown = [case for case in cases if "against config 0" in case.name or "against its config 0" in case.name]
  figure, axes = plt.subplots(1, len(shown), figsize=(3.2 * len(shown), 3.3), squeeze=False)
  for axis, case in zip(axes[0], shown):
    keep = rng.permutation(case.measured.size)[:3000]
    axis.scatter(np.exp(case.measured[keep]), np.exp(case.predicted[keep]), s=3, alpha=0.4)
    low, high = np.exp(min(case.measured.min(), case.predicted.min())), np.exp(max(case.measured.max(),
                                                                                   case.predicted.max()))
    axis.plot([low, high], [low, high], color="black", linewidth=0.5)
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("measured ratio to config 0", fontsize=7)
    axis.set_ylabel("predicted ratio", fontsize=7)
    axis.set_title(case.name.split(":")[0], fontsize=7)
    axis.tick_params(labelsize=6)
  figure.tight_layout()
  figure.savefig(path, dpi=110)


def cpu_seconds() -> float:
  """CPU seconds of this process and its finished children (the training programs)."""
  times = os.times()
  return times.user + times.system + times.children_user + times.children_system


def main(argv):
  del argv
  started = cpu_seconds()
  files = ([pathlib.Path(f) for f in _FILES.value] if _FILES.value else
           config_split.labelled_layout_files(locations.sample_path()))
  rng = np.random.default_rng(0)
  cases, lines = layout_cases(files, _SEEDS.value, rng)
  if _TILE_PROTO.value:
    tile, tile_lines = tile_cases(locations.sample_path(_TILE_PROTO.value), rng)
    cases, lines = cases + tile, lines + tile_lines
  body = (f"Predicted runtime ratio (tpu_graphs/train/calibration.py) against the measured one, on real configs "
          f"the model and its calibration never saw; {_SEEDS.value} config split(s) per layout file (train half / "
          "valid quarter / test quarter). Median abs. error: of the predicted ratio, in percent of the measured; "
          "median measured change: the median |measured ratio − 1|, what predicting 'no change' would err by. "
          "Decision rule per threshold: pairs predicted at least that much faster, the share of them measured "
          "faster, and their mean measured gain (1 − measured ratio).\n\n" + table(cases) + "\n\n" + "\n".join(lines)
          + f"\n\nThe benchmark took {cpu_seconds() - started:.0f} s of CPU, training subprocesses included "
          "(runs already in out/benchmarks/predicted_gain_runs/ are reused, not trained again).\n")
  out = benchmark_results.write("predicted_gain", "Predicted gain on real configurations", body, _OUT.value)
  plot(cases, benchmark_results.working_path(out, ".png"), rng)


if __name__ == "__main__":
  program.run(main)
