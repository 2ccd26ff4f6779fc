"""Predicted gain: a config's runtime relative to a reference config, from the model's scores.

A ranking model's scores order configs but carry no unit. A compiler deciding whether to leave
its own configuration (candidate 0) asks how much faster the best config is, and how sure that
is. The calibration answers from the run's validation split, measured configs the model was not
trained on: over pairs of configs of the same graph, log(runtime_i / runtime_j) as a function of
d = score_i − score_j, odd (swapping the pair flips the sign) and piecewise linear through the
median log ratio of each of NUM_BINS bins of |d| (equal counts of pairs), made monotone. Medians,
not a least-squares slope: real programs hold a few configs many times slower than the rest
(unet3d), which pull a slope far from what most pairs show (benchmarks/predicted_gain.py). The
interval is the `COVERAGE` quantile of the absolute residuals per bin (a larger score gap may be
a larger, and less certain, gain). Stored beside the SavedModel as
`calibration.json`; an export without measured validation runtimes has none, and then no ratio is
given rather than a made-up one.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Optional

import numpy as np

from tpu_graphs.data import storage

FILE_NAME = "calibration.json"
COVERAGE = 0.8  # the share of validation pairs whose measured ratio the interval holds
NUM_BINS = 8  # bins of |score difference|, equal counts of validation pairs
MAX_PAIRS_PER_GRAPH = 20000  # pairs drawn per graph, so a graph of thousands of configs does not dominate
# Said where an export has no calibration.
NO_CALIBRATION = "no predicted ratio: the model was exported without measured validation runtimes to calibrate on"


@dataclasses.dataclass(frozen=True)
class Calibration:
  """log(rt_i / rt_j) ≈ sign(d) · f(|d|), d = s_i − s_j, f piecewise linear through (0, 0) and
  (knots[k], knot_values[k]), constant beyond the last knot; with a COVERAGE interval
  ± half_widths[b] where |d| falls in bin b: bin b holds |d| up to bin_edges[b] (the last, beyond)."""

  knots: tuple[float, ...]  # NUM_BINS nondecreasing |d|: each bin's median
  knot_values: tuple[float, ...]  # NUM_BINS monotone log ratios: each bin's median, in the sign of d
  bin_edges: tuple[float, ...]  # NUM_BINS − 1 increasing upper edges
  half_widths: tuple[float, ...]  # NUM_BINS, in log runtime
  coverage: float
  pairs: int  # validation pairs fitted on
  graphs: int  # validation graphs they come from

  def log_ratio_interval(self, differences: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(predicted, low, high) log runtime ratios, each shaped as `differences` (s_i − s_j)."""
    differences = np.asarray(differences, np.float64)
    predicted = np.sign(differences) * interpolate(np.abs(differences), self.knots, self.knot_values)
    half = np.asarray(self.half_widths)[np.searchsorted(self.bin_edges, np.abs(differences), side="left")]
    return predicted, predicted - half, predicted + half

  def ratios(self, scores: np.ndarray, configs, reference: int = 0) -> list[tuple[float, float, float]]:
    """[(ratio, low, high)] of each of `configs` to config `reference` of (c,) `scores`: its
    predicted runtime over the reference's (0.83: 17% faster) and the COVERAGE interval."""
    scores = np.asarray(scores, np.float64)
    predicted, low, high = self.log_ratio_interval(scores[np.asarray(configs, np.int64)] - scores[reference])
    return [(float(p), float(lo), float(hi)) for p, lo, hi in zip(np.exp(predicted), np.exp(low), np.exp(high))]

  def to_json(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_json(cls, values: dict) -> "Calibration":
    return cls(*(tuple(map(float, values[name])) for name in ("knots", "knot_values", "bin_edges", "half_widths")),
               float(values["coverage"]), int(values["pairs"]), int(values["graphs"]))


def interpolate(gaps: np.ndarray, knots, values) -> np.ndarray:
  """f(gaps): piecewise linear through (0, 0) and (knots[k], values[k]), values[-1] beyond the last
  knot (np.interp's rule, written out so that gain_calibration.h computes it step for step)."""
  gaps = np.asarray(gaps, np.float64)
  xs, ys = np.concatenate([[0.0], knots]), np.concatenate([[0.0], values])
  index = np.clip(np.searchsorted(xs, gaps, side="right") - 1, 0, xs.size - 1)
  following = np.minimum(index + 1, xs.size - 1)
  span = xs[following] - xs[index]
  step = np.divide(gaps - xs[index], span, out=np.zeros_like(gaps), where=span > 0)
  return np.where(index >= xs.size - 1, ys[-1], ys[index] + step * (ys[following] - ys[index]))


def graph_pairs(runtimes: np.ndarray, scores: np.ndarray, rng: np.random.Generator,
                max_pairs: int = MAX_PAIRS_PER_GRAPH) -> tuple[np.ndarray, np.ndarray]:
  """(score differences, log runtime ratios), each (p,), of pairs i < j of one graph's measured
  configs (runtime > 0): every pair, or `max_pairs` drawn at random where there are more."""
  measured = np.flatnonzero(np.asarray(runtimes) > 0)
  count = measured.size
  if count < 2:
    return np.zeros([0]), np.zeros([0])
  total = count * (count - 1) // 2
  if total <= max_pairs:
    first, second = np.triu_indices(count, 1)
  else:
    first, second = rng.integers(0, count, [2, max_pairs * 2])
    keep = first != second
    first, second = first[keep][:max_pairs], second[keep][:max_pairs]
  log_runtimes = np.log(np.asarray(runtimes, np.float64)[measured])
  scores = np.asarray(scores, np.float64)[measured]
  return scores[first] - scores[second], log_runtimes[first] - log_runtimes[second]


def fit_pairs(differences: np.ndarray, log_ratios: np.ndarray, graphs: int) -> Optional[Calibration]:
  """The calibration of (p,) score differences to (p,) log runtime ratios; None for fewer than
  NUM_BINS pairs or no score difference at all (nothing to fit)."""
  differences, log_ratios = np.asarray(differences, np.float64), np.asarray(log_ratios, np.float64)
  gaps, signed = np.abs(differences), np.sign(differences) * log_ratios  # each pair ordered so that d >= 0
  if differences.size < NUM_BINS or not gaps.any():
    return None
  edges = np.quantile(gaps, np.arange(1, NUM_BINS) / NUM_BINS)
  bins = np.searchsorted(edges, gaps, side="left")
  medians = [(float(np.median(gaps[bins == b])), float(np.median(signed[bins == b]))) for b in range(NUM_BINS)
             if np.any(bins == b)]
  knots, values = np.array([gap for gap, _ in medians]), np.array([value for _, value in medians])
  # Monotone in the direction scores and runtimes go together (the model's, even where it ranks backwards).
  values = np.maximum.accumulate(values) if np.dot(gaps, signed) >= 0 else np.minimum.accumulate(values)
  if knots.size < NUM_BINS:  # equal gaps left bins empty: the last knot repeated
    knots, values = (np.pad(array, (0, NUM_BINS - array.size), mode="edge") for array in (knots, values))
  residuals = np.abs(signed - interpolate(gaps, knots, values))
  half_widths = tuple(float(np.quantile(residuals[bins == b], COVERAGE)) if np.any(bins == b) else
                      float(np.quantile(residuals, COVERAGE)) for b in range(NUM_BINS))
  return Calibration(tuple(map(float, knots)), tuple(map(float, values)), tuple(map(float, edges)), half_widths,
                     COVERAGE, int(differences.size), graphs)


def fit(scored: dict, seed: int = 0) -> Optional[Calibration]:
  """The calibration of validation graphs {key: (runtimes (c,), scores (c,))} (what
  scoring.score_batches returns); None where no graph has two measured configs."""
  rng = np.random.default_rng(seed)
  parts = [graph_pairs(runtimes, scores, rng) for runtimes, scores in scored.values()]
  parts = [(d, y) for d, y in parts if d.size]
  if not parts:
    return None
  return fit_pairs(np.concatenate([d for d, _ in parts]), np.concatenate([y for _, y in parts]), len(parts))


def as_json(calibration: Optional[Calibration]) -> dict:
  """What FILE_NAME holds: the calibration, or, for None, the reason there is none."""
  if calibration is None:
    return {"calibration": None, "reason": NO_CALIBRATION}
  return {"calibration": calibration.to_json()}


def read(folder) -> Optional[Calibration]:
  """The calibration stored as FILE_NAME in `folder` (a run's or its export's); None where it has
  none (exported before calibrations existed, or without measured validation runtimes)."""
  path = storage.join(folder, FILE_NAME)
  if not storage.exists(path):
    return None
  values = json.loads(storage.read_text(path))["calibration"]
  return Calibration.from_json(values) if values else None


def copy(run_dir, export_dir) -> None:
  """Puts the run's calibration beside its exported SavedModel, where Ranker and the native library
  read it; nothing where the run has none (trained before calibrations existed)."""
  source = storage.join(run_dir, FILE_NAME)
  if storage.exists(source):
    storage.write_text(storage.join(export_dir, FILE_NAME), storage.read_text(source))


def reference_rank(order: np.ndarray, reference: int = 0) -> int:
  """The 1-based place of config `reference` in `order` (config indices, predicted fastest first)."""
  return int(np.flatnonzero(np.asarray(order) == reference)[0]) + 1
