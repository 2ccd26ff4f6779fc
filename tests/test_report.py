"""The run report: a metric table for every collection and real PNG plots beside the Markdown."""

import sys

import numpy as np
import pytest

from tpu_graphs.train import report
from tpu_graphs.train import metrics


def fake_result(collection, graphs, seed):
  rng = np.random.default_rng(seed)
  scored = {}
  for g in range(graphs):
    runtimes = rng.uniform(1, 10, size=40)
    scored[f"{collection}:g{g}"] = (runtimes, runtimes + rng.normal(scale=2.0, size=40))
  history = [{"epoch": e, "loss": 1.0 / (e + 1), "val_kendall_tau": 0.1 * e, "val_tile_score": 0.5} for e in range(3)]
  taus = [metrics.kendall_tau(r, s) for r, s in scored.values()]
  return report.CollectionResult(collection, history, scored, {"kendall_tau": float(np.mean(taus))})


def test_report_has_every_collection_and_valid_pngs(tmp_path):
  results = [fake_result(c, 3, i) for i, c in enumerate(
      ["tile:xla", "layout:xla:default", "layout:xla:random", "layout:nlp:default", "layout:nlp:random"])]
  path = report.write_report(results, tmp_path)
  text = path.read_text()
  for result in results:
    assert f"| {result.collection} | {result.summary['kendall_tau']:.4f} |" in text
  for image in ["training_curves.png", "rank_scatter.png", "tile_top_k_error.png", "kendall_per_graph.png"]:
    assert f"]({image})" in text
    assert (tmp_path / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_top_k_error_curve_matches_metric_and_never_increases():
  scored = {"a": (np.array([3.0, 1.0, 2.0, 5.0]), np.array([0.0, 3.0, 1.0, 2.0])),
            "b": (np.array([1.0, 2.0]), np.array([0.0, 1.0]))}
  curve = report.top_k_error_curve(scored)
  # a, by score: runtimes 3, 2, 5, 1 (best 1): errors 2, 1, 1, 0 for K = 1..4; b is right at K = 1.
  assert curve[:4] == pytest.approx([1.0, 0.5, 0.5, 0.0])
  assert curve[4:] == [0.0] * 6

if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
