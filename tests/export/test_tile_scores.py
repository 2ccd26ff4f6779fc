"""Static tile signatures: a late-join model's layers arranged for AOT compilation
(tile_scores: the kernel's half, the configs' half, their join) score a real kernel as the
model does on its GraphTensor, whatever the padding holds; other models are run on the padded
GraphTensor (tile_shapes.padded_tile_graph)."""

import sys

import numpy as np
import pytest
import tensorflow as tf

import sample_data
from tpu_graphs.data import graphs, npz, records
from tpu_graphs.export import saved_model
from tpu_graphs.export.aot import tile_scores, tile_shapes
from tpu_graphs.models import tile_model
from tpu_graphs.train import inputs, xla

REAL_TILE_FILE = "npz/tile/xla/test/0a8a2b247d7a20b9dcab1daf50066a4d.npz"  # 15 ops, 15 edges


def _padded_arrays(graph: graphs.TileGraph, bucket: tile_shapes.TileBucket, configs: int) -> list:
  """The bucket's arrays: the kernel's rows, then filler rows of noise, NaN and ids naming no op."""
  rng = np.random.default_rng(0)
  padded = {"node_feat": rng.normal(size=[bucket.nodes, graphs.NODE_FEATURE_WIDTH]).astype(np.float32) * 100,
            "node_opcode": rng.integers(0, 256, [bucket.nodes]).astype(np.uint8),
            "edge_index": rng.integers(-3, 3 * bucket.nodes, [bucket.edges, 2]),
            "config_feat": np.full([bucket.configs, graphs.TILE_CONFIG_FEATURE_WIDTH], np.nan, np.float32)}
  nodes = graph.node_feat.shape[0]
  padded["node_feat"][nodes] = np.nan
  for name, rows in (("node_feat", graph.node_feat), ("node_opcode", graph.node_opcode),
                     ("edge_index", graph.edge_index), ("config_feat", graph.config_feat[:configs])):
    padded[name][:len(rows)] = rows
  counts = [nodes, graph.edge_index.shape[0], configs]
  return [tf.constant(value) for value in padded.values()] + [tf.constant(count, tf.int32) for count in counts]


@pytest.mark.parametrize("join,backbone", [("late", "sage"), ("late", "residual_gcn"), ("early", "sage")])
def test_static_scores_equal_the_model_on_its_graph_tensor(join, backbone):
  graph = npz.read_graph(sample_data.require_sample(REAL_TILE_FILE))
  tf.keras.utils.set_random_seed(0)
  model = tile_model.build_tile_model(saved_model.model_input_spec("tile"), join, backbone, units=16, num_layers=2)
  configs = 100
  node_feat, node_opcode, edge_index, config_feat, num_nodes, num_edges, num_configs = _padded_arrays(
      graph, tile_shapes.TILE_BUCKETS[0], configs)
  layers = tile_scores.late_join_layers(model)
  assert (layers is not None) == (join == "late")  # early join runs on the GraphTensor
  if layers is not None:
    scores = tile_scores.joined_scores(
        layers, tile_scores.kernel_part(layers, node_feat, node_opcode, edge_index, num_nodes, num_edges),
        tile_scores.config_part(layers, config_feat), num_configs).numpy()
    assert np.all(scores[configs:] == 0)
  else:
    scores = model(xla.model_features(tile_shapes.padded_tile_graph(
        node_feat, node_opcode, edge_index, config_feat, num_nodes, num_edges, num_configs)).with_indices_dtype(
            inputs.INDICES_DTYPE)).numpy()
  structure = records.structure_from_arrays("tile", graph.node_feat, graph.node_opcode, graph.edge_index, None)
  expected = model(records.join("tile", structure, records.chunk_from_arrays(
      "tile", tf.constant(graph.config_feat[:configs]), 0)).with_indices_dtype(inputs.INDICES_DTYPE)).numpy()
  np.testing.assert_allclose(scores[:configs], expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())
  assert np.ptp(expected) > 0


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
