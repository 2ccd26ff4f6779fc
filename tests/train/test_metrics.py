"""Ranking metrics against values computed by hand and by brute force over pairs."""

import itertools
import sys

import numpy as np
import pytest

from tpu_graphs.train import metrics


def test_top_k_slowdown_is_best_of_top_k_over_best_minus_one():
  runtimes = [4.0, 2.0, 8.0, 5.0]
  scores = [0.1, 0.9, 0.2, 0.3]  # predicted order: 0, 2, 3, 1
  assert metrics.top_k_slowdown(runtimes, scores, 1) == pytest.approx(4 / 2 - 1)
  assert metrics.top_k_slowdown(runtimes, scores, 3) == pytest.approx(4 / 2 - 1)
  assert metrics.top_k_slowdown(runtimes, scores, 4) == 0.0


def test_tile_score_is_one_minus_top5_slowdown():
  runtimes = np.array([10, 9, 8, 7, 6, 5, 1], float)
  scores = np.arange(7.0)  # top 5 predicted: runtimes 10..6, best 1
  assert metrics.tile_score(runtimes, scores) == pytest.approx(1 - (6 / 1 - 1))
  assert metrics.tile_score(runtimes, -scores) == 1.0


def test_ordered_pair_accuracy_by_hand():
  # Pairs with different runtimes: (0,1) (0,2) (1,2); scores order (0,1) and (0,2) right, (1,2) wrong.
  assert metrics.ordered_pair_accuracy([1.0, 2.0, 3.0], [0.0, 2.0, 1.0]) == pytest.approx(2 / 3)
  # Tied runtimes are not compared; tied scores of different runtimes count as wrong.
  assert metrics.ordered_pair_accuracy([1.0, 1.0, 3.0], [5.0, 0.0, 0.0]) == pytest.approx(0.0)
  assert metrics.ordered_pair_accuracy([2.0, 2.0], [0.0, 1.0]) == 1.0


def test_kendall_tau_by_hand():
  assert metrics.kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
  assert metrics.kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
  # 5 concordant, 1 discordant pairs, no ties: (5 - 1) / 6.
  assert metrics.kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
  assert metrics.kendall_tau([1, 1, 1], [1, 2, 3]) == 0.0


def _brute_force(runtimes, scores):
  concordant = discordant = runtime_ties = score_ties = 0
  for i, j in itertools.combinations(range(len(runtimes)), 2):
    sign = np.sign(runtimes[i] - runtimes[j]) * np.sign(scores[i] - scores[j])
    concordant += sign > 0
    discordant += sign < 0
    runtime_ties += runtimes[i] == runtimes[j]
    score_ties += scores[i] == scores[j]
  pairs = len(runtimes) * (len(runtimes) - 1) // 2
  opa = concordant / (pairs - runtime_ties) if pairs > runtime_ties else 1.0
  denominator = np.sqrt((pairs - runtime_ties) * (pairs - score_ties))
  return opa, (concordant - discordant) / denominator if denominator else 0.0


def test_pair_metrics_match_brute_force_with_ties():
  rng = np.random.default_rng(0)
  for _ in range(100):
    size = int(rng.integers(1, 50))
    runtimes, scores = rng.integers(0, 7, size).astype(float), rng.integers(0, 7, size).astype(float)
    opa, tau = _brute_force(runtimes, scores)
    assert metrics.ordered_pair_accuracy(runtimes, scores) == pytest.approx(opa, abs=1e-12)
    assert metrics.kendall_tau(runtimes, scores) == pytest.approx(tau, abs=1e-12)


def test_tile_metrics_of_a_kernel_by_hand():
  runtimes = [9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.5, 1.2, 1.0, 3.0]
  scores = np.arange(12.0)  # predicted order 0, 1, ..., 11: the best config (1.0) is 11th
  opa, _ = _brute_force(runtimes, scores)
  assert metrics.tile_metrics(runtimes, scores) == pytest.approx(
      {"top1_slowdown": 8.0, "top5_slowdown": 4.0, "top10_slowdown": 0.2, "tile_score": -3.0, "opa": opa})
  np.testing.assert_array_equal(metrics.top_k_indices([3.0, 1.0, 1.0, 0.0], 3), [3, 1, 2])  # ties in index order


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_scores_that_order_nothing_give_nan(bad):
  runtimes, scores = [3.0, 1.0, 2.0], [0.0, bad, 1.0]
  for metric in (metrics.ordered_pair_accuracy, metrics.kendall_tau, metrics.tile_score):
    assert np.isnan(metric(runtimes, scores)), metric.__name__
  assert np.isnan(metrics.top_k_slowdown(runtimes, scores, 1))


def test_mismatched_shapes_and_unmeasured_runtimes_are_rejected():
  with pytest.raises(ValueError, match="same shape"):
    metrics.kendall_tau([1.0, 2.0], [1.0])
  with pytest.raises(ValueError, match="same shape"):
    metrics.kendall_tau([[1.0, 2.0]], [[1.0, 2.0]])
  with pytest.raises(ValueError, match="c > 0"):
    metrics.ordered_pair_accuracy([], [])
  with pytest.raises(ValueError, match="positive runtimes"):
    metrics.tile_score([0.0, 0.0], [1.0, 2.0])


@pytest.mark.parametrize("metric", [metrics.kendall_tau, metrics.ordered_pair_accuracy, metrics.tile_score,
                                    lambda runtimes, scores: metrics.top_k_slowdown(runtimes, scores, 1)],
                         ids=["kendall_tau", "opa", "tile_score", "top1_slowdown"])
@pytest.mark.parametrize("scores", [np.full(6, np.nan), np.array([0, 1, np.nan, 3, 4, 5]), np.array([0, np.inf, 2, 3, 4, 5])],
                         ids=["all_nan", "one_nan", "one_inf"])
def test_metrics_of_scores_that_are_not_numbers_are_nan_never_perfect(metric, scores):
  assert np.isnan(metric(np.arange(1.0, 7.0), scores))


def test_spearman_is_pearson_of_average_ranks_by_hand():
  assert metrics.spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
  assert metrics.spearman([1, 2, 2, 4], [10, 30, 30, 40]) == pytest.approx(1.0)
  assert metrics.spearman([1, 1, 1], [1, 2, 3]) == 0.0


def test_random_top_k_slowdown_is_the_mean_over_every_k_subset():
  runtimes = np.array([3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0, 3.5])
  for k in (1, 3, 5, 8):
    brute = np.mean([min(runtimes[list(subset)]) for subset in itertools.combinations(range(8), k)]) / 1.0 - 1.0
    assert metrics.random_top_k_slowdown(runtimes, k) == pytest.approx(brute)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
