"""Static-shape scoring signatures a compiler can compile ahead of time (XLA AOT).

`saved_model_cli aot_compile_cpu` (tfcompile) turns a signature into one C++ class, but only for
inputs of fixed shapes. A tile kernel is therefore sent in a *bucket*: its arrays padded to the
bucket's rows, with the real counts beside them:

    node_feat (N, 140) float32, node_opcode (N,) uint8, edge_index (E, 2) int64 [consumer, producer],
    config_feat (C, 24) float32, num_nodes, num_edges, num_configs () int32
    -> scores (C,) float32; only the first num_configs are meaningful.

A late-join model (the default) runs its layers on the arrays directly, arranged for one small
kernel, with the rows past the counts masked (static_tile_scores.py: half the arithmetic or
less). Any other model gets the rows past the counts as a second graph component, as TF-GNN pads
a training batch for a TPU (tpu_graphs/train/padding.py): filler ops, filler edges joining filler
ops only, filler configs; the real component never reads them (pooling, broadcasting and message
passing stay within a component). Either way the scores equal the plain signature's, and filler
rows may hold anything.

The signature checks nothing: a compiled program cannot refuse its input, so the caller checks
counts, ids and finiteness before the call (native/model_library.cc does, as the plain signature's
`saved_model.checked_arrays` would). Above the largest bucket the caller refuses the kernel; more
than C configs are sent C at a time.

Buckets follow the sizes of tile kernels: the real sample's kernels have 2 / 18 / 65 ops
(min / median / max), the generated ones up to 249, and kernels have about as many edges as ops
(52 / 55, 15 / 15, 65 / 70 in the sample), so each bucket allows twice as many edges as ops.
Every bucket is one compiled class, and a call costs about in proportion to its bucket's ops, so
the buckets double up to 128 ops (the sample's 2, 15, 21, 52 and 65-op kernels land in 16, 16,
32, 64 and 128), then one of 512 for the rare large kernel.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.data import graphs
from tpu_graphs.export import static_tile_scores


@dataclasses.dataclass(frozen=True)
class Bucket:
  """Padded sizes of one static signature: N ops, E edges, C configs per call."""
  nodes: int
  edges: int
  configs: int

  @property
  def signature_name(self) -> str:
    return f"static_tile_n{self.nodes}_e{self.edges}_c{self.configs}"


CONFIGS_PER_CALL = 128
TILE_BUCKETS = tuple(Bucket(nodes, 2 * nodes, CONFIGS_PER_CALL) for nodes in (16, 32, 64, 128, 512))
COUNT_NAMES = ("num_nodes", "num_edges", "num_configs")


def input_specs(bucket: Bucket) -> tuple[tf.TensorSpec, ...]:
  """The static signature's inputs, in argument order."""
  return (tf.TensorSpec([bucket.nodes, graphs.NODE_FEATURE_WIDTH], tf.float32, "node_feat"),
          tf.TensorSpec([bucket.nodes], tf.uint8, "node_opcode"),
          tf.TensorSpec([bucket.edges, 2], tf.int64, "edge_index"),
          tf.TensorSpec([bucket.configs, graphs.TILE_CONFIG_FEATURE_WIDTH], tf.float32, "config_feat"),
          *(tf.TensorSpec([], tf.int32, name) for name in COUNT_NAMES))


def _split(count: tf.Tensor, total: int) -> tf.Tensor:
  """(2,) int64 component sizes: the real `count` rows, then the filler rows."""
  count = tf.cast(count, tf.int64)
  return tf.stack([count, total - count])


def bucket_scores(scorer: tf.keras.Model, score_graph: Callable[[tfgnn.GraphTensor], tf.Tensor], *arrays) -> tf.Tensor:
  """(C,) scores of a bucket's arrays (input_specs order) by a tile model: for a late-join model,
  its layers on the arrays arranged for a small dense kernel (static_tile_scores.py); for another
  model, `score_graph` (GraphTensor -> scores, the plain signature's) on `padded_tile_graph`."""
  arranged = static_tile_scores.late_join_scores(scorer, *arrays)
  return arranged if arranged is not None else score_graph(padded_tile_graph(*arrays))


def padded_tile_graph(node_feat, node_opcode, edge_index, config_feat, num_nodes, num_edges,
                      num_configs) -> tfgnn.GraphTensor:
  """The tile GraphTensor of a bucket's arrays: component 0 the kernel, component 1 the filler.

  One filler op (row N, zeros) is appended so that filler edges (every row from num_edges on)
  have a filler op to join even when the kernel fills all N rows. Context features are those a
  joined record has besides its strings (xla.model_features drops those).
  """
  nodes, edges, configs = node_feat.shape[0], edge_index.shape[0], config_feat.shape[0]
  filler_op = tf.constant(nodes, tf.int64)
  real_edge = tf.range(edges) < tf.cast(num_edges, tf.int32)
  edge_index = tf.where(real_edge[:, tf.newaxis], edge_index, filler_op)
  op = tfgnn.NodeSet.from_fields(sizes=_split(num_nodes, nodes + 1), features={
      "feat": tf.concat([node_feat, tf.zeros([1, graphs.NODE_FEATURE_WIDTH])], 0),
      "opcode": tf.concat([tf.cast(node_opcode, tf.int64), [0]], 0)})
  feeds = tfgnn.EdgeSet.from_fields(sizes=_split(num_edges, edges), adjacency=tfgnn.Adjacency.from_indices(
      ("op", edge_index[:, 1]), ("op", edge_index[:, 0])))
  config = tfgnn.NodeSet.from_fields(sizes=_split(num_configs, configs), features={
      "config_index": tf.range(configs, dtype=tf.int64), "runtime": tf.zeros([configs], tf.int64),
      "feat": config_feat, "normalizer": tf.ones([configs], tf.int64)})
  context = tfgnn.Context.from_fields(sizes=tf.ones([2], tf.int64), features={
      "num_configs": tf.cast(tf.stack([num_configs, 0]), tf.int64), "num_chunks": tf.ones([2], tf.int64)})
  return tfgnn.GraphTensor.from_pieces(context=context, node_sets={"op": op, "config": config},
                                       edge_sets={"feeds": feeds})
