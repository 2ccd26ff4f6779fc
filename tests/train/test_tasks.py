"""TileTask: runtimes to rank, relevance labels with masks, ranking logits, per-graph metrics."""

import sys

import numpy as np
import pytest
import tensorflow as tf

import tile_test_data
from tpu_graphs.train import tasks


def test_tile_runtimes_are_runtime_over_normalizer(tmp_path):
  graph = tile_test_data.tile_graph_tensors(tmp_path, 1, num_configs=4)[0]
  configs = graph.node_sets["config"]
  expected = configs["runtime"].numpy() / configs["normalizer"].numpy()
  np.testing.assert_allclose(tasks.TileTask().config_runtimes(configs).numpy(), expected, rtol=1e-6)


def test_labels_rank_faster_configs_higher_and_mask_padding(tmp_path):
  graphs = tile_test_data.tile_graph_tensors(tmp_path, 2, num_configs=3)
  batch = tile_test_data.merged_batch(graphs)
  task = tasks.TileTask()
  labels = task.labels(batch, list_size=5).numpy()
  assert labels.shape == (2, 5)
  np.testing.assert_array_equal(labels[:, 3:], -1.0)
  for row, graph in zip(labels, graphs):
    runtimes = task.config_runtimes(graph.node_sets["config"]).numpy()
    np.testing.assert_allclose(row[:3], np.log(runtimes.max()) - np.log(runtimes), rtol=1e-5, atol=1e-5)


def test_ranking_logits_are_negated_scores_per_graph(tmp_path):
  batch = tile_test_data.merged_batch(tile_test_data.tile_graph_tensors(tmp_path, 2, num_configs=3))
  scores = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
  logits = tasks.TileTask().ranking_logits(batch, scores, list_size=4).numpy()
  np.testing.assert_array_equal(logits, [[-1, -2, -3, 0], [-4, -5, -6, 0]])


def test_graph_metrics_include_tile_score_and_opa():
  result = tasks.TileTask().graph_metrics(np.array([3.0, 1.0, 2.0]), np.array([0.0, 1.0, 2.0]))
  assert result["tile_score"] == 1.0  # all 3 configs are in the top 5
  assert result["top1_slowdown"] == pytest.approx(2.0)
  assert result["opa"] == pytest.approx(1 / 3)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
