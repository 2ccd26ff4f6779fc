"""Padding to static sizes: every batch gets the same shapes and real configs keep their scores."""

import sys

import numpy as np
import pytest

import tile_test_data
from tpu_graphs.data import readers
from tpu_graphs.models import tile_model
from tpu_graphs.train import padding, tasks


def test_padded_batches_share_shapes_and_padding_is_masked(tmp_path):
  records = tile_test_data.tile_records(tmp_path, {"train": 7}, num_configs=10)
  graphs = readers.training_dataset(records / "train", 6, seed=0)
  static_padding = padding.Padding.fitting(graphs, batch_size=3)
  constraints = static_padding.constraints
  batches = graphs.batch(3, drop_remainder=True).map(lambda g: g.merge_batch_to_components())
  padded = list(static_padding.pad(batches))
  assert len(padded) == 2
  for graph in padded:
    assert int(graph.num_components) == int(constraints.total_num_components) == 4
    assert int(graph.node_sets["op"].total_size) == int(constraints.total_num_nodes["op"])
    assert int(graph.edge_sets["feeds"].total_size) == int(constraints.total_num_edges["feeds"])
  unpadded = next(iter(batches))
  task = tasks.TileTask()
  labels = task.labels(padded[0], list_size=6).numpy()
  np.testing.assert_allclose(labels[:3], task.labels(unpadded, list_size=6).numpy(), rtol=1e-5)
  np.testing.assert_array_equal(labels[3], -1.0)
  model = tile_model.build_tile_model(unpadded.spec.relax(num_components=True, num_nodes=True, num_edges=True),
                                      units=8, num_layers=2)
  np.testing.assert_allclose(model(padded[0]).numpy()[:18], model(unpadded).numpy(), rtol=1e-5, atol=1e-6)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
