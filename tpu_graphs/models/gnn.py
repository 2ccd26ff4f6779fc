"""GNN building blocks over the op nodes of TpuGraphs GraphTensors (TF-GNN Keras layers).

Op hidden states are (n, d) or, when configs are joined early, (n, k, d): one state per op and
per config of the op's graph. Every layer here maps along axis 0 only (gather, segment pooling,
Dense on the last axis), so both forms flow through the same message passing.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf
import tensorflow_gnn as tfgnn

# node_opcode is uint8: every id below 256 is valid.
NUM_OPCODES = 256
# The reverse of `feeds`: consumer -> producer, so ops also hear from their users.
REVERSED_EDGE_SET = "fed_by"
BACKBONES = ("sage", "residual_gcn")


def log_scaled(values: tf.Tensor, exact_log: bool = True) -> tf.Tensor:
  """sign(x) * log(1 + |x|): node and config features span many orders of magnitude.

  exact_log=False takes the log of 1 + |x| instead of log1p(|x|), which XLA compiles with a
  division per value; the two differ by float rounding (for |x| below float epsilon, log(1 + |x|)
  is 0 where log1p gives |x|). For ahead-of-time compiled scoring (tile_scores.py), not
  for training."""
  return tf.sign(values) * (tf.math.log1p(tf.abs(values)) if exact_log else tf.math.log(1.0 + tf.abs(values)))


class AddReversedEdges(tf.keras.layers.Layer):
  """Adds edge set `fed_by` (consumer -> producer) beside `feeds` (producer -> consumer)."""

  def call(self, graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
    feeds = graph.edge_sets["feeds"]
    reversed_feeds = tfgnn.EdgeSet.from_fields(
        sizes=feeds.sizes, adjacency=tfgnn.Adjacency.from_indices(
            ("op", feeds.adjacency.target), ("op", feeds.adjacency.source)))
    return tfgnn.GraphTensor.from_pieces(
        context=graph.context, node_sets=graph.node_sets,
        edge_sets={**graph.edge_sets, REVERSED_EDGE_SET: reversed_feeds})


class OpEncoder(tf.keras.layers.Layer):
  """Initial op states (n, units) from an opcode embedding and the 140 features, log-scaled or
  scaled by `feature_scaling` (a layer (n, 140) -> (n, 140), e.g. a standardization)."""

  def __init__(self, units: int, opcode_dim: int = 32, feature_scaling: Optional[tf.keras.layers.Layer] = None,
               **kwargs):
    super().__init__(**kwargs)
    self.units, self.opcode_dim = units, opcode_dim
    self._feature_scaling = feature_scaling
    self._opcode_embedding = tf.keras.layers.Embedding(NUM_OPCODES, opcode_dim)
    self._features = tf.keras.layers.Dense(units, activation="relu")
    self._combine = tf.keras.layers.Dense(units, activation="relu")

  def call(self, graph: tfgnn.GraphTensor) -> tf.Tensor:
    op = graph.node_sets["op"]
    return self.encode(op["opcode"], op["feat"])

  def encode(self, opcode: tf.Tensor, feat: tf.Tensor, exact_log: bool = True) -> tf.Tensor:
    """(n,) opcodes and (n, 140) features -> (n, units) states, for ops outside a GraphTensor
    (exact_log: log_scaled's, without a `feature_scaling`)."""
    embedded = self._opcode_embedding(opcode)
    scaled = log_scaled(feat, exact_log) if self._feature_scaling is None else self._feature_scaling(feat)
    return self._combine(tf.concat([embedded, self._features(scaled)], axis=-1))

  def get_config(self):
    return {**super().get_config(), "units": self.units, "opcode_dim": self.opcode_dim}


def _conv(units: int) -> tfgnn.keras.layers.SimpleConv:
  """Mean over an op's neighbours of relu(W sender_state)."""
  return tfgnn.keras.layers.SimpleConv(
      tf.keras.layers.Dense(units, activation="relu"), "mean", receiver_tag=tfgnn.TARGET, receiver_feature=None)


def message_passing_update(backbone: str, units: int) -> tfgnn.keras.layers.GraphUpdate:
  """One round of message passing over `feeds` and `fed_by` that updates op states.

  * "sage" (GraphSAGE): new = relu(W [state, mean(relu(W' producers)), mean(relu(W' consumers))]).
  * "residual_gcn" (the paper's residual GCN baseline, mean-normalized):
    new = relu(state + W [state, mean(relu(W' producers)), mean(relu(W' consumers))]); state keeps width units.
  """
  edge_inputs = {"feeds": _conv(units), REVERSED_EDGE_SET: _conv(units)}
  if backbone == "sage":
    next_state = tfgnn.keras.layers.NextStateFromConcat(tf.keras.layers.Dense(units, activation="relu"))
  elif backbone == "residual_gcn":
    next_state = tfgnn.keras.layers.ResidualNextState(tf.keras.layers.Dense(units), activation="relu")
  else:
    raise ValueError(f"unknown GNN backbone {backbone!r}; known: {BACKBONES}")
  return tfgnn.keras.layers.GraphUpdate(node_sets={"op": tfgnn.keras.layers.NodeSetUpdate(edge_inputs, next_state)})
