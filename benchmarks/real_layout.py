"""Ranking real measured layout configs: the layout recipe against linear baselines, on real files.

  python benchmarks/real_layout.py                      # the labelled layout files of the sample
  python benchmarks/real_layout.py --files a.npz,b.npz --seeds 3 --previous_commit d1dd45b

For every labelled real layout file and seed, the file's configs are split at random (train
half, valid quarter, test quarter; tpu_graphs/data/config_split.py) and each ranker sees the
train half, selects on the valid quarter and ranks the test quarter, whose runtimes it never
sees (the test file holds zeros; predictions are scored here). Rankers:

* the layout recipe: `baselines/layout_train.py` with its default flags, scored from the run's
  predictions.csv (every test config, best first);
* the previous default: the same program at --previous_commit (checked out into a temporary
  directory), so the table shows what this turn changed;
* ridge on one-hot config values: per value position, the share of configurable nodes taking
  each value (no graph, no node identity);
* the per-node-layout ridge: each configurable node's 18-value row as one category, one-hot per
  (node, category) (tpu_graphs/analysis/ridge.py; only within one program).
With --ablation the recipe also runs with fewer config encodings (raw layout values; categories;
categories and costs), so each encoding's share shows. Ridge penalties are chosen on the valid
quarter. The cross-program row trains on one file's
train half (selecting on its valid quarter) and ranks every config of another file.

Writes a Markdown table with the machine, date, command and commit to --out (and prints it), and a
bar plot beside its journal (out/benchmarks/<--out's name>.png). Each ranker's tau on a file and
seed is appended to that journal (.jsonl) as soon as it is known, and a rerun after a kill measures
only what is missing (delete it to measure anew).
"""

from __future__ import annotations

import pathlib
import sys
import tempfile
import time
from typing import Callable

import numpy as np
from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from benchmarks import benchmark_results
from tpu_graphs.analysis import layout_search, ridge
from tpu_graphs.data import config_split, graphs, locations, npz, predictions
from tpu_graphs.train import metrics

_FILES = flags.DEFINE_list("files", None, "Labelled layout npz files; default: every labelled layout file of the "
                           "sample ($TPUGRAPHS_SAMPLE_DIR or ../shared/tpugraphs_sample).")
_SEEDS = flags.DEFINE_integer("seeds", 3, "Config splits per file (seeds 0..n-1).")
_PREVIOUS_COMMIT = flags.DEFINE_string("previous_commit", "d1dd45b",
                                       "Commit whose layout_train.py defaults are the 'previous default'; '' = skip.")
_ACROSS = flags.DEFINE_list("across", ["unet3d", "unet_3d.4x4.bf16"],
                            "Cross-program case: train on the first file's split, rank all configs of the second.")
_PER_FILE = flags.DEFINE_bool("per_file", True, "Config splits of every file; --noper_file runs only the "
                              "cross-program case.")
_TRAIN_FLAG = flags.DEFINE_multi_string("train_flag", [], "An extra flag for the recipe's layout_train.py, e.g. "
                                        "--train_flag=--config_encodings=categories,costs; repeat for more.")
_ABLATION = flags.DEFINE_bool("ablation", False, "Also train the recipe with fewer config encodings (raw layout "
                               "values; categories; categories and costs) to measure each encoding.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("real_layout")),
                           "Markdown table to write.")
_PENALTIES = (0.01, 0.1, 1.0, 10.0)
RECIPE = "layout recipe (this turn)"
# Recipe variants of the ablation: (column, layout_train.py flags).
ABLATION = (("raw layout values", ["--config_encodings="]), ("+ categories", ["--config_encodings=categories"]),
            ("+ costs", ["--config_encodings=categories,costs"]))


def value_share_features(graph: graphs.LayoutGraph) -> np.ndarray:
  """(c, 18 * 7): per value position, the share of configurable nodes whose value is -1, 0, .., 5."""
  values = np.clip(np.rint(np.asarray(graph.node_config_feat)), -1, 5).astype(np.int64) + 1  # (c, nc, 18)
  one_hot = np.eye(7)[values]  # (c, nc, 18, 7)
  return one_hot.mean(axis=1).reshape(values.shape[0], -1)


def per_node_features(graph: graphs.LayoutGraph) -> np.ndarray:
  categories, counts = layout_search.node_layout_categories(graph.node_config_feat)
  return ridge.per_node_layout_one_hot(categories, counts)


def ridge_tau(features: np.ndarray, log_runtimes: np.ndarray, rows: dict[str, np.ndarray],
              test_features=None, test_log_runtimes=None) -> float:
  """Test tau of a ridge fit on rows['train'] with the penalty that ranks rows['valid'] best."""
  def fit(penalty, target_features):
    return ridge.ridge_predictions(features[rows["train"]], log_runtimes[rows["train"]], target_features, penalty)
  best = max(_PENALTIES, key=lambda p: metrics.kendall_tau(log_runtimes[rows["valid"]],
                                                           fit(p, features[rows["valid"]])))
  if test_features is None:
    test_features, test_log_runtimes = features[rows["test"]], log_runtimes[rows["test"]]
  return metrics.kendall_tau(test_log_runtimes, fit(best, test_features))


def predicted_scores(predictions_csv: pathlib.Path, num_configs: int) -> np.ndarray:
  """(c,) rank of every config (0 = predicted fastest) from a run's single-graph predictions.csv."""
  prediction, = predictions.read_predictions(predictions_csv)
  try:
    return prediction.positions(num_configs)
  except ValueError as error:
    raise ValueError(f"{predictions_csv}: {error}") from None


def train_and_rank(program_dir: pathlib.Path, data_root: pathlib.Path, run_dir: pathlib.Path, seed: int,
                   extra_flags=()) -> tuple[np.ndarray, float]:
  """Runs <program_dir>/baselines/layout_train.py on data_root; (test scores, seconds)."""
  graph_dir = next(data_root.glob("layout/*/*"))
  source, search = graph_dir.parent.name, graph_dir.name
  command = [sys.executable, str(program_dir / "baselines/layout_train.py"), f"--source={source}",
             f"--search={search}", f"--data_root={data_root}", f"--out_dir={run_dir}", f"--seed={seed}",
             *extra_flags]
  start = time.perf_counter()
  locations.run_with_tree(command, program_dir)
  test_file, = (graph_dir / "test").glob("*.npz")
  num_configs = npz.read_graph(test_file, stream_configs=True).num_configs
  return predicted_scores(run_dir / "predictions.csv", num_configs), time.perf_counter() - start


def finished_results(path: pathlib.Path) -> dict[tuple[str, int], dict[str, float]]:
  """{(file, seed): {ranker: tau}} of every ranker an earlier (perhaps killed) run of this commit
  recorded, so a rerun measures only what is missing; delete the file to measure anew."""
  finished = {}
  for result in benchmark_results.read_journal(path):
    finished.setdefault((result.pop("file"), result.pop("seed")), {}).update(result)
  return finished


class Results:
  """The taus of (file, seed, ranker), each measured once: restored from the journal or measured and
  appended to it as soon as it is known (a ranker's run can take minutes)."""

  def __init__(self, path: pathlib.Path):
    self.path = path
    self.finished = finished_results(path)

  def has(self, key: tuple[str, int], rankers) -> bool:
    return all(name in self.finished.get(key, {}) for name in rankers)

  def tau(self, key: tuple[str, int], ranker: str, measure: Callable[[], float]) -> float:
    recorded = self.finished.setdefault(key, {})
    if ranker not in recorded:
      recorded[ranker] = measure()
      print(benchmark_results.append_to_journal(self.path, {"file": key[0], "seed": key[1], ranker: recorded[ranker]}),
            flush=True)
    return recorded[ranker]


def empty_table(variants) -> dict[str, list[float]]:
  """{ranker: []} in column order: the previous default, the ablation, the recipe, the ridges."""
  names = [name for name, _ in variants]
  return {name: [] for name in ["previous default", *names[1:], names[0], "ridge, one-hot config values",
                                "per-node-layout ridge"]}


def summary(values) -> str:
  values = np.asarray(values, np.float64)
  return f"{values.mean():.3f} ± {values.std():.3f}" if values.size > 1 else f"{values.mean():.3f}"


def plot(rows: list[tuple[str, dict[str, list[float]]]], path: pathlib.Path) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  rankers = list(rows[0][1])
  figure, axis = plt.subplots(figsize=(2.2 + 1.6 * len(rows), 3.6))
  width = 0.8 / len(rankers)
  for i, ranker in enumerate(rankers):
    means = [np.mean(r[ranker]) if r[ranker] else np.nan for _, r in rows]
    errors = [np.std(r[ranker]) if r[ranker] else 0 for _, r in rows]
    axis.bar(np.arange(len(rows)) + i * width, means, width, yerr=errors, label=ranker, capsize=2)
  axis.set_xticks(np.arange(len(rows)) + width * (len(rankers) - 1) / 2, [name for name, _ in rows], fontsize=8)
  axis.set_ylabel("test Kendall tau")
  axis.axhline(0, color="black", linewidth=0.5)
  axis.set_ylim(top=1.2)
  axis.legend(fontsize=7, loc="upper center", ncol=2)
  figure.tight_layout()
  figure.savefig(path, dpi=110)


def main(argv):
  del argv
  files = [pathlib.Path(f) for f in _FILES.value] if _FILES.value else config_split.labelled_layout_files(locations.sample_path())
  if not files:
    sys.exit(f"real_layout: no labelled layout files in {locations.sample_dir()}")
  repository = locations.REPOSITORY
  variants = [(RECIPE, [])] + (list(ABLATION) if _ABLATION.value else [])
  results = Results(benchmark_results.working_path(_OUT.value, ".jsonl"))
  rows: list[tuple[str, dict[str, list[float]]]] = []
  seconds: dict[str, list[float]] = {"recipe": [], "previous": []}

  def timed_tau(runtimes, run, times: list[float]) -> Callable[[], float]:
    def measure():
      scores, took = run()
      times.append(took)
      return metrics.kendall_tau(runtimes, scores)
    return measure

  with tempfile.TemporaryDirectory() as scratch:
    scratch = pathlib.Path(scratch)
    previous = locations.checkout(_PREVIOUS_COMMIT.value, scratch / "previous") if _PREVIOUS_COMMIT.value else None
    wanted = [name for name in empty_table(variants) if previous or name != "previous default"]
    graphs_by_name = {}
    for path in files:
      graph = npz.read_graph(path)
      graphs_by_name[graph.graph_id] = graph
      if not _PER_FILE.value:
        continue
      log_runtimes = np.log(graph.runtimes())
      taus = empty_table(variants)
      for seed in range(_SEEDS.value):
        key, root = (graph.graph_id, seed), scratch / f"{graph.graph_id}_{seed}"
        split = config_split.split_rows(graph.num_configs, seed)
        if not results.has(key, wanted):
          config_split.write_config_split(graph, root / "npz", seed)
        test_runtimes = graph.config_runtime[split["test"]]
        for i, (name, variant_flags) in enumerate(variants):
          taus[name].append(results.tau(key, name, timed_tau(test_runtimes, lambda: train_and_rank(
              repository, root / "npz", root / f"recipe{i}", seed, _TRAIN_FLAG.value + variant_flags),
              seconds["recipe"] if name == RECIPE else [])))
        if previous:
          taus["previous default"].append(results.tau(key, "previous default", timed_tau(
              test_runtimes, lambda: train_and_rank(previous, root / "npz", root / "previous", seed),
              seconds["previous"])))
        taus["ridge, one-hot config values"].append(results.tau(
            key, "ridge, one-hot config values", lambda: ridge_tau(value_share_features(graph), log_runtimes, split)))
        taus["per-node-layout ridge"].append(results.tau(
            key, "per-node-layout ridge", lambda: ridge_tau(per_node_features(graph), log_runtimes, split)))
      rows.append((f"{graph.graph_id} ({graph.num_configs} configs)", taus))
    if len(_ACROSS.value) == 2 and all(name in graphs_by_name for name in _ACROSS.value):
      source, target = (graphs_by_name[name] for name in _ACROSS.value)
      taus = empty_table(variants)
      across = " → ".join(_ACROSS.value)
      for seed in range(_SEEDS.value):
        key, root = (across, seed), scratch / f"across_{seed}"
        split = config_split.split_rows(source.num_configs, seed)
        if not results.has(key, [name for name in wanted if name != "per-node-layout ridge"]):
          config_split.write_config_split(source, root / "npz", seed)
          test_dir = root / "npz" / pathlib.Path(*source.collection.split(":")) / "test"
          (test_dir / f"{source.graph_id}.npz").unlink()
          npz.write_graph(test_dir / f"{target.graph_id}.npz", config_split.select_configs(
              target, np.arange(target.num_configs), "test", hide_runtimes=True))
        for i, (name, variant_flags) in enumerate(variants):
          taus[name].append(results.tau(key, name, timed_tau(target.config_runtime, lambda: train_and_rank(
              repository, root / "npz", root / f"recipe{i}", seed, _TRAIN_FLAG.value + variant_flags), [])))
        if previous:
          taus["previous default"].append(results.tau(key, "previous default", timed_tau(
              target.config_runtime, lambda: train_and_rank(previous, root / "npz", root / "previous", seed), [])))
        taus["ridge, one-hot config values"].append(results.tau(key, "ridge, one-hot config values", lambda: ridge_tau(
            value_share_features(source), np.log(source.runtimes()), split, value_share_features(target),
            np.log(target.runtimes()))))
      rows.append((f"{source.graph_id} → {target.graph_id} (all {target.num_configs})", taus))

  rankers = list(rows[0][1])
  lines = [f"Test-quarter Kendall tau, mean ± sd over {_SEEDS.value} config splits (train half / valid quarter / "
           "test quarter)" + (f"; recipe runs took {summary(seconds['recipe'])} s each" if seconds["recipe"] else "")
           + (f", previous default {summary(seconds['previous'])} s" if seconds["previous"] else "") + ".", "",
           "| file | " + " | ".join(rankers) + " |", "|---|" + "---:|" * len(rankers)]
  for name, taus in rows:
    lines.append(f"| {name} | " + " | ".join(summary(taus[r]) if taus[r] else "n/a" for r in rankers) + " |")
  out = benchmark_results.write("real_layout", "Real layout ranking", "\n".join(lines), _OUT.value)
  plot(rows, benchmark_results.working_path(out, ".png"))


if __name__ == "__main__":
  program.run(main)
