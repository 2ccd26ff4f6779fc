"""GraphTensor records: the round trip npz -> records -> GraphTensor is exact on real files."""

import sys

import numpy as np
import pytest
import tensorflow as tf

import sample_data
from tpu_graphs.data import graphs, npz, records


@pytest.mark.parametrize("path", sample_data.files("npz/**/*.npz"),
                         ids=lambda p: p.parent.name + "/" + p.name[:20])
def test_round_trip_is_exact_on_real_files(path):
  graph = npz.read_graph(path, stream_configs=True)
  kind = graphs.collection_kind(graph.collection)
  structure, chunks = records.graph_records(graph, configs_per_chunk=128)
  chunks = list(chunks)
  assert len(chunks) == -(-graph.num_configs // records.chunk_configs(graph, 128))
  rebuilt = records.graph_from_records(kind, structure, chunks, split=graph.split)
  raw = np.load(path)
  for name, value in graphs.graph_arrays(rebuilt).items():
    assert value.dtype == raw[name].dtype and np.array_equal(value, raw[name]), name
  assert (rebuilt.graph_id, rebuilt.collection) == (graph.graph_id, graph.collection)


def test_records_parse_against_the_schema_files():
  for kind in ("tile", "layout"):
    schema = records.read_schema(kind)
    assert "op" in schema.node_sets and "config" in schema.node_sets and "feeds" in schema.edge_sets
  assert set(records.read_schema("layout").edge_sets) == {"feeds", "configures", "belongs_to"}


def test_joined_layout_graph_links_each_config_node_to_its_op():
  path = sample_data.require_sample("npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz")
  graph = npz.read_graph(path)
  structure, chunks = records.graph_records(graph, configs_per_chunk=10)
  first_chunk = next(iter(chunks))
  joined = records.join("layout", records.parse("layout", tf.constant(structure)),
                        records.parse("layout", tf.constant(first_chunk)))
  nc = graph.node_config_ids.shape[0]
  assert int(joined.node_sets["config"].total_size) == 10
  assert int(joined.node_sets["node_config"].total_size) == 10 * nc
  configures = joined.edge_sets["configures"].adjacency
  np.testing.assert_array_equal(configures.target.numpy(), np.tile(graph.node_config_ids, 10))
  belongs = joined.edge_sets["belongs_to"].adjacency
  np.testing.assert_array_equal(belongs.target.numpy(), np.repeat(np.arange(10), nc))
  np.testing.assert_array_equal(
      joined.node_sets["node_config"]["feat"].numpy().reshape(10, nc, 18), graph.node_config_feat[:10])
  feeds = joined.edge_sets["feeds"].adjacency
  np.testing.assert_array_equal(feeds.source.numpy(), graph.edge_index[:, 1])
  np.testing.assert_array_equal(joined.node_sets["node_split"]["offset"].numpy(), graph.node_splits[0])


def test_chunks_are_bounded_in_configs_and_bytes():
  path = sample_data.require_sample("npz/layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz")
  graph = npz.read_graph(path, stream_configs=True)  # 848 configurable nodes: 61,056 bytes a config
  assert records.chunk_configs(graph, 1000, 4 << 20) == 68
  assert records.chunk_configs(graph, 50, 4 << 20) == 50
  assert records.chunk_configs(graph, 1000, 10) == 1
  structure, chunks = records.graph_records(graph, 1000, 4 << 20)
  structure_tensor = records.parse("layout", tf.constant(structure))
  assert int(structure_tensor.context["num_chunks"][0]) == 15 == len(list(chunks))


@pytest.mark.parametrize("relative", ["npz/tile/xla/test/0a8a2b247d7a20b9dcab1daf50066a4d.npz",
                                      "npz/layout/nlp/random/test/23559853d9702baaaacbb0c83fd32266.npz"])
def test_graph_from_raw_arrays_equals_the_joined_records(relative):
  graph = npz.read_graph(sample_data.require_sample(relative))
  kind = graphs.collection_kind(graph.collection)
  structure, chunks = records.graph_records(graph, configs_per_chunk=graph.num_configs)
  [chunk] = list(chunks)
  joined = records.join(kind, records.parse(kind, tf.constant(structure)), records.parse(kind, tf.constant(chunk)))
  arrays = {"config_feat": graph.config_feat} if kind == "tile" else \
      {"node_config_ids": graph.node_config_ids, "node_config_feat": graph.node_config_feat}
  served = tf.function(lambda: records.graph_tensor_from_arrays(
      kind, graph.node_feat, graph.node_opcode, graph.edge_index, **arrays))()
  expected_features = {"op": ["feat", "opcode"], "config": ["config_index"]}
  if kind == "layout":
    expected_features.update(op=["feat", "opcode", "config_slot"], node_config=["feat"])
  else:
    expected_features["config"].append("feat")
  for node_set, names in expected_features.items():
    for name in names:
      np.testing.assert_array_equal(served.node_sets[node_set][name].numpy(),
                                    joined.node_sets[node_set][name].numpy(), err_msg=f"{node_set}.{name}")
  assert set(served.edge_sets) == set(joined.edge_sets)
  for name in joined.edge_sets:
    for end in ("source", "target"):
      np.testing.assert_array_equal(getattr(served.edge_sets[name].adjacency, end).numpy(),
                                    getattr(joined.edge_sets[name].adjacency, end).numpy(), err_msg=name)
  assert set(served.node_sets) == set(joined.node_sets)
  assert set(served.context.features) == set(joined.context.features)


def test_graph_from_raw_arrays_holds_the_arrays_as_the_format_says():
  # Written out by hand for a 5-op layout graph (edge_index rows [consumer, producer]), 2 configs
  # of 2 configurable ops, so that no expected value goes through records' own code.
  node_feat = np.arange(5 * 140, dtype=np.float32).reshape(5, 140)
  edge_index = np.array([[1, 0], [2, 1], [4, 1], [3, 2]])
  node_config_feat = np.arange(2 * 2 * 18, dtype=np.float32).reshape(2, 2, 18) % 7 - 1
  graph = records.graph_tensor_from_arrays("layout", node_feat, np.array([3, 1, 4, 1, 5]), edge_index,
                                           node_config_ids=np.array([4, 1]), node_config_feat=node_config_feat)
  op = graph.node_sets["op"]
  np.testing.assert_array_equal(op["feat"].numpy(), node_feat)
  np.testing.assert_array_equal(op["opcode"].numpy(), [3, 1, 4, 1, 5])
  np.testing.assert_array_equal(op["config_slot"].numpy(), [-1, 1, -1, -1, 0])
  feeds = graph.edge_sets["feeds"].adjacency  # data flows from producer (source) to consumer (target)
  np.testing.assert_array_equal(feeds.source.numpy(), [0, 1, 1, 2])
  np.testing.assert_array_equal(feeds.target.numpy(), [1, 2, 4, 3])
  np.testing.assert_array_equal(graph.node_sets["config"]["config_index"].numpy(), [0, 1])
  np.testing.assert_array_equal(graph.node_sets["node_config"]["feat"].numpy(),
                                [node_config_feat[0, 0], node_config_feat[0, 1],
                                 node_config_feat[1, 0], node_config_feat[1, 1]])
  configures = graph.edge_sets["configures"].adjacency  # node_config c * 2 + j sets op node_config_ids[j]
  np.testing.assert_array_equal(configures.source.numpy(), [0, 1, 2, 3])
  np.testing.assert_array_equal(configures.target.numpy(), [4, 1, 4, 1])
  belongs = graph.edge_sets["belongs_to"].adjacency
  np.testing.assert_array_equal(belongs.source.numpy(), [0, 1, 2, 3])
  np.testing.assert_array_equal(belongs.target.numpy(), [0, 0, 1, 1])
  tile = records.graph_tensor_from_arrays("tile", node_feat, np.zeros(5), edge_index,
                                          config_feat=np.eye(3, 24, dtype=np.float32))
  np.testing.assert_array_equal(tile.node_sets["config"]["feat"].numpy(), np.eye(3, 24))
  np.testing.assert_array_equal(tile.node_sets["config"]["config_index"].numpy(), [0, 1, 2])
  np.testing.assert_array_equal(tile.edge_sets["feeds"].adjacency.source.numpy(), [0, 1, 1, 2])


def test_serialization_is_deterministic():
  path = sample_data.require_sample("npz/tile/xla/test/0a8a2b247d7a20b9dcab1daf50066a4d.npz")
  graph = npz.read_graph(path)
  first = records.graph_records(graph, 100)
  second = records.graph_records(graph, 100)
  assert first[0] == second[0] and list(first[1]) == list(second[1])


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
