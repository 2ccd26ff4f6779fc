"""The run report: a metric table for every collection, a line defining each metric it shows, and real PNG
plots beside the Markdown."""

import dataclasses
import sys

import numpy as np
import pytest

from tpu_graphs.analysis import report
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


def test_report_defines_each_metric_it_shows_in_one_line(tmp_path):
  tile_summary = {"top1_slowdown": 0.3, "top5_slowdown": 0.02, "top10_slowdown": 0.0, "tile_score": 0.98, "opa": 0.88}
  layout_summary = {"kendall_tau": 0.52, "opa": 0.76, "top1_slowdown": 0.01}
  results = [dataclasses.replace(fake_result("tile:xla", 2, 0), summary=tile_summary),
             dataclasses.replace(fake_result("layout:xla:default", 2, 1), summary=layout_summary)]
  text = report.write_report(results, tmp_path).read_text()
  definitions = [line for line in text.splitlines() if line.startswith("- ")]
  assert definitions == [f"- {report.METRIC_DEFINITIONS[name]}"
                         for name in ("top_k_slowdown", "tile_score", "opa", "kendall_tau")]
  assert text.index("| collection |") < text.index(definitions[0]) < text.index("## Training")
  for words in ("top-K slowdown", "1 − `top5_slowdown`", "ordered pair accuracy", "Kendall's tau-b"):
    assert sum(words in line for line in definitions) == 1


def test_a_report_defines_only_the_metrics_it_shows(tmp_path):
  results = [dataclasses.replace(fake_result("layout:nlp:random", 2, 0), summary={"kendall_tau": 0.4})]
  text = report.write_report(results, tmp_path).read_text()
  assert [line for line in text.splitlines() if line.startswith("- ")] == [
      f"- {report.METRIC_DEFINITIONS['kendall_tau']}"]
  assert report.metric_definitions(["val_loss"]) == ""


def test_top_k_error_curve_matches_metric_and_never_increases():
  scored = {"a": (np.array([3.0, 1.0, 2.0, 5.0]), np.array([0.0, 3.0, 1.0, 2.0])),
            "b": (np.array([1.0, 2.0]), np.array([0.0, 1.0]))}
  curve = report.top_k_error_curve(scored)
  # a, by score: runtimes 3, 2, 5, 1 (best 1): errors 2, 1, 1, 0 for K = 1..4; b is right at K = 1.
  assert curve[:4] == pytest.approx([1.0, 0.5, 0.5, 0.0])
  assert curve[4:] == [0.0] * 6


def test_training_curves_count_epochs_from_one_as_the_progress_lines_do():
  result = fake_result("layout:xla:default", 2, 0)  # history epochs 0, 1, 2 (history.json's count)
  figure = report.training_curves_figure([result])
  for axis in figure.axes:
    assert [list(line.get_xdata()) for line in axis.get_lines()] == [[1, 2, 3]]
  low, high = figure.axes[1].get_xlim()
  assert [tick for tick in figure.axes[1].get_xticks() if low <= tick <= high] == [1, 2, 3]  # whole epochs


def test_per_graph_bars_carry_whole_graph_ids_inside_the_saved_image(tmp_path):
  long_ids = ["unet_3d.4x4.bf16.batch_size_4.sharded", "mlperf_bert_batch_24_2x2", "inference_mlperf_ssd_1200_batch_1"]
  scored = {f"layout:xla:default:{graph_id}": (np.arange(5.0), np.arange(5.0)) for graph_id in long_ids}
  figure = report.kendall_per_graph_figure([report.CollectionResult("layout:xla:default", [], scored, {})])
  labels = [label.get_text() for label in figure.axes[0].get_xticklabels()]
  assert labels == [f"{graph_id} (xla:default)" for graph_id in sorted(long_ids)]
  # Saved as the report saves it (bbox_inches="tight"): the image grows to hold every label whole.
  figure.canvas.draw()
  renderer = figure.canvas.get_renderer()
  tight = figure.get_tightbbox(renderer)
  assert all(tight.contains(*corner) for label in figure.axes[0].get_xticklabels()
             for corner in label.get_window_extent(renderer).corners() / figure.dpi)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
