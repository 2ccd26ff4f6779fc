"""Preprocessing of layout GraphTensors as TF ops and Keras layers, so it lives inside the model.

An exported layout model receives raw arrays (records.graph_tensor_from_arrays); whatever the
model was trained on must therefore be computed by the model itself:

* `prune_to_configurable`: keeps the configurable ops and their `prune_hops`-hop neighbourhood (edges
  taken in both directions) and drops the rest. Data flow between kept ops survives: whenever a
  kept op reaches another kept op only through dropped ops, a direct `feeds` edge joins them.
  Layout graphs have up to ~44k ops but only the configurable ones (and their surroundings)
  differ between configs.
* `OpFeatureNormalization`: log-scaled op features standardized with statistics of the training
  graphs (`op_feature_statistics`), stored as weights of the layer.
* `op_segments`, `draw_configurable_segments`, `segment_subgraph`: Graph Segment Training's
  segments of a graph, the one drawn per graph and step, and a segment as a graph of its own
  (layout_model.SegmentedScorer).

All functions work on merged batches (b components); node indices are global.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.models import gnn


def neighbourhood(keep: tf.Tensor, sources: tf.Tensor, targets: tf.Tensor, prune_hops: int) -> tf.Tensor:
  """(n,) bool: `keep` grown by `prune_hops` steps along edges in both directions."""
  num_nodes = tf.shape(keep)[0]
  for _ in range(prune_hops):
    as_int = tf.cast(keep, tf.int32)
    from_sources = tf.math.unsorted_segment_max(tf.gather(as_int, sources), targets, num_nodes)
    from_targets = tf.math.unsorted_segment_max(tf.gather(as_int, targets), sources, num_nodes)
    keep = keep | (from_sources > 0) | (from_targets > 0)
  return keep


def _grouped_edges(group_by: tf.Tensor, other_end: tf.Tensor, num_nodes: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """Edges grouped by one end (compressed sparse rows): the (n + 1,) start of every node's edges
  and the (e,) other ends in that order."""
  order = tf.argsort(group_by, stable=True)
  starts = tf.searchsorted(tf.gather(group_by, order), tf.range(num_nodes + 1), out_type=tf.int64)
  return starts, tf.gather(other_end, order)


def _edges_of(nodes: tf.Tensor, starts: tf.Tensor, other_ends: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """The other ends of the edges of `nodes` (grouped by `_grouped_edges`), and the (len(nodes) + 1,)
  offsets of each node's edges among them.

  Raw ops rather than a RaggedTensor: this runs twice per topological level (thousands of times
  for a deep program), and a RaggedTensor's bookkeeping was most of the loop's kernels.
  """
  offsets, edges = tf.raw_ops.RaggedRange(starts=tf.gather(starts, nodes), limits=tf.gather(starts, nodes + 1),
                                          deltas=tf.constant(1, starts.dtype))
  return tf.gather(other_ends, edges), offsets


def _positions(offsets: tf.Tensor) -> tf.Tensor:
  """For each edge of `_edges_of`, the position of its node in `nodes`."""
  return tf.searchsorted(offsets[1:], tf.range(offsets[-1], dtype=offsets.dtype), side="right")


def kept_data_flow(keep: tf.Tensor, sources: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
  """(e', 2) [producer, consumer] pairs of kept ops: the fewest edges with the reachability among
  kept ops of the whole graph (its transitive reduction).

  A kept op a gets an edge to kept op c when a reaches c and no other kept op lies on a path
  between them. Every op gets a (n_kept,) uint8 row marking the kept ops that reach it: 1 = reaches
  it without passing another kept op, 2 = through one (then an edge to it would be implied). Rows
  are computed frontier by frontier in topological order (an op is ready once all its producers
  are), one TensorArray element per op so that no round copies the others: every edge is read
  twice, O(e * n_kept) byte operations in depth + 1 rounds. (A 3,706-deep, 21,918-op program with
  848 kept ops takes well under a second.)

  Args:
    keep: (n,) bool, the kept ops.
    sources, targets: (e,) int64 producer and consumer of every `feeds` edge (a DAG).
  Returns distinct pairs sorted by consumer, then producer (so by graph component).
  """
  num_nodes = tf.shape(keep, tf.int64)[0]
  kept_ops = tf.where(keep)[:, 0]
  num_kept = tf.shape(kept_ops, tf.int64)[0]
  kept_index = tf.where(keep, tf.cumsum(tf.cast(keep, tf.int64)) - 1, -1)
  producer_starts, producers = _grouped_edges(targets, sources, num_nodes)
  consumer_starts, consumers = _grouped_edges(sources, targets, num_nodes)
  waiting_for = tf.cast(producer_starts[1:] - producer_starts[:-1], tf.int32)  # producers not yet done
  zero_row = tf.cast(num_nodes, tf.int32)  # element n: a row of zeros, so no gather is empty
  rows = tf.TensorArray(tf.uint8, size=zero_row + 1, element_shape=tf.TensorShape([None]), clear_after_read=False)
  rows = rows.write(zero_row, tf.zeros([num_kept], tf.uint8))

  def most_of_rows(rows, ops, segments, num_segments):
    """(num_segments, n_kept): per segment, the elementwise max of the rows of its `ops`; zeros
    for a segment without any."""
    gathered = rows.gather(tf.concat([tf.cast(ops, tf.int32), [zero_row]], 0))
    return tf.math.unsorted_segment_max(gathered, tf.concat([segments, [0]], 0),
                                        tf.maximum(num_segments, 1))[:num_segments]

  def visit(frontier, waiting_for, rows):
    producer, offsets = _edges_of(frontier, producer_starts, producers)
    incoming = most_of_rows(rows, producer, _positions(offsets), tf.shape(frontier, tf.int64)[0])  # (frontier ops, n_kept)
    own = tf.one_hot(tf.gather(kept_index, frontier), tf.cast(num_kept, tf.int32), dtype=tf.uint8)  # 0s if not kept
    kept = tf.gather(keep, frontier)[:, tf.newaxis]
    row = tf.where(kept, tf.where(incoming > 0, tf.constant(2, tf.uint8), own), incoming)
    consumer, _ = _edges_of(frontier, consumer_starts, consumers)
    waiting_for = tf.tensor_scatter_nd_sub(waiting_for, consumer[:, tf.newaxis], tf.ones_like(consumer, tf.int32))
    ready, _ = tf.unique(tf.gather(consumer, tf.where(tf.gather(waiting_for, consumer) == 0)[:, 0]))
    return ready, waiting_for, rows.scatter(tf.cast(frontier, tf.int32), row)

  _, _, rows = tf.while_loop(
      lambda frontier, *_: tf.size(frontier) > 0, visit,
      (tf.where(tf.equal(waiting_for, 0))[:, 0], waiting_for, rows),
      shape_invariants=(tf.TensorShape([None]), waiting_for.shape, None))
  into_kept = tf.gather(keep, targets)
  incoming = most_of_rows(rows, tf.boolean_mask(sources, into_kept), tf.gather(kept_index, tf.boolean_mask(
      targets, into_kept)), num_kept)  # (n_kept consumers, n_kept producers)
  pairs = tf.gather(kept_ops, tf.where(incoming == 1))  # [consumer, producer]
  return tf.reverse(pairs, axis=[1])


def prune_to_configurable(graph: tfgnn.GraphTensor, prune_hops: int) -> tfgnn.GraphTensor:
  """The layout graph restricted to configurable ops and their `prune_hops`-hop neighbourhood.

  Ops keep their features (n' of them, in their original order); `feeds` becomes
  `kept_data_flow` (e' edges); `configures` edges are renumbered; config, node_config, belongs_to
  and node_split pass through unchanged. Works on merged batches.
  """
  op = graph.node_sets["op"]
  feeds = graph.edge_sets["feeds"]
  index_dtype = feeds.adjacency.source.dtype
  sources, targets = tf.cast(feeds.adjacency.source, tf.int64), tf.cast(feeds.adjacency.target, tf.int64)
  keep = neighbourhood(op["config_slot"] >= 0, sources, targets, prune_hops)
  kept_ops = tf.where(keep)[:, 0]  # (n',) the kept ops' indices
  new_index = tf.cumsum(tf.cast(keep, tf.int64)) - 1
  components = tf.cast(graph.num_components, tf.int64)
  op_component = tf.repeat(tf.range(components), tf.cast(op.sizes, tf.int64))
  flow = kept_data_flow(keep, sources, targets)
  kept_op_sizes = tf.math.unsorted_segment_sum(tf.cast(keep, op.sizes.dtype), op_component, components)
  feed_sizes = tf.math.unsorted_segment_sum(
      tf.ones_like(flow[:, 0], feeds.sizes.dtype), tf.gather(op_component, flow[:, 0]), components)
  pruned_op = tfgnn.NodeSet.from_fields(
      sizes=kept_op_sizes, features={name: tf.gather(value, kept_ops) for name, value in op.features.items()})
  pruned_feeds = tfgnn.EdgeSet.from_fields(sizes=feed_sizes, adjacency=tfgnn.Adjacency.from_indices(
      ("op", tf.cast(tf.gather(new_index, flow[:, 0]), index_dtype)),
      ("op", tf.cast(tf.gather(new_index, flow[:, 1]), index_dtype))))
  configures = graph.edge_sets["configures"]
  pruned_configures = tfgnn.EdgeSet.from_fields(sizes=configures.sizes, adjacency=tfgnn.Adjacency.from_indices(
      ("node_config", configures.adjacency.source),
      ("op", tf.cast(tf.gather(new_index, tf.cast(configures.adjacency.target, tf.int64)), index_dtype))))
  return tfgnn.GraphTensor.from_pieces(
      context=graph.context, node_sets={**graph.node_sets, "op": pruned_op},
      edge_sets={**graph.edge_sets, "feeds": pruned_feeds, "configures": pruned_configures})


@dataclasses.dataclass(frozen=True)
class Pruning:
  """`prune_to_configurable` with `prune_hops` as a structure transform (tasks.LayoutTask) that says its
  setting: the export reads `prune_hops` to write static signatures for graphs the host prunes the same
  way (tpu_graphs/export/aot/layout_shapes.py)."""
  prune_hops: int

  def __call__(self, graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
    return prune_to_configurable(graph, self.prune_hops)


def op_feature_statistics(node_features: Iterable[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
  """Mean and standard deviation (140,) of log-scaled op features over the given (n, 140) arrays.

  Constant features get deviation 1, so normalizing leaves them at 0.
  """
  count, total, squares = 0, 0.0, 0.0
  for features in node_features:
    scaled = np.sign(features) * np.log1p(np.abs(features.astype(np.float64)))
    count += scaled.shape[0]
    total = total + scaled.sum(axis=0)
    squares = squares + (scaled ** 2).sum(axis=0)
  if count == 0:
    raise ValueError("op_feature_statistics needs at least one op")
  mean = total / count
  deviation = np.sqrt(np.maximum(squares / count - mean ** 2, 0.0))
  return mean.astype(np.float32), np.where(deviation > 1e-6, deviation, 1.0).astype(np.float32)


class OpFeatureNormalization(tf.keras.layers.Layer):
  """(n, 140) raw op features -> (log_scaled(x) - mean) / deviation; statistics are weights."""

  def __init__(self, mean=None, deviation=None, width: int = 140, **kwargs):
    super().__init__(**kwargs)
    mean = np.zeros(width, np.float32) if mean is None else np.asarray(mean, np.float32)
    deviation = np.ones(width, np.float32) if deviation is None else np.asarray(deviation, np.float32)
    self.mean = self.add_weight(name="mean", shape=mean.shape, trainable=False,
                                initializer=tf.keras.initializers.Constant(mean))
    self.deviation = self.add_weight(name="deviation", shape=deviation.shape, trainable=False,
                                     initializer=tf.keras.initializers.Constant(deviation))

  def call(self, features: tf.Tensor) -> tf.Tensor:
    return (gnn.log_scaled(features) - self.mean) / self.deviation

  def get_config(self):
    return {**super().get_config(), "width": int(self.mean.shape[0])}


def op_segments(graph: tfgnn.GraphTensor, segment_size: int) -> tuple[tf.Tensor, tf.Tensor]:
  """Graph Segment Training's segments: (n,) int64 segment of every op within its graph, and (b,)
  int64 segments per graph (at least 1).

  Segments are runs of `segment_size` consecutive ops of a graph (ops are stored in program
  order, so a run is a connected stretch of the program), as in Graph Segment Training.
  """
  sizes = tf.cast(graph.node_sets["op"].sizes, tf.int64)
  component = tf.repeat(tf.range(tf.shape(sizes, tf.int64)[0]), sizes)
  position = tf.range(tf.reduce_sum(sizes)) - tf.gather(tf.cumsum(sizes, exclusive=True), component)
  return position // segment_size, tf.maximum((sizes + segment_size - 1) // segment_size, 1)


def draw_configurable_segments(graph: tfgnn.GraphTensor, segment_size: int,
                               generator: tf.random.Generator) -> tf.Tensor:
  """(b,) int64: per graph, one segment drawn uniformly (from `generator`) among its segments that
  hold a configurable op; segment 0 for a graph without any.

  A segment without configurable ops scores every config alike, so it cannot move a ranking loss:
  drawing it would waste the step.
  """
  segment, counts = op_segments(graph, segment_size)
  sizes = tf.cast(graph.node_sets["op"].sizes, tf.int64)
  num_graphs = tf.shape(sizes, tf.int64)[0]
  component = tf.repeat(tf.range(num_graphs), sizes)
  most = tf.reduce_max(tf.concat([counts, [1]], 0))
  configurable = tf.cast(graph.node_sets["op"]["config_slot"] >= 0, tf.int64)
  held = tf.math.unsorted_segment_max(configurable, component * most + segment, num_graphs * most)
  held = tf.reshape(tf.maximum(held, 0), [num_graphs, most])  # (b, segments): 1 where configurable
  draws = generator.uniform(tf.shape(sizes))
  choices = tf.maximum(tf.reduce_sum(held, axis=1), 1)
  nth = tf.minimum(tf.cast(draws * tf.cast(choices, tf.float32), tf.int64), choices - 1)  # the nth such segment
  passed = tf.cumsum(held, axis=1, exclusive=True)
  chosen = tf.argmax(tf.cast((held > 0) & (passed == nth[:, tf.newaxis]), tf.int32), axis=1)
  return tf.cast(chosen, tf.int64)


def segment_subgraph(graph: tfgnn.GraphTensor, keep: tf.Tensor) -> tfgnn.GraphTensor:
  """The layout graph restricted to the ops `keep` ((n,) bool): `feeds` edges between kept ops,
  `configures` / `belongs_to` edges of node_configs whose op is kept (node sets other than op pass
  through; models read node_config rows along `configures`). Edges that cross out of the kept ops
  are cut, as Graph Segment Training's segments are separate graphs. Works on merged batches."""
  op = graph.node_sets["op"]
  feeds, configures, belongs_to = (graph.edge_sets[name] for name in ("feeds", "configures", "belongs_to"))
  components = tf.cast(graph.num_components, tf.int64)
  op_component = tf.repeat(tf.range(components), tf.cast(op.sizes, tf.int64))
  kept_ops = tf.where(keep)[:, 0]
  new_index = tf.cumsum(tf.cast(keep, tf.int64)) - 1

  def edges(edge_set, source_set, source, target, kept, component):
    dtype = edge_set.adjacency.source.dtype
    sizes = tf.math.unsorted_segment_sum(tf.cast(kept, edge_set.sizes.dtype), component, components)
    return tfgnn.EdgeSet.from_fields(sizes=sizes, adjacency=tfgnn.Adjacency.from_indices(
        (source_set[0], tf.cast(tf.boolean_mask(source, kept), dtype)),
        (source_set[1], tf.cast(tf.boolean_mask(target, kept), dtype))))

  feed_sources, feed_targets = (tf.cast(index, tf.int64) for index in (feeds.adjacency.source, feeds.adjacency.target))
  kept_feeds = tf.gather(keep, feed_sources) & tf.gather(keep, feed_targets)
  configured_op = tf.cast(configures.adjacency.target, tf.int64)
  kept_configures = tf.gather(keep, configured_op)
  configures_component = tf.gather(op_component, configured_op)
  return tfgnn.GraphTensor.from_pieces(
      context=graph.context,
      node_sets={**graph.node_sets, "op": tfgnn.NodeSet.from_fields(
          sizes=tf.math.unsorted_segment_sum(tf.cast(keep, op.sizes.dtype), op_component, components),
          features={name: tf.gather(value, kept_ops) for name, value in op.features.items()})},
      edge_sets={**graph.edge_sets,
                 "feeds": edges(feeds, ("op", "op"), tf.gather(new_index, feed_sources),
                                tf.gather(new_index, feed_targets), kept_feeds, tf.gather(op_component, feed_sources)),
                 "configures": edges(configures, ("node_config", "op"), configures.adjacency.source,
                                     tf.gather(new_index, configured_op), kept_configures, configures_component),
                 # Both edge sets list node_config nodes in the same order (records.join): kept alike.
                 "belongs_to": edges(belongs_to, ("node_config", "config"), belongs_to.adjacency.source,
                                     belongs_to.adjacency.target, kept_configures, configures_component)})
