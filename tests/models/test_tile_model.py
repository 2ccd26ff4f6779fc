"""Tile models: one score per config, and each score depends only on its own graph and config."""

import sys

import numpy as np
import pytest
import tensorflow as tf

import tile_test_data
from tpu_graphs.models import tile_model


@pytest.mark.parametrize("join,backbone", [("late", "sage"), ("late", "residual_gcn"),
                                           ("early", "sage"), ("early", "residual_gcn")])
def test_scores_are_per_config_and_independent_of_batch_mates(tmp_path, join, backbone):
  graphs = tile_test_data.tile_graph_tensors(tmp_path, 3, num_configs=5)
  batch = tile_test_data.merged_batch(graphs)
  tf.keras.utils.set_random_seed(1)
  model = tile_model.build_tile_model(batch.spec, join, backbone, units=8, num_layers=2)
  scores = model(batch).numpy()
  assert scores.shape == (15,) and np.all(np.isfinite(scores))
  assert np.std(scores[5:10]) > 0  # configs of one kernel are told apart
  alone = model(tile_test_data.merged_batch(graphs[1:2])).numpy()
  np.testing.assert_allclose(alone, scores[5:10], rtol=1e-4, atol=1e-5)


def test_unknown_join_is_rejected(tmp_path):
  batch = tile_test_data.merged_batch(tile_test_data.tile_graph_tensors(tmp_path, 1))
  with pytest.raises(ValueError, match="'middle'"):
    tile_model.build_tile_model(batch.spec, join="middle")


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
