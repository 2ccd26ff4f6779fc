"""Ridge rankers: the solver and the within-program per-node-layout ridge."""

import sys

import numpy as np
import pytest

import layout_test_data
import sample_data
from tpu_graphs.data import graphs
from tpu_graphs.data import npz
from tpu_graphs.analysis import ridge


def test_primal_and_dual_solutions_predict_the_same():
  rng = np.random.default_rng(0)
  train, targets, test = rng.normal(size=(30, 8)), rng.normal(size=30), rng.normal(size=(5, 8))
  primal = ridge.ridge_predictions(train, targets, test, penalty=0.5)  # 8 columns <= 30 rows
  # Five copies of every column (40 > 30 rows) make the dual system the smaller one; spreading a
  # weight evenly over its 5 copies fits the same function at 5 times the penalty.
  dual = ridge.ridge_predictions(np.repeat(train, 5, axis=1), targets, np.repeat(test, 5, axis=1), penalty=2.5)
  assert dual == pytest.approx(primal, rel=1e-6)


def test_one_hot_has_one_column_per_node_and_layout():
  categories, counts = np.array([[0, 1], [1, 0], [0, 2]]), np.array([2, 3])
  assert ridge.per_node_layout_one_hot(categories, counts).tolist() == [
      [1, 0, 0, 1, 0], [0, 1, 1, 0, 0], [1, 0, 0, 0, 1]]


def _graph(choices: np.ndarray, runtimes: np.ndarray) -> graphs.LayoutGraph:
  """A layout graph whose node j takes layout (1, 0) or (0, 1) as choices[:, j] is 0 or 1."""
  feat = np.full(choices.shape + (graphs.LAYOUT_CONFIG_FEATURE_WIDTH,), -1.0, np.float32)
  feat[:, :, 0], feat[:, :, 1] = 1 - choices, choices
  return layout_test_data.layout_graph(feat, runtimes)


def test_additive_per_node_effects_are_ranked_almost_perfectly():
  rng = np.random.default_rng(1)
  choices = rng.integers(0, 2, size=(400, 12))
  runtimes = np.rint(1e6 * np.exp(choices @ rng.uniform(0.01, 0.1, size=12)))
  assert ridge.per_node_layout_ridge_tau(_graph(choices, runtimes)) > 0.95


def test_runtimes_unrelated_to_layouts_are_not_ranked():
  rng = np.random.default_rng(2)
  choices = rng.integers(0, 2, size=(400, 12))
  assert abs(ridge.per_node_layout_ridge_tau(_graph(choices, rng.integers(1000, 2000, size=400)))) < 0.1


def test_the_seed_draws_the_split_the_same_seed_gives_the_same_tau_and_unlabelled_graphs_are_refused():
  rng = np.random.default_rng(3)
  choices = rng.integers(0, 2, size=(100, 4))
  graph = _graph(choices, np.rint(1e3 * (1 + choices.sum(1) + rng.random(100))))
  taus = [ridge.per_node_layout_ridge_tau(graph, 0.5, seed) for seed in (7, 8, 9)]
  assert ridge.per_node_layout_ridge_tau(graph, 0.5, 7) == taus[0]
  assert len(set(taus)) == 3  # each seed its own split of the noisy runtimes, so its own tau
  with pytest.raises(ValueError, match="positive runtimes"):
    ridge.per_node_layout_ridge_tau(_graph(choices, np.zeros(100)))


def test_real_layout_runtimes_are_mostly_per_node_effects():
  path = sample_data.require_sample("npz/layout/xla/default/train/unet3d.npz")
  assert ridge.per_node_layout_ridge_tau(npz.read_graph(path)) == pytest.approx(0.80, abs=0.01)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
