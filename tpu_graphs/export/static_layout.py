"""Static-shape layout scoring signatures a compiler can compile ahead of time (XLA AOT).

The tile counterpart is static_shapes.py. A layout model prunes each graph to its configurable
ops and their `hops`-hop neighbourhood (layout_preprocessing.prune_to_configurable) before it
scores configs, and what pruning keeps depends on the graph, which XLA cannot compile. So the
host prunes (native/layout_pruning.cc, exactly as the SavedModel's graph does) and sends the
pruned graph in a *bucket*: its arrays padded to the bucket's rows, with the real counts beside:

    node_feat (N, 140) float32, node_opcode (N,) uint8, edge_index (E, 2) int64 [consumer, producer],
    node_config_ids (K,) int64, node_config_feat (C, K, 18) float32,
    num_nodes, num_edges, num_configurable, num_configs () int32
    -> scores (C,) float32; only the first num_configs are meaningful.

Ids are those of the pruned graph. Inside, the rows past the counts become a second graph
component (filler ops, edges, configs and node_config rows, zeroed), which the real component
never reads, so the real configs' scores equal the plain signature's. The signature checks
nothing: the caller checks ids, counts and finiteness (native/layout_library.cc does, as
saved_model.checked_arrays would). C is the plain signature's configs per call
(saved_model.CONFIGS_PER_CALL): the caller sends configs C at a time and fills the last call
with copies of the last config, as the plain signature does, so that even a model whose configs
see each other (cross-config attention) scores each call's list alike.

Buckets follow the sizes of pruned layout graphs. Whole graphs have up to ~44k ops (TpuGraphs);
the sample's five distinct layout graphs (490 to 21,918 ops) pruned by prune_to_configurable keep
  hops 0 (the default): their 38 to 848 configurable ops, with 0.9 to 1.3 edges per op;
  hops 1: 118 to 2,850 ops, 133 to 51,209 edges (the nlp graph's data flow among kept ops is dense);
  hops 2: 218 to 5,103 ops, 281 to 11,132 edges.
A bucket's cost is its padded size, not the graph's (every row goes through the model), so the
buckets step by 4x from 64 ops, the sample's pruned sizes at hops 0, to 4,096, with two edges per
op and as many configurable ops as ops but at most 2,048 (node_config rows, C x K of them, cost as
much as ops).
A graph whose pruned size exceeds the largest bucket is refused (TPU_GRAPHS_TOO_LARGE) rather than
cut, since scoring part of a graph would rank its configs wrongly without saying so; it is scored
through the C API, or a larger bucket is added to LAYOUT_SIZES and the model re-exported. More
configs than C are sent in calls of C.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional

import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.data import graphs

COUNT_NAMES = ("num_nodes", "num_edges", "num_configurable", "num_configs")
_SIGNATURE = re.compile(r"static_layout_h(\d+)_n(\d+)_e(\d+)_k(\d+)_c(\d+)")


@dataclasses.dataclass(frozen=True)
class LayoutBucket:
  """Padded sizes of one static layout signature: N pruned ops, E pruned edges, K configurable
  ops, C configs per call; for graphs pruned with `hops`."""
  hops: int
  nodes: int
  edges: int
  configurable: int
  configs: int

  @property
  def signature_name(self) -> str:
    return f"static_layout_h{self.hops}_n{self.nodes}_e{self.edges}_k{self.configurable}_c{self.configs}"

  @classmethod
  def from_signature_name(cls, name: str) -> Optional["LayoutBucket"]:
    """The bucket a signature name describes, or None for another signature."""
    match = _SIGNATURE.fullmatch(name)
    return cls(*map(int, match.groups())) if match else None


# (pruned ops, pruned edges, configurable ops), smallest first (see the module docstring).
LAYOUT_SIZES = ((64, 128, 64), (256, 512, 256), (1024, 2048, 1024), (4096, 8192, 2048))


def layout_buckets(hops: int, configs: int) -> tuple[LayoutBucket, ...]:
  """The buckets of a model pruning with `hops`, scoring `configs` configs per call, smallest first."""
  return tuple(LayoutBucket(hops, nodes, edges, configurable, configs) for nodes, edges, configurable in LAYOUT_SIZES)


def input_specs(bucket: LayoutBucket) -> tuple[tf.TensorSpec, ...]:
  """The static signature's inputs, in argument order."""
  return (tf.TensorSpec([bucket.nodes, graphs.NODE_FEATURE_WIDTH], tf.float32, "node_feat"),
          tf.TensorSpec([bucket.nodes], tf.uint8, "node_opcode"),
          tf.TensorSpec([bucket.edges, 2], tf.int64, "edge_index"),
          tf.TensorSpec([bucket.configurable], tf.int64, "node_config_ids"),
          tf.TensorSpec([bucket.configs, bucket.configurable, graphs.LAYOUT_CONFIG_FEATURE_WIDTH], tf.float32,
                        "node_config_feat"),
          *(tf.TensorSpec([], tf.int32, name) for name in COUNT_NAMES))


def _split(count: tf.Tensor, total) -> tf.Tensor:
  """(2,) int64 component sizes: the real `count` rows, then the filler rows."""
  return tf.stack([count, tf.cast(total, tf.int64) - count])


def padded_layout_graph(node_feat, node_opcode, edge_index, node_config_ids, node_config_feat, num_nodes, num_edges,
                        num_configurable, num_configs) -> tfgnn.GraphTensor:
  """The layout GraphTensor of a bucket's (pruned) arrays: component 0 the graph, component 1 the filler.

  What records.join gives for the pruned structure and a chunk of configs, padded: node_config
  row i * num_configurable + j configures slot j's op for config i. One filler op (row N) and one
  filler config (row C) are appended, so filler edges and node_config rows have something of
  their own to join even when the graph fills the bucket. Filler features are zeroed, so the
  filler component computes on finite values whatever the caller's buffers held.
  """
  nodes, edges = node_feat.shape[0], edge_index.shape[0]
  slots, configs = node_config_ids.shape[0], node_config_feat.shape[0]
  num_nodes, num_edges, num_configurable, num_configs = (
      tf.cast(count, tf.int64) for count in (num_nodes, num_edges, num_configurable, num_configs))
  filler_op = tf.constant(nodes, tf.int64)
  real_op = tf.range(nodes + 1, dtype=tf.int64) < num_nodes
  slot_ops = tf.where(tf.range(slots, dtype=tf.int64) < num_configurable, node_config_ids, filler_op)
  config_slot = tf.where(real_op, tf.tensor_scatter_nd_update(
      -tf.ones([nodes + 1], tf.int64), slot_ops[:, tf.newaxis], tf.range(slots, dtype=tf.int64)), -1)
  op = tfgnn.NodeSet.from_fields(sizes=_split(num_nodes, nodes + 1), features={
      "feat": tf.where(real_op[:, tf.newaxis], tf.concat([node_feat, tf.zeros([1, graphs.NODE_FEATURE_WIDTH])], 0), 0.0),
      "opcode": tf.where(real_op, tf.concat([tf.cast(node_opcode, tf.int64), [0]], 0), 0),
      "config_slot": config_slot})
  edge_index = tf.where((tf.range(edges, dtype=tf.int64) < num_edges)[:, tf.newaxis], edge_index, filler_op)
  feeds = tfgnn.EdgeSet.from_fields(sizes=_split(num_edges, edges), adjacency=tfgnn.Adjacency.from_indices(
      ("op", edge_index[:, 1]), ("op", edge_index[:, 0])))

  # node_config rows: the real ones first (config-major, as records.join lists them), then filler.
  rows = configs * slots
  real_rows = num_configs * num_configurable
  row = tf.range(rows, dtype=tf.int64)
  real_row = row < real_rows
  row_config = tf.where(real_row, row // tf.maximum(num_configurable, 1), configs)  # filler config: row C
  row_slot = tf.where(real_row, row % tf.maximum(num_configurable, 1), 0)
  flat_feat = tf.reshape(node_config_feat, [rows, graphs.LAYOUT_CONFIG_FEATURE_WIDTH])
  row_feat = tf.where(real_row[:, tf.newaxis], tf.gather(flat_feat, tf.minimum(row_config, configs - 1) * slots + row_slot),
                      0.0)
  row_op = tf.where(real_row, tf.gather(slot_ops, row_slot), filler_op)
  node_config = tfgnn.NodeSet.from_fields(sizes=_split(real_rows, rows), features={"feat": row_feat})
  configures = tfgnn.EdgeSet.from_fields(sizes=_split(real_rows, rows), adjacency=tfgnn.Adjacency.from_indices(
      ("node_config", row), ("op", row_op)))
  belongs_to = tfgnn.EdgeSet.from_fields(sizes=_split(real_rows, rows), adjacency=tfgnn.Adjacency.from_indices(
      ("node_config", row), ("config", row_config)))
  config = tfgnn.NodeSet.from_fields(sizes=_split(num_configs, configs + 1), features={
      "config_index": tf.range(configs + 1, dtype=tf.int64), "runtime": tf.zeros([configs + 1], tf.int64)})
  node_split = tfgnn.NodeSet.from_fields(sizes=tf.zeros([2], tf.int64), features={"offset": tf.zeros([0], tf.int64)})
  context = tfgnn.Context.from_fields(sizes=tf.ones([2], tf.int64), features={
      "num_configs": tf.zeros([2], tf.int64), "num_chunks": tf.ones([2], tf.int64)})
  return tfgnn.GraphTensor.from_pieces(
      context=context, node_sets={"op": op, "node_config": node_config, "config": config, "node_split": node_split},
      edge_sets={"feeds": feeds, "configures": configures, "belongs_to": belongs_to})
