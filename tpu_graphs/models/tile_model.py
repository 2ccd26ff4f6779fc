"""Tile models: one score per config of a batch of fused kernels (lower score = predicted faster).

Input: a GraphTensor of the tile schema (data/schemas/tile.pbtxt) with b components (graphs
merged from a batch), op nodes (n), `feeds` edges and config nodes (c, 24 features each).
Output: scores (c,) float32, aligned with the config node set.

Two ways to bring the config in, as in the TpuGraphs paper's baselines:
* late join: the GNN embeds the kernel once, (b, d); each config's features are combined with
  its kernel's embedding only in the final MLP. Cheap: message passing is independent of c.
* early join: every op state is concatenated with each config of its kernel before message
  passing, so op states are (n, k, d) with k the list size of config_lists.list_size.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.models import config_lists, gnn

JOINS = ("late", "early")


class TileEncoder(tf.keras.layers.Layer):
  """Sets op hidden states: (n, d) for late join, (n, k, d) for early join; config states (c, d)."""

  def __init__(self, join: str, units: int, **kwargs):
    super().__init__(**kwargs)
    if join not in JOINS:
      raise ValueError(f"unknown config join {join!r}; known: {JOINS}")
    self.join, self.units = join, units
    self._ops = gnn.OpEncoder(units)
    self._configs = tf.keras.layers.Dense(units, activation="relu")
    # Early join only: a layer a late-join model never calls would stay unbuilt (weightless) and
    # Keras would refuse to serialize it in the saved model.
    self._joined = tf.keras.layers.Dense(units, activation="relu") if join == "early" else None

  def call(self, graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
    op_states = self._ops(graph)
    config_states = self.encode_configs(graph.node_sets["config"]["feat"])
    if self.join == "early":
      per_graph = config_lists.to_lists(graph, config_states)  # (b, k, d)
      per_op = tfgnn.broadcast_context_to_nodes(graph, "op", feature_value=per_graph)  # (n, k, d)
      repeated_ops = tf.repeat(op_states[:, tf.newaxis, :], tf.shape(per_graph)[1], axis=1)
      op_states = self._joined(tf.concat([repeated_ops, per_op], axis=-1))
    return graph.replace_features(node_sets={
        "op": {tfgnn.HIDDEN_STATE: op_states},
        "config": {**graph.node_sets["config"].features, tfgnn.HIDDEN_STATE: config_states}})

  def encode_ops(self, opcode: tf.Tensor, feat: tf.Tensor, exact_log: bool = True) -> tf.Tensor:
    """(n,) opcodes and (n, 140) features -> (n, d) late-join op states, outside a GraphTensor
    (exact_log: gnn.log_scaled's)."""
    return self._ops.encode(opcode, feat, exact_log)

  def encode_configs(self, config_feat: tf.Tensor) -> tf.Tensor:
    """(c, 24) config features -> (c, d) config states."""
    return self._configs(gnn.log_scaled(config_feat))

  def get_config(self):
    return {**super().get_config(), "join": self.join, "units": self.units}


class TileReadout(tf.keras.layers.Layer):
  """Mean-pools op states per graph and scores each config: (c,) scores."""

  def __init__(self, join: str, units: int, **kwargs):
    super().__init__(**kwargs)
    self.join, self.units = join, units
    self._hidden = tf.keras.layers.Dense(units, activation="relu")
    self._score = tf.keras.layers.Dense(1)

  def call(self, graph: tfgnn.GraphTensor) -> tf.Tensor:
    pooled = tfgnn.pool_nodes_to_context(graph, "op", "mean", feature_name=tfgnn.HIDDEN_STATE)
    if self.join == "early":  # pooled (b, k, d): one embedding per graph and config already
      per_list = tf.squeeze(self._score(self._hidden(pooled)), -1)  # (b, k)
      return tf.gather_nd(per_list, config_lists.list_positions(graph))
    per_config = tfgnn.broadcast_context_to_nodes(graph, "config", feature_value=pooled)  # (c, d)
    joined = tf.concat([per_config, graph.node_sets["config"][tfgnn.HIDDEN_STATE]], axis=-1)
    return tf.squeeze(self._score(self._hidden(joined)), -1)

  def kernel_part(self, pooled: tf.Tensor) -> tf.Tensor:
    """(d,) pooled op state -> (units,) its share of the hidden layer's input, the bias included.

    call()'s late-join scores of one kernel's configs are scores_of_parts(kernel_part(pooled),
    config_part(config states)): W [pooled, config] is W_pooled pooled + W_config config, so the
    kernel's share is multiplied once, not per config, and neither half waits for the other
    (tile_scores.py)."""
    rows = tf.split(self._hidden.kernel, [pooled.shape[-1], -1])[0]
    return tf.linalg.matvec(rows, pooled, transpose_a=True) + self._hidden.bias

  def config_part(self, config_states: tf.Tensor) -> tf.Tensor:
    """(c, d) config states -> (c, units) their share of the hidden layer's input."""
    return tf.matmul(config_states, tf.split(self._hidden.kernel, [-1, config_states.shape[-1]])[1])

  def scores_of_parts(self, kernel_part: tf.Tensor, config_part: tf.Tensor) -> tf.Tensor:
    """(c,) scores from the two shares of the hidden layer's input."""
    return tf.squeeze(self._score(self._hidden.activation(config_part + kernel_part)), -1)

  def get_config(self):
    return {**super().get_config(), "join": self.join, "units": self.units}


# Keras traces a subclassed layer's call through autograph when a functional model is built on it;
# none of ours (nor TF-GNN's) branches on tensors, and the rewriting cost seconds per model.
@tf.autograph.experimental.do_not_convert
def build_tile_model(graph_spec: tfgnn.GraphTensorSpec, join: str = "late", backbone: str = "sage",
                     units: int = 64, num_layers: int = 3) -> tf.keras.Model:
  """Keras model: tile GraphTensor (merged components) -> (c,) config scores, lower = faster.

  Args:
    graph_spec: spec of the input, e.g. a merged batch of `records.graph_spec("tile")`.
    join: "late" or "early" (see the module docstring).
    backbone: "sage" or "residual_gcn" (see `gnn.message_passing_update`).
    units: width d of every hidden state.
    num_layers: rounds of message passing.
  """
  inputs = tf.keras.layers.Input(type_spec=graph_spec)
  graph = gnn.AddReversedEdges()(inputs)
  graph = TileEncoder(join, units)(graph)
  for _ in range(num_layers):
    graph = gnn.message_passing_update(backbone, units)(graph)
  scores = TileReadout(join, units)(graph)
  return tf.keras.Model(inputs, scores, name=f"tile_{join}_{backbone}")
