"""Config lists of a merged batch: each graph's configs as one row of a (b, k, ...) tensor.

Models and tasks rank configs per graph, so per-config values (c, ...) (aligned with the `config`
node set of b merged components) are laid out as lists (b, k, ...), one row per graph in config
node order, and back. Everything here also compiles under XLA (TPUs, `jit_compile=True`): list
positions come from TF-GNN's row ids instead of ragged ops, and lists are built by scatter into a
list size that is static when the graph's shapes are:

* traced on a graph of static sizes (padded inputs, tpu_graphs/train/padding.py), k is the number
  of config nodes of the batch: an upper bound of any graph's list that XLA can see at compile
  time (the padding component's filler configs fill a list of their own), or the smaller bound a
  caller vouches for with `lists_of_at_most` (the trainer's sampled lists: without it every op of
  a padded training batch would hold a state per config of the whole batch);
* otherwise (eager calls, traces on dynamic shapes) k is the longest list of the batch.

Both give the same values at every real config's position.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator, Union

import tensorflow as tf
import tensorflow_gnn as tfgnn


def list_positions(graph: tfgnn.GraphTensor) -> tf.Tensor:
  """(c, 2) int64 [graph, position in its config list] of every config node."""
  configs = graph.node_sets["config"]
  sizes = tf.cast(configs.sizes, tf.int64)
  graph_ids = tfgnn.broadcast_context_to_nodes(
      graph, "config", feature_value=tf.range(tf.shape(sizes, tf.int64)[0]))
  positions = tf.range(tf.cast(configs.total_size, tf.int64)) - tf.gather(tf.cumsum(sizes, exclusive=True), graph_ids)
  return tf.stack([graph_ids, positions], axis=1)


# The bound `lists_of_at_most` sets, per thread: replicas trace their steps in threads of their own.
_VOUCHED = threading.local()


@contextlib.contextmanager
def lists_of_at_most(size: int) -> Iterator[None]:
  """Within the block, traces on static sizes take k = min(`size`, config nodes): the caller
  vouches that no graph of what it traces has a longer list."""
  outer = getattr(_VOUCHED, "size", None)
  _VOUCHED.size = size
  try:
    yield
  finally:
    _VOUCHED.size = outer


def list_size(graph: tfgnn.GraphTensor) -> Union[int, tf.Tensor]:
  """k of the batch's lists: static in a trace on static sizes (the number of config nodes, or the
  smaller bound of `lists_of_at_most`), else a scalar int64 tensor, the longest list."""
  static_total = graph.spec.node_sets_spec["config"].total_size
  if static_total is not None and not tf.executing_eagerly():
    vouched = getattr(_VOUCHED, "size", None)
    return static_total if vouched is None else min(vouched, static_total)
  return tf.reduce_max(tf.concat([tf.cast(graph.node_sets["config"].sizes, tf.int64), [0]], 0))


def to_lists(graph: tfgnn.GraphTensor, values: tf.Tensor, size=None, padding: float = 0.0) -> tf.Tensor:
  """Per-config values (c, ...) -> (b, size, ...) lists in config node order, `padding` elsewhere.

  `size` defaults to `list_size(graph)`; configs at positions >= size are left out.
  """
  size = list_size(graph) if size is None else size
  positions = list_positions(graph)
  num_graphs = tf.shape(graph.node_sets["config"].sizes, tf.int64)[0]
  # Positions past the list go to one extra slot that is cut off (XLA has no dynamic-size filter).
  kept = tf.stack([positions[:, 0], tf.minimum(positions[:, 1], tf.cast(size, tf.int64))], axis=1)
  shape = tf.concat([tf.stack([num_graphs, tf.cast(size, tf.int64) + 1]), tf.shape(values, tf.int64)[1:]], 0)
  lists = tf.tensor_scatter_nd_update(tf.fill(shape, tf.cast(padding, values.dtype)), kept, values)
  return lists[:, :size]
