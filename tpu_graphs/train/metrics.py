"""Ranking quality of predicted config scores against measured runtimes, per graph, in numpy.

Convention shared by every task: a *score* ranks configs, lower = predicted faster. All functions
take one graph's arrays: `runtimes` (c,) measured (normalized) runtimes and `scores` (c,). Scores
holding NaN or infinity (a diverged model) give NaN for every metric.

* `top_k_slowdown`: how much slower the best of the k configs ranked first is than the best
  config overall, `min(runtimes[top k by score]) / min(runtimes) - 1` (the paper's top-K error).
* `tile_score`: the Kaggle tile metric of one kernel, `1 - top_k_slowdown(k=5)`.
* `ordered_pair_accuracy` (OPA): of the pairs with different runtimes, the fraction whose scores
  order them the same way (strictly).
* `kendall_tau`: Kendall's tau-b between scores and runtimes, O(c log^2 c) so it works for layout
  graphs with 10^5 configs.
* `spearman`, `random_top_k_slowdown`: for the predicted gain (calibration.py) and the baseline of
  a random pick.
"""

from __future__ import annotations

import numpy as np


def _check(runtimes, scores) -> tuple[np.ndarray, np.ndarray]:
  runtimes, scores = np.asarray(runtimes, np.float64), np.asarray(scores, np.float64)
  if runtimes.ndim != 1 or runtimes.shape != scores.shape or runtimes.size == 0:
    raise ValueError(f"expected runtimes and scores of the same shape (c,), c > 0; got "
                     f"{runtimes.shape} and {scores.shape}")
  return runtimes, scores


def _unordered(scores: np.ndarray) -> bool:
  """Whether scores hold NaN or infinity: they order nothing, and every metric of them is NaN
  (sorting would put NaN last and call a model that diverged a perfect ranker)."""
  return not np.all(np.isfinite(scores))


def top_k_indices(scores, k: int) -> np.ndarray:
  """Indices of the k lowest scores (predicted fastest), best first; ties keep index order."""
  return np.argsort(np.asarray(scores), kind="stable")[:k]


def top_k_slowdown(runtimes, scores, k: int) -> float:
  """min(runtime of the k best-scored configs) / min(runtime) - 1; 0 when the best is among them."""
  runtimes, scores = _check(runtimes, scores)
  if _unordered(scores):
    return float("nan")
  best = runtimes.min()
  if best <= 0:
    raise ValueError("top-k slowdown needs positive runtimes (test-split graphs have none)")
  return float(runtimes[top_k_indices(scores, k)].min() / best - 1.0)


def tile_score(runtimes, scores) -> float:
  """Kaggle tile:xla score of one kernel: 1 - top-5 slowdown (1 is perfect)."""
  return 1.0 - top_k_slowdown(runtimes, scores, 5)


def _tie_pairs(values: np.ndarray) -> int:
  """Number of pairs with equal values."""
  _, counts = np.unique(values, return_counts=True)
  return int((counts * (counts - 1) // 2).sum())


def _count_inversions(sequence: np.ndarray) -> int:
  """Pairs i < j with sequence[i] > sequence[j] (strictly), by a bottom-up vectorized merge sort.

  `sequence` holds non-negative integers below len(sequence) (dense ranks).
  """
  n = sequence.size
  values = sequence.astype(np.int64)
  inversions = 0
  width = 1
  while width < n:
    # Blocks of `width` are sorted; count inversions between each left block and its right
    # neighbour, then merge them. Offsetting each pair of blocks by pair * n keeps one global
    # sorted array in which searchsorted stays inside its own block.
    positions = np.arange(n)
    pair = positions // (2 * width)
    is_left = (positions % (2 * width)) < width
    shifted = values + pair * n
    left = shifted[is_left]  # sorted overall: blocks sorted, offsets increasing
    right = shifted[~is_left]
    left_end = np.searchsorted(left, (pair[~is_left] + 1) * n, side="left")
    not_greater = np.searchsorted(left, right, side="right")
    inversions += int((left_end - not_greater).sum())
    values = np.sort(shifted) - pair * n  # merged; np.sort keeps pair order thanks to offsets
    width *= 2
  return inversions


def _pair_counts(runtimes: np.ndarray, scores: np.ndarray) -> tuple[int, int, int, int, int]:
  """(all pairs, pairs tied in runtime, pairs tied in score, concordant pairs, discordant pairs)."""
  n = runtimes.size
  order = np.lexsort((runtimes, scores))  # by score, ties by runtime: tied scores add no inversion
  dense_runtime_ranks = np.unique(runtimes, return_inverse=True)[1]
  discordant = _count_inversions(dense_runtime_ranks[order])
  all_pairs = n * (n - 1) // 2
  runtime_ties, score_ties = _tie_pairs(runtimes), _tie_pairs(scores)
  joint_ties = _tie_pairs(runtimes + 1j * scores)
  concordant = all_pairs - runtime_ties - score_ties + joint_ties - discordant
  return all_pairs, runtime_ties, score_ties, concordant, discordant


def ordered_pair_accuracy(runtimes, scores) -> float:
  """Fraction of the pairs with different runtimes that scores order strictly the same way.

  Pairs tied in score count as wrong; 1.0 when no pair has different runtimes.
  """
  runtimes, scores = _check(runtimes, scores)
  if _unordered(scores):
    return float("nan")
  all_pairs, runtime_ties, _, concordant, _ = _pair_counts(runtimes, scores)
  comparable = all_pairs - runtime_ties
  return 1.0 if comparable == 0 else concordant / comparable


def kendall_tau(runtimes, scores) -> float:
  """Kendall's tau-b of scores against runtimes, in [-1, 1]; 0 when either is constant."""
  runtimes, scores = _check(runtimes, scores)
  if _unordered(scores):
    return float("nan")
  all_pairs, runtime_ties, score_ties, concordant, discordant = _pair_counts(runtimes, scores)
  denominator = np.sqrt(float(all_pairs - runtime_ties) * float(all_pairs - score_ties))
  return 0.0 if denominator == 0 else float((concordant - discordant) / denominator)


def average_ranks(values) -> np.ndarray:
  """(n,) float64 1-based ranks of (n,) `values`, ties sharing the mean of their ranks."""
  _, inverse, counts = np.unique(np.asarray(values), return_inverse=True, return_counts=True)
  last = np.cumsum(counts)
  return (last - (counts - 1) / 2.0)[inverse.reshape(-1)]


def spearman(first, second) -> float:
  """Spearman's rank correlation of two (n,) arrays (Pearson's of their average ranks); 0 when
  either is constant. For predicted against measured quantities, e.g. runtime ratios."""
  first, second = average_ranks(first), average_ranks(second)
  first, second = first - first.mean(), second - second.mean()
  denominator = np.sqrt(np.dot(first, first) * np.dot(second, second))
  return 0.0 if denominator == 0 else float(np.dot(first, second) / denominator)


def random_top_k_slowdown(runtimes, k: int) -> float:
  """The expected top_k_slowdown of k configs picked uniformly at random without replacement,
  exactly: the i-th fastest (0-based) of c configs is the best of the pick with probability
  C(c-1-i, k-1) / C(c, k). The baseline a model's top-k slowdown is worth comparing with."""
  ordered = np.sort(np.asarray(runtimes, np.float64))
  count = ordered.size
  if k >= count:
    return 0.0
  # C(c-1-i, k-1) / C(c, k) as a running product, exact in floating point for any c.
  probability = np.zeros(count)
  probability[0] = k / count
  for i in range(1, count - k + 1):
    probability[i] = probability[i - 1] * (count - i - k + 1) / (count - i)
  return float(np.dot(probability, ordered) / ordered[0] - 1.0)


def tile_metrics(runtimes, scores) -> dict[str, float]:
  """Every tile metric of one kernel: top-1/5/10 slowdown, tile score, OPA."""
  return {
      "top1_slowdown": top_k_slowdown(runtimes, scores, 1),
      "top5_slowdown": top_k_slowdown(runtimes, scores, 5),
      "top10_slowdown": top_k_slowdown(runtimes, scores, 10),
      "tile_score": tile_score(runtimes, scores),
      "opa": ordered_pair_accuracy(runtimes, scores),
  }
