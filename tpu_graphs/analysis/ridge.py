"""Ridge-regression rankers: the linear baselines that say how learnable a dataset is.

`per_node_layout_ridge_tau` asks of one layout file whether its runtimes are mostly a sum of
per-node layout effects, as real layout runtimes largely are: each configurable node's 18-value
config row is read as one category, one-hot per (node, category), and a ridge regression on log
runtime fit on part of the file's configs ranks the others (Kendall's tau): how much of the
ranking per-node layout effects alone explain, within one program.
"""

from __future__ import annotations

import numpy as np

from tpu_graphs.data import graphs
from tpu_graphs.analysis import layout_search
from tpu_graphs.train import metrics

# Near least squares: on one-hot layouts the penalty only settles nodes whose layouts move
# together (identical columns). Larger penalties shrink the rare layouts' effects and cost tau
# (measured on halves of the real unet3d's configs when the penalty was chosen).
LAYOUT_RIDGE_PENALTY = 0.01


def ridge_predictions(train_features: np.ndarray, train_targets: np.ndarray, test_features: np.ndarray,
                      penalty: float = 1.0) -> np.ndarray:
  """(t,) predictions for `test_features` (t, f) of a ridge regression fit on (n, f) features and
  (n,) targets, with an unpenalized intercept.

  Solves whichever of the primal (f x f) and dual (n x n) systems is smaller; both give the same
  predictions, and one-hot features of large graphs have many more columns than configs.
  """
  feature_mean, target_mean = train_features.mean(0), train_targets.mean()
  x, test = train_features - feature_mean, test_features - feature_mean
  centered = train_targets - target_mean
  if x.shape[1] <= x.shape[0]:
    weights = np.linalg.solve(x.T @ x + penalty * np.eye(x.shape[1]), x.T @ centered)
  else:
    weights = x.T @ np.linalg.solve(x @ x.T + penalty * np.eye(x.shape[0]), centered)
  return test @ weights + target_mean


def per_node_layout_one_hot(categories: np.ndarray, counts: np.ndarray) -> np.ndarray:
  """(c, sum(counts)) float64: per configurable node, a one-hot of its layout.

  Args:
    categories: (c, nc) int64 and counts (nc,) int64, from layout_search.node_layout_categories.
  """
  offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
  one_hot = np.zeros((categories.shape[0], int(counts.sum())), np.float64)
  one_hot[np.arange(categories.shape[0])[:, None], categories + offsets] = 1.0
  return one_hot


def per_node_layout_ridge_tau(graph: graphs.LayoutGraph, train_fraction: float = 0.5, seed: int = 0,
                              max_configs: int = 4000) -> float:
  """Kendall's tau of a per-node-layout ridge fit on `train_fraction` of a file's configs and
  ranking the rest (see the module docstring).

  Args:
    graph: a labelled layout graph (positive runtimes).
    train_fraction: the share of configs, drawn at random, the ridge is fit on.
    seed: seeds the draw (and the subsample below).
    max_configs: files with more configs are first subsampled to this many, which bounds the
      size of the regression.

  Raises:
    ValueError: for an unlabelled graph or one with fewer than 4 configs.
  """
  runtimes = graph.runtimes()
  if runtimes.size < 4 or runtimes.min() <= 0:
    raise ValueError(f"{graph.graph_id}: the per-node layout ridge needs at least 4 configs with positive "
                     "runtimes (test files have none)")
  rng = np.random.default_rng(seed)
  kept = np.sort(rng.permutation(runtimes.size)[:max_configs])
  categories, counts = layout_search.node_layout_categories(graph.node_config_feat)
  features = per_node_layout_one_hot(categories[kept], counts)
  order = rng.permutation(kept.size)
  split = min(max(int(round(train_fraction * kept.size)), 2), kept.size - 2)
  train, test = order[:split], order[split:]
  targets = np.log(runtimes[kept])
  predicted = ridge_predictions(features[train], targets[train], features[test], LAYOUT_RIDGE_PENALTY)
  return metrics.kendall_tau(targets[test], predicted)
