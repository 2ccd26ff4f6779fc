"""Learnability of generated data: per collection, the test-split score of a random ranker, of a
ridge regression on summed config features (no graph), of the within-program per-node-layout
ridge (layout only), and of the noiseless cost model.

  python benchmarks/research/learnability.py --data_dir data/generated [--scale small --seed 0] \
      [--out benchmarks/results/learnability.md]

Scores (tpu_graphs/train/metrics.py): layout, mean Kendall tau-b over graphs; tile, mean tile
score = 1 - top-5 slowdown = 2 - best runtime in the predicted top 5 / best runtime (1 is
perfect). The summed-features ridge is fit on the train split; the per-node-layout ridge
(tpu_graphs/analysis/ridge.py) on half of each test graph's configs, ranking the other half. The
noiseless runtimes come from regenerating the test architectures (the bytes must match
--data_dir, which is checked), so the cost-model column says how much the 1% measurement noise
alone costs. The table goes to --out (benchmarks/benchmark_results.py).
"""

import dataclasses
import pathlib
import tempfile

import numpy as np
from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from benchmarks import benchmark_results
from tpu_graphs.data import errors
from tpu_graphs.data import graphs
from tpu_graphs.data import npz
from tpu_graphs.synth import generate
from tpu_graphs.train import metrics
from tpu_graphs.analysis import ridge

_DATA_DIR = flags.DEFINE_string("data_dir", "data/generated", "A generated tree (with test_labels/).")
_SCALE = flags.DEFINE_string("scale", "small", "The scale it was generated at.")
_SEED = flags.DEFINE_integer("seed", 0, "The seed it was generated with.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("learnability")), "Markdown table to write.")


def config_features(graph: graphs.Graph) -> np.ndarray:
  """(c, f) features without the graph: tile config features, or layout features summed over nodes."""
  if isinstance(graph, graphs.TileGraph):
    raw = graph.config_feat.astype(np.float64)
  else:
    raw = np.concatenate([graph.node_config_feat.sum(1), (graph.node_config_feat != -1).sum(1)], axis=1)
  return np.concatenate([raw, np.log1p(np.abs(raw))], axis=1)


def standardized(values: np.ndarray) -> np.ndarray:
  logs = np.log(values)
  return (logs - logs.mean()) / (logs.std() + 1e-12)


def standardized_features(graph_list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """The config features of `graph_list` stacked and standardized: (features, mean, scale)."""
  x = np.concatenate([config_features(g) for g in graph_list])
  mean, scale = x.mean(0), x.std(0) + 1e-9
  return (x - mean) / scale, mean, scale


def main(argv):
  del argv
  root = pathlib.Path(_DATA_DIR.value)
  test_architectures = sorted(a for a, s in generate.SPLIT_OF_ARCHITECTURE.items() if s == "test")
  with tempfile.TemporaryDirectory() as scratch:
    regenerated = generate.generate(scratch, _SCALE.value, _SEED.value, architectures=test_architectures)
    noiseless = {}
    for item in regenerated:
      relative = item.path.relative_to(scratch)
      if (root / relative).read_bytes() != item.path.read_bytes():
        raise errors.InputError(f"{root / relative}: differs from its regeneration; wrong --scale/--seed?")
      noiseless[str(relative)] = item.noiseless_runtimes
  rng = np.random.default_rng(0)
  table = ["| collection | test graphs | random | ridge on summed config features | per-node layout ridge, "
           "half of each graph's configs | noiseless cost model |", "|---|---:|---:|---:|---:|---:|"]
  for name in graphs.COLLECTIONS:
    collection = graphs.collection_directory("", name)
    train = [npz.read_graph(p) for p in sorted((root / "npz" / collection / "train").glob("*.npz"))]
    train_features, mean, scale = standardized_features(train)
    train_targets = np.concatenate([standardized(g.runtimes()) for g in train])
    layout = isinstance(train[0], graphs.LayoutGraph)
    score = metrics.kendall_tau if layout else metrics.tile_score
    rows = {"random": [], "ridge": [], "per_node": [], "model": []}
    for path in sorted((root / "npz" / collection / "test").glob("*.npz")):
      graph = npz.read_graph(path)
      labels = np.load(root / "test_labels" / collection / "test" / (path.stem + ".npy"))
      actual = labels.astype(np.float64) if labels.ndim == 1 else labels[:, 0] / labels[:, 1]
      rows["random"].append(score(actual, rng.random(len(actual))))
      predicted = ridge.ridge_predictions(train_features, train_targets, (config_features(graph) - mean) / scale)
      rows["ridge"].append(score(actual, predicted))
      if layout:
        rows["per_node"].append(ridge.per_node_layout_ridge_tau(dataclasses.replace(graph, config_runtime=labels)))
      rows["model"].append(score(actual, noiseless[str(path.relative_to(root))]))
    per_node = f"{np.mean(rows['per_node']):.3f}" if layout else "-"
    table.append(f"| {name} | {len(rows['model'])} | {np.mean(rows['random']):.3f} | "
                 f"{np.mean(rows['ridge']):.3f} | {per_node} | {np.mean(rows['model']):.3f} |")
  benchmark_results.write("research/learnability", f"Learnability of the generated data under {root} (test split; tile: "
                          "tile score, layout: mean Kendall tau)", "\n".join(table), _OUT.value)


if __name__ == "__main__":
  program.run(main)
