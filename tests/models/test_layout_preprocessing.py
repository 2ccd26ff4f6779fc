"""Layout preprocessing in TF: pruning keeps configurable ops and reachability, statistics, segments."""

import dataclasses
import pathlib
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.data import convert, readers, records
from tpu_graphs.models import layout_preprocessing

import sample_data

GENERATED_VALID = pathlib.Path(__file__).resolve().parents[2] / "data/generated/npz/layout/xla/default/valid"


def _random_program(seed: int, num_nodes: int = 60, num_configurable: int = 8):
  """A random DAG (edges from lower to higher index, npz rows [consumer, producer]) and its arrays."""
  rng = np.random.default_rng(seed)
  producers = rng.integers(0, num_nodes - 1, 90)
  consumers = np.minimum(producers + rng.integers(1, 6, 90), num_nodes - 1)
  edges = np.unique(np.stack([consumers, producers], axis=1), axis=0)
  configurable = np.sort(rng.choice(num_nodes, num_configurable, replace=False))
  node_feat = rng.uniform(1, 5, (num_nodes, 140)).astype(np.float32)
  node_feat[:, 0] = np.arange(num_nodes)  # identifies each op after pruning
  node_config_feat = rng.integers(-1, 4, (3, num_configurable, 18)).astype(np.float32)
  return node_feat, edges, configurable, node_config_feat


def _kept_reduction(num_nodes: int, producers, consumers, kept) -> tuple[np.ndarray, np.ndarray]:
  """Brute force: (reach, reduction), (n_kept, n_kept) bool over `kept` ops: reach[a, c] when a
  reaches c in the whole graph; reduction keeps the pairs with no kept op b between a and c."""
  order, remaining = [], np.bincount(consumers, minlength=num_nodes)
  ready = list(np.flatnonzero(remaining == 0))
  while ready:  # Kahn's topological order
    node = ready.pop()
    order.append(node)
    for consumer in consumers[producers == node]:
      remaining[consumer] -= 1
      if remaining[consumer] == 0:
        ready.append(consumer)
  reached_by = np.zeros((num_nodes, num_nodes), bool)  # reached_by[v, u]: u reaches v (u == v included)
  for node in order:
    reached_by[node, node] = True
    reached_by[node] |= reached_by[producers[consumers == node]].any(axis=0)
  reach = reached_by[np.ix_(kept, kept)].T & ~np.eye(kept.size, dtype=bool)
  implied = (reach.astype(np.int64) @ reach.astype(np.int64)) > 0
  return reach, reach & ~implied


def _pruned_edges(pruned) -> np.ndarray:
  """(n_kept, n_kept) bool adjacency [producer, consumer] of the pruned graph's feeds."""
  feeds = pruned.edge_sets["feeds"].adjacency
  num_kept = int(pruned.node_sets["op"].total_size)
  edges = np.zeros((num_kept, num_kept), bool)
  edges[feeds.source.numpy(), feeds.target.numpy()] = True
  assert edges.sum() == feeds.source.shape[0]  # no duplicates
  return edges


@pytest.mark.parametrize("hops", [0, 1, 2])
@pytest.mark.parametrize("prune", ["prune_to_configurable", "Pruning"])
def test_pruning_keeps_configurable_ops_their_neighbourhood_and_reachability(hops, prune):
  node_feat, edges, configurable, node_config_feat = _random_program(hops)
  num_nodes = node_feat.shape[0]
  graph = records.graph_tensor_from_arrays("layout", node_feat, np.zeros(num_nodes, np.uint8), edges,
                                           node_config_ids=configurable, node_config_feat=node_config_feat)
  if prune == "Pruning":  # the task's structure transform, as training and the export apply it
    pruned = layout_preprocessing.Pruning(hops)(graph)
  else:
    pruned = layout_preprocessing.prune_to_configurable(graph, hops)

  kept = pruned.node_sets["op"]["feat"][:, 0].numpy().astype(int)
  expected = np.zeros(num_nodes, bool)
  expected[configurable] = True
  adjacency = np.zeros((num_nodes, num_nodes), bool)
  adjacency[edges[:, 1], edges[:, 0]] = True
  adjacency |= adjacency.T
  for _ in range(hops):
    expected |= adjacency[expected].any(axis=0)
  np.testing.assert_array_equal(kept, np.flatnonzero(expected))
  np.testing.assert_array_equal(pruned.node_sets["op"]["feat"].numpy(), node_feat[kept])
  # configures edges still lead each node_config to its op
  targets = pruned.edge_sets["configures"].adjacency.target.numpy()
  np.testing.assert_array_equal(kept[targets], np.tile(configurable, 3))
  # feeds: exactly the transitive reduction of the whole graph's reachability among kept ops
  reach, reduction = _kept_reduction(num_nodes, edges[:, 1], edges[:, 0], kept)
  np.testing.assert_array_equal(_pruned_edges(pruned), reduction)
  assert reach.sum() > reduction.sum() > 0
  assert hops == 0 or kept.size > configurable.size


def test_pruning_the_real_unet_3d_graph_equals_the_brute_force_reduction():
  arrays = np.load(sample_data.require_sample("npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz"))
  num_nodes = arrays["node_feat"].shape[0]
  node_feat = arrays["node_feat"].copy()
  node_feat[:, 0] = np.arange(num_nodes)  # identifies each op after pruning
  graph = records.graph_tensor_from_arrays("layout", node_feat, arrays["node_opcode"], arrays["edge_index"],
                                           node_config_ids=arrays["node_config_ids"],
                                           node_config_feat=arrays["node_config_feat"][:2])
  pruned = layout_preprocessing.prune_to_configurable(graph, 1)
  kept = pruned.node_sets["op"]["feat"][:, 0].numpy().astype(int)
  assert set(arrays["node_config_ids"]) <= set(kept) and kept.size < num_nodes
  _, reduction = _kept_reduction(num_nodes, arrays["edge_index"][:, 1], arrays["edge_index"][:, 0], kept)
  np.testing.assert_array_equal(_pruned_edges(pruned), reduction)


def test_pruning_a_merged_batch_prunes_each_graph_alone(tmp_path):
  convert.convert_directory(GENERATED_VALID, tmp_path, configs_per_chunk=1000, progress=False)
  graphs = readers.evaluation_dataset(tmp_path / "layout/xla/default/valid")  # one chunk per graph
  elements = list(graphs.take(2))
  merged = graphs.take(2).batch(2).get_single_element().merge_batch_to_components()
  pruned = layout_preprocessing.prune_to_configurable(merged, 1)
  alone = [layout_preprocessing.prune_to_configurable(g, 1) for g in elements]
  np.testing.assert_array_equal(pruned.node_sets["op"].sizes.numpy(),
                                [a.node_sets["op"].total_size.numpy() for a in alone])
  np.testing.assert_array_equal(pruned.edge_sets["feeds"].sizes.numpy(),
                                [a.edge_sets["feeds"].total_size.numpy() for a in alone])
  offset = alone[0].node_sets["op"].total_size.numpy()
  sources = np.concatenate([alone[0].edge_sets["feeds"].adjacency.source.numpy(),
                            alone[1].edge_sets["feeds"].adjacency.source.numpy() + offset])
  np.testing.assert_array_equal(pruned.edge_sets["feeds"].adjacency.source.numpy(), sources)


def test_a_pruning_setting_cannot_change_once_made():
  # The export reads `prune_hops` to prune the host's graphs as training did: the transform a task holds
  # must keep the setting it was made with, and equal settings are one value (hashable, equal).
  pruning = layout_preprocessing.Pruning(2)
  with pytest.raises(dataclasses.FrozenInstanceError):
    pruning.prune_hops = 3
  assert pruning == layout_preprocessing.Pruning(2) and hash(pruning) == hash(layout_preprocessing.Pruning(2))


def test_feature_statistics_standardize_log_scaled_features():
  rng = np.random.default_rng(0)
  arrays = [rng.uniform(0, 1000, (50, 140)).astype(np.float32) for _ in range(3)]
  arrays[0][:, 7] = 3.0
  for array in arrays[1:]:
    array[:, 7] = 3.0
  mean, deviation = layout_preprocessing.op_feature_statistics(arrays)
  normalized = layout_preprocessing.OpFeatureNormalization(mean, deviation)(np.concatenate(arrays)).numpy()
  np.testing.assert_allclose(normalized.mean(axis=0), 0, atol=1e-4)
  std = normalized.std(axis=0)
  assert deviation[7] == 1.0 and std[7] == pytest.approx(0, abs=1e-6)
  np.testing.assert_allclose(np.delete(std, 7), 1, atol=1e-3)


def test_segments_drawn_hold_configurable_ops_and_cut_into_graphs_of_their_own():
  node_feat, edges, configurable, node_config_feat = _random_program(5, num_nodes=60)
  graph = records.graph_tensor_from_arrays("layout", node_feat, np.zeros(60, np.uint8), edges,
                                           node_config_ids=configurable, node_config_feat=node_config_feat)
  segment, counts = (t.numpy() for t in layout_preprocessing.op_segments(graph, 25))
  np.testing.assert_array_equal(segment, np.arange(60) // 25)
  assert counts.tolist() == [3]
  holding = set(np.asarray(configurable) // 25)
  drawn = {int(layout_preprocessing.draw_configurable_segments(graph, 25, tf.random.Generator.from_seed(seed))[0])
           for seed in range(20)}
  assert drawn == holding
  part = layout_preprocessing.segment_subgraph(graph, tf.constant(segment == 1))
  assert int(part.node_sets["op"].total_size) == 25
  np.testing.assert_array_equal(part.node_sets["op"]["feat"].numpy(), node_feat[25:50])
  producers, consumers = (part.edge_sets["feeds"].adjacency[side].numpy() for side in (tfgnn.SOURCE, tfgnn.TARGET))
  inside = [(p - 25, c - 25) for c, p in edges if 25 <= c < 50 and 25 <= p < 50]
  assert sorted(zip(producers.tolist(), consumers.tolist())) == sorted(inside)
  configured = part.edge_sets["configures"].adjacency.target.numpy()
  assert sorted(set(configured.tolist())) == sorted(j - 25 for j in configurable if 25 <= j < 50)
  assert part.edge_sets["belongs_to"].adjacency.source.numpy().tolist() == (
      part.edge_sets["configures"].adjacency.source.numpy().tolist())


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
