"""GNN blocks: reversed edges, log scaling, and message passing on (n, d) and (n, k, d) states."""

import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn

import tile_test_data
from tpu_graphs.models import gnn


def test_log_scaling_is_odd_and_compresses():
  np.testing.assert_allclose(gnn.log_scaled(tf.constant([-(np.e - 1), 0.0, 1e6])).numpy(),
                             [-1.0, 0.0, np.log1p(1e6)], rtol=1e-6)


def test_reversed_edges_swap_producer_and_consumer(tmp_path):
  graph = tile_test_data.tile_graph_tensors(tmp_path, 1)[0]
  reversed_graph = gnn.AddReversedEdges()(graph)
  feeds, fed_by = graph.edge_sets["feeds"].adjacency, reversed_graph.edge_sets[gnn.REVERSED_EDGE_SET].adjacency
  np.testing.assert_array_equal(fed_by.source.numpy(), feeds.target.numpy())
  np.testing.assert_array_equal(fed_by.target.numpy(), feeds.source.numpy())


@pytest.mark.parametrize("backbone", gnn.BACKBONES)
@pytest.mark.parametrize("state_shape", [(8,), (3, 8)])
def test_message_passing_keeps_extra_axes_and_uses_neighbours(tmp_path, backbone, state_shape):
  graph = gnn.AddReversedEdges()(tile_test_data.tile_graph_tensors(tmp_path, 1)[0])
  num_ops = int(graph.node_sets["op"].total_size)
  states = tf.random.stateless_normal((num_ops, *state_shape), seed=[0, 1])
  graph = graph.replace_features(node_sets={"op": {tfgnn.HIDDEN_STATE: states}})
  update = gnn.message_passing_update(backbone, 8)
  updated = update(graph).node_sets["op"][tfgnn.HIDDEN_STATE].numpy()
  assert updated.shape == (num_ops, *state_shape)
  # Changing only op 0 changes its consumer (op 1 in the test kernels' chain).
  changed = graph.replace_features(node_sets={"op": {tfgnn.HIDDEN_STATE: tf.tensor_scatter_nd_add(
      states, [[0]], tf.ones((1, *state_shape)))}})
  assert not np.allclose(update(changed).node_sets["op"][tfgnn.HIDDEN_STATE].numpy()[1], updated[1])


def test_unknown_backbone_is_rejected():
  with pytest.raises(ValueError, match="'gat'"):
    gnn.message_passing_update("gat", 8)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
