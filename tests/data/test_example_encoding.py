"""example_encoding writes the bytes TF-GNN's own writer gives (tfgnn.write_example, serialized
deterministically) for every kind of record the conversion writes, on generated and real files,
and for the values at the edges of the encoding."""

import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn

import sample_data
from tpu_graphs.data import example_encoding, graphs, locations, npz, records


def _tfgnn_bytes(graph_tensor: tfgnn.GraphTensor) -> bytes:
  return tfgnn.write_example(graph_tensor).SerializeToString(deterministic=True)


def _record_tensors(path):
  """The structure GraphTensor and the first three config chunks' of one npz file, as converted."""
  graph = npz.read_graph(path)
  configs_in_chunk = records.chunk_configs(graph, configs_per_chunk=100)
  chunks = [records.config_chunk_graph_tensor(graph, start, rows, configs_in_chunk)
            for start, rows in records.config_chunks(graph, configs_in_chunk)]
  return [records.structure_graph_tensor(graph, configs_in_chunk)] + chunks[:3]


def _one_file_per_collection(root):
  return [sorted((root / collection.replace(":", "/")).rglob("*.npz"))[0] for collection in graphs.COLLECTIONS]


@pytest.mark.parametrize("path", _one_file_per_collection(locations.EMBEDDED_NPZ),
                         ids=lambda path: str(path.relative_to(locations.EMBEDDED_NPZ)))
def test_records_of_generated_files_are_tfgnns_bytes(path):
  for graph_tensor in _record_tensors(path):
    assert example_encoding.example_bytes(graph_tensor) == _tfgnn_bytes(graph_tensor)


@pytest.mark.sample("npz")
@pytest.mark.parametrize("relative", ["npz/tile/xla/test/0a3585c3e686065389227fa374175e48.npz",
                                      "npz/layout/xla/default/train/unet3d.npz",
                                      "npz/layout/nlp/random/test/23559853d9702baaaacbb0c83fd32266.npz"])
def test_records_of_real_files_are_tfgnns_bytes(relative):
  for graph_tensor in _record_tensors(sample_data.sample_dir() / relative):
    assert example_encoding.example_bytes(graph_tensor) == _tfgnn_bytes(graph_tensor)


def _graph_tensor(integers, floats, strings, edges=0):
  return tfgnn.GraphTensor.from_pieces(
      context=tfgnn.Context.from_fields(features={"name": tf.constant(strings)}),
      node_sets={"n": tfgnn.NodeSet.from_fields(
          sizes=tf.constant([len(integers)], tf.int64),
          features={"i": tf.constant(integers, tf.int64), "f": tf.constant(floats, tf.float32),
                    "small": tf.constant(np.arange(len(integers)), tf.int32)})},
      edge_sets={"e": tfgnn.EdgeSet.from_fields(
          sizes=tf.constant([edges], tf.int64), features={"w": tf.range(edges, dtype=tf.float32)},
          adjacency=tfgnn.Adjacency.from_indices(("n", tf.zeros([edges], tf.int64)),
                                                 ("n", tf.ones([edges], tf.int64) if edges else tf.zeros([0], tf.int64))))})


# Every varint length (1 to 10 bytes), negative values (ten bytes), the int64 extremes.
EDGE_INTEGERS = [0, 1, 127, 128, 16383, 16384, 2**21, 2**28, 2**35, 2**42, 2**49, 2**56, 2**63 - 1, -1, -2**63]
EDGE_FLOATS = [0.0, -0.0, 1.5, -3e38, 1e-45, np.inf, -np.inf, np.nan, 1e30, 2.5, -1.0, 7.0, 3.0, 4.0, 5.0]


@pytest.mark.parametrize("integers, floats, strings, edges", [
    (EDGE_INTEGERS, EDGE_FLOATS, ["", "gräph", "x" * 200], 3),
    # as many values as take the vectorized varint encoding
    (EDGE_INTEGERS * 10, EDGE_FLOATS * 10, ["z"], 100),
    # empty node set (its features empty lists), no edges, a string longer than 16,383 bytes
    ([], [], ["y" * 20000], 0),
], ids=["edge_values", "edge_values_vectorized", "empty_sets_long_string"])
def test_values_at_the_edges_of_the_encoding_are_tfgnns_bytes(integers, floats, strings, edges):
  graph_tensor = _graph_tensor(integers, floats, strings, edges)
  assert example_encoding.example_bytes(graph_tensor) == _tfgnn_bytes(graph_tensor)


@pytest.mark.parametrize("copies", [1, 20], ids=["looped", "vectorized"])
def test_varints_are_protobufs_own(copies):
  values = np.array(EDGE_INTEGERS * copies, np.int64)
  listed = tf.train.Int64List(value=values.tolist()).SerializeToString()
  assert listed.endswith(example_encoding.varints(values))
  assert len(listed) - len(example_encoding.varints(values)) in (2, 3)  # the field's tag and length


def test_a_ragged_feature_is_refused_rather_than_flattened():
  graph_tensor = tfgnn.GraphTensor.from_pieces(node_sets={"n": tfgnn.NodeSet.from_fields(
      sizes=tf.constant([2]), features={"r": tf.ragged.constant([[1, 2], [3]], tf.int64)})})
  with pytest.raises(ValueError, match="feature 'nodes/n.r': a RaggedTensor; only dense tensors are encoded here"):
    example_encoding.example_bytes(graph_tensor)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
