"""The predicted gain's calibration: fitted on pairs of one graph's configs, it turns score
differences into runtime ratios with an interval that holds its share of unseen pairs."""

import json
import sys

import numpy as np
import pytest

from tpu_graphs.train import calibration


def _graphs(rng, slope: float, noise: float, count: int = 20, configs: int = 30) -> dict:
  """{key: (runtimes, scores)} whose log runtimes are slope · score plus a graph's offset and noise."""
  scored = {}
  for index in range(count):
    scores = rng.normal(size=configs)
    runtimes = np.exp(slope * scores + rng.normal() + noise * rng.normal(size=configs))
    scored[f"tile:xla:k{index}"] = (runtimes, scores.astype(np.float32))
  return scored


def test_fit_follows_the_log_runtime_ratio_of_each_score_difference():
  fitted = calibration.fit(_graphs(np.random.default_rng(0), slope=0.3, noise=0.05))
  differences = np.array([-2.0, -0.5, 0.2, 1.0, 2.5])
  np.testing.assert_allclose(fitted.log_ratio_interval(differences)[0], 0.3 * differences, atol=0.02)
  assert fitted.graphs == 20 and fitted.pairs == 20 * 30 * 29 // 2


def test_a_few_configs_many_times_slower_do_not_move_what_most_pairs_predict():
  """As on real unet3d: a least-squares slope would follow the outliers; the bins' medians do not."""
  rng = np.random.default_rng(3)
  scores = rng.normal(size=200)
  log_runtimes = 0.01 * scores + np.where(scores > 2.0, 3.0, 0.0)  # the slowest ~2% are e^3 times slower
  fitted = calibration.fit({"g": (np.exp(log_runtimes), scores)})
  assert fitted.log_ratio_interval(np.array([0.5]))[0][0] == pytest.approx(0.005, abs=0.002)


def test_the_interval_holds_its_coverage_of_unseen_pairs():
  rng = np.random.default_rng(1)
  fitted = calibration.fit(_graphs(rng, slope=0.3, noise=0.2))
  differences, log_ratios = zip(*(calibration.graph_pairs(r, s, rng) for r, s in _graphs(rng, 0.3, 0.2).values()))
  _, low, high = fitted.log_ratio_interval(np.concatenate(differences))
  measured = np.concatenate(log_ratios)
  assert np.mean((low <= measured) & (measured <= high)) == pytest.approx(calibration.COVERAGE, abs=0.03)


def _two_knot_calibration(edges=(0.1, 0.5, 1.0), widths=(0.01, 0.02, 0.05, 0.1)) -> calibration.Calibration:
  """0.5 · d up to |d| = 1, then rising to 1.5 at |d| = 2 and flat beyond."""
  return calibration.Calibration(knots=(1.0, 2.0), knot_values=(0.5, 1.5), bin_edges=edges, half_widths=widths,
                                 coverage=0.8, pairs=10, graphs=1)


def test_ratios_to_config_zero_follow_the_score_differences_and_bins():
  ratios = _two_knot_calibration().ratios(np.array([1.0, 0.0, 1.3, 4.0, 2.5]), [1, 2, 3, 4, 0])
  np.testing.assert_allclose(ratios, [(np.exp(-0.5), np.exp(-0.55), np.exp(-0.45)),
                                      (np.exp(0.15), np.exp(0.13), np.exp(0.17)),
                                      (np.exp(1.5), np.exp(1.4), np.exp(1.6)),
                                      (np.exp(1.0), np.exp(0.9), np.exp(1.1)),
                                      (1.0, np.exp(-0.01), np.exp(0.01))])


def test_interpolation_is_numpys_through_zero_and_the_knots():
  gaps = np.linspace(0.0, 5.0, 101)
  for knots, values in (((1.0, 1.0, 2.0), (1.0, 2.0, 4.0)), ((0.5, 3.0), (-0.1, -2.0))):
    np.testing.assert_allclose(calibration.interpolate(gaps, knots, values),
                               np.interp(gaps, (0.0, *knots), (0.0, *values)))


def test_unmeasured_graphs_give_no_calibration_and_its_file_says_why(tmp_path):
  scored = {"layout:xla:default:g": (np.zeros(5), np.arange(5, dtype=np.float32))}
  assert calibration.fit(scored) is None
  (tmp_path / calibration.FILE_NAME).write_text(json.dumps(calibration.as_json(None)))
  assert calibration.read(tmp_path) is None
  assert json.loads((tmp_path / calibration.FILE_NAME).read_text())["reason"] == calibration.NO_CALIBRATION


def test_a_calibration_survives_its_file():
  fitted = calibration.fit(_graphs(np.random.default_rng(2), slope=-0.2, noise=0.1))
  assert calibration.Calibration.from_json(json.loads(json.dumps(calibration.as_json(fitted)))["calibration"]) == fitted


def test_large_graphs_give_a_bounded_draw_of_pairs_of_measured_configs():
  runtimes = np.concatenate([np.zeros(10), np.arange(1, 1001, dtype=np.float64)])
  differences, log_ratios = calibration.graph_pairs(runtimes, runtimes, np.random.default_rng(0), max_pairs=500)
  assert differences.size == 500 and np.all(np.isfinite(log_ratios))


def test_reference_rank_is_the_one_based_place_of_config_zero():
  assert calibration.reference_rank(np.array([3, 1, 0, 2])) == 3


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
