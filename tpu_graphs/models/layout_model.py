"""Layout models: one score per config of a batch of whole programs (lower score = predicted faster).

Input: a GraphTensor of the layout schema (data/schemas/layout.pbtxt) with b components, op nodes
(n), `feeds` edges, and per graph a list of configs: config nodes (c) and node_config nodes (one
per config and configurable op, 18 features) linked by `configures` (to the op) and `belongs_to`
(to the config). Output: scores (c,) float32, aligned with the config node set.

Op states are (n, k, d): one state per op and per config slot of its graph's list (k = the longest
list in the batch). Each configurable op's state is joined with its node_config features before
message passing; other ops start equal across configs and differ only through their neighbours.
A residual GraphSAGE-style GNN (gnn.message_passing_update, messages along `feeds` and its
reverse) runs on that; ops are mean-pooled per graph and config and an MLP scores each config.

Optional, inside the model: op feature normalization with training statistics, and Graph Segment
Training (gradients through one sampled segment per graph and step). Pruning to configurable ops
is per graph, not per chunk of configs, so the task does it as records are read
(tasks.LayoutTask(prune_hops)) and the export runs it before the model.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.data import graphs
from tpu_graphs.models import gnn, layout_preprocessing


def _list_positions(graph: tfgnn.GraphTensor) -> tf.Tensor:
  """(c, 2) int64 [graph, position in its config list] of every config node."""
  sizes = tf.cast(graph.node_sets["config"].sizes, tf.int64)
  graph_ids = tf.repeat(tf.range(tf.shape(sizes, tf.int64)[0]), sizes)
  positions = tf.range(tf.reduce_sum(sizes)) - tf.gather(tf.cumsum(sizes, exclusive=True), graph_ids)
  return tf.stack([graph_ids, positions], axis=1)


def op_config_features(graph: tfgnn.GraphTensor) -> tf.Tensor:
  """(n, k, 19): for op i and config slot p of its graph, the node_config features that config
  sets on op i followed by 1, or zeros where op i is not configurable (or its graph has < p+1
  configs)."""
  positions = _list_positions(graph)[:, 1]
  list_size = tf.reduce_max(tf.concat([tf.cast(graph.node_sets["config"].sizes, tf.int64), [0]], 0))
  node_config = graph.node_sets["node_config"]
  config_of = tf.cast(graph.edge_sets["belongs_to"].adjacency.target, tf.int64)
  op_of = tf.cast(graph.edge_sets["configures"].adjacency.target, tf.int64)
  # Both edge sets list node_config nodes in order (records.join, graph_tensor_from_arrays).
  features = tf.concat([node_config["feat"], tf.ones_like(node_config["feat"][:, :1])], axis=-1)
  indices = tf.stack([op_of, tf.gather(positions, config_of)], axis=1)
  num_ops = tf.cast(graph.node_sets["op"].total_size, tf.int64)
  return tf.scatter_nd(indices, features, tf.stack([num_ops, list_size, graphs.LAYOUT_CONFIG_FEATURE_WIDTH + 1]))


class LayoutEncoder(tf.keras.layers.Layer):
  """Initial op states (n, k, units): opcode embedding, (normalized) op features, config features."""

  def __init__(self, units: int, feature_mean=None, feature_deviation=None, opcode_dim: int = 32, **kwargs):
    super().__init__(**kwargs)
    self.units, self.opcode_dim = units, opcode_dim
    self._normalize = layout_preprocessing.OpFeatureNormalization(feature_mean, feature_deviation)
    self._opcode_embedding = tf.keras.layers.Embedding(gnn.NUM_OPCODES, opcode_dim)
    self._features = tf.keras.layers.Dense(units, activation="relu")
    self._ops = tf.keras.layers.Dense(units, activation="relu")
    self._configs = tf.keras.layers.Dense(units, activation="relu")
    self._joined = tf.keras.layers.Dense(units, activation="relu")

  def call(self, graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
    op = graph.node_sets["op"]
    op_states = self._ops(tf.concat([self._opcode_embedding(op["opcode"]),
                                     self._features(self._normalize(op["feat"]))], axis=-1))  # (n, d)
    config_states = self._configs(op_config_features(graph))  # (n, k, d)
    repeated = tf.repeat(op_states[:, tf.newaxis, :], tf.shape(config_states)[1], axis=1)
    states = self._joined(tf.concat([repeated, config_states], axis=-1))
    return graph.replace_features(node_sets={"op": {tfgnn.HIDDEN_STATE: states}})

  def get_config(self):
    return {**super().get_config(), "units": self.units, "opcode_dim": self.opcode_dim}


class SegmentGradientStop(tf.keras.layers.Layer):
  """Graph Segment Training: in training, op states outside one sampled segment per graph pass
  forward unchanged but stop gradients; outside training (or without segments) a no-op.

  The mask (SegmentSampler) is drawn once per step and applied after the encoder and every
  message passing layer, so gradients reach the parameters only through the sampled ops.
  """

  def call(self, graph: tfgnn.GraphTensor, mask: tf.Tensor) -> tfgnn.GraphTensor:
    states = graph.node_sets["op"][tfgnn.HIDDEN_STATE]
    mask = tf.reshape(mask, [-1] + [1] * (states.shape.rank - 1))
    return graph.replace_features(node_sets={"op": {tfgnn.HIDDEN_STATE: tf.where(
        mask, states, tf.stop_gradient(states))}})


class SegmentSampler(tf.keras.layers.Layer):
  """(n,) bool mask of the ops that get gradients: one segment per graph when training, all otherwise."""

  def __init__(self, segment_size: int, seed: int = 0, **kwargs):
    super().__init__(**kwargs)
    self.segment_size, self.seed = segment_size, seed
    # The draws' state is a variable of this layer, so checkpoints hold it: a run resumed in a new
    # process draws the segments an uninterrupted run would.
    self.generator = tf.random.Generator.from_seed(seed)

  def call(self, graph: tfgnn.GraphTensor, training=None) -> tf.Tensor:
    if training:
      return layout_preprocessing.segment_training_mask(graph, self.segment_size, self.generator)
    return tf.ones([graph.node_sets["op"].total_size], tf.bool)

  def get_config(self):
    return {**super().get_config(), "segment_size": self.segment_size, "seed": self.seed}


class LayoutReadout(tf.keras.layers.Layer):
  """Mean-pools op states per graph and config slot, (b, k, d), and scores each config: (c,)."""

  def __init__(self, units: int, **kwargs):
    super().__init__(**kwargs)
    self.units = units
    self._hidden = tf.keras.layers.Dense(units, activation="relu")
    self._score = tf.keras.layers.Dense(1)

  def call(self, graph: tfgnn.GraphTensor) -> tf.Tensor:
    pooled = tfgnn.pool_nodes_to_context(graph, "op", "mean", feature_name=tfgnn.HIDDEN_STATE)  # (b, k, d)
    per_list = tf.squeeze(self._score(self._hidden(pooled)), -1)  # (b, k)
    return tf.gather_nd(per_list, _list_positions(graph))

  def get_config(self):
    return {**super().get_config(), "units": self.units}


def build_layout_model(graph_spec: tfgnn.GraphTensorSpec, backbone: str = "residual_gcn", units: int = 64,
                       num_layers: int = 3,
                       feature_statistics: Optional[tuple[np.ndarray, np.ndarray]] = None,
                       segment_size: Optional[int] = None) -> tf.keras.Model:
  """Keras model: layout GraphTensor (merged components) -> (c,) config scores, lower = faster.

  Args:
    graph_spec: spec of the input, e.g. a merged batch of `records.graph_spec("layout")`.
    backbone: "residual_gcn" (residual GraphSAGE-style) or "sage" (gnn.message_passing_update).
    units: width d of every hidden state.
    num_layers: rounds of message passing.
    feature_statistics: (mean, deviation) of log-scaled op features (140,) from
      `layout_preprocessing.op_feature_statistics` on the training graphs; None = log scale only.
    segment_size: if set, Graph Segment Training with segments of this many ops.
  """
  inputs = tf.keras.layers.Input(type_spec=graph_spec)
  graph = gnn.AddReversedEdges()(inputs)
  mean, deviation = feature_statistics if feature_statistics is not None else (None, None)
  graph = LayoutEncoder(units, mean, deviation)(graph)
  if segment_size is not None:
    mask = SegmentSampler(segment_size)(graph)
    stop = SegmentGradientStop()
    graph = stop(graph, mask)
  for _ in range(num_layers):
    graph = gnn.message_passing_update(backbone, units)(graph)
    if segment_size is not None:
      graph = stop(graph, mask)
  scores = LayoutReadout(units)(graph)
  return tf.keras.Model(inputs, scores, name=f"layout_{backbone}")
