"""A late-join tile model's scores of one padded kernel, arranged for ahead-of-time compilation.

Run on the padded kernel as a GraphTensor (tile_shapes.padded_tile_graph), the model compiles
to TF-GNN's general machinery taken literally: each edge's message computed from its gathered
sender state, the readout's Dense over [pooled kernel state, config state] once per config, a
filler graph component. Here the model's own layers (its weights, called as the model calls
them) run on the kernel's arrays with the arithmetic arranged for one small kernel:

* messages before the gather: a SimpleConv's message function works row by row, so it runs
  once per op (N rows) and its result is gathered to the edges, instead of once per edge;
* the readout's kernel half once per kernel, not per config (TileReadout.kernel_part), and
  apart from the configs' half, so that a caller can run the two at once (tile_shapes.py's
  split buckets: `kernel_part`, `config_part`, `joined_scores`);
* padding masked, not a filler component: filler edges pool into a row that is cut off, filler
  ops are zeroed and left out of the kernel's mean;
* op features log-scaled as log(1 + |x|) rather than log1p(|x|) (gnn.log_scaled's exact_log),
  which XLA compiles with a division per value: a tenth of the kernel's half on the benchmark's
  kernel, for a difference of float rounding.

For the 15-op kernel of benchmarks/native.py in a 16-op bucket, that is 2.1 million
multiply-adds per call of 128 configs instead of 4.6 million in the 32-op bucket before.
Scores equal the model's up to the order of float additions (tests/export/test_tile_scores.py).
`late_join_layers` returns None for other models (early join, an unknown layer), which the export
compiles on the padded GraphTensor instead (tile_shapes.padded_tile_graph), as one program.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.models import gnn, tile_model


def _convolution_inputs(update: tf.keras.layers.Layer) -> Optional[tuple[dict, tf.keras.layers.Layer]]:
  """({edge set: message function}, next-state layer) of a GraphUpdate that only updates op
  states from mean-pooled SimpleConv messages of sender op states, or None."""
  if not isinstance(update, tfgnn.keras.layers.GraphUpdate):
    return None
  config = update.get_config()
  if config.get("context") is not None or set(k for k in config if k.startswith(("node_sets/", "edge_sets/"))) != {
      "node_sets/op"}:
    return None
  node_update = config["node_sets/op"].get_config()
  if node_update["node_input_feature"] != tfgnn.HIDDEN_STATE or node_update["context_input_feature"] is not None:
    return None
  message_fns = {}
  for key, convolution in node_update.items():
    if not key.startswith("edge_set_inputs/"):
      continue
    edge_set = key[len("edge_set_inputs/"):]
    settings = convolution.get_config() if isinstance(convolution, tfgnn.keras.layers.SimpleConv) else {}
    if (edge_set not in ("feeds", gnn.REVERSED_EDGE_SET) or settings.get("reduce_type") != "mean"
        or settings.get("receiver_tag") != tfgnn.TARGET or settings.get("receiver_feature") is not None
        or settings.get("sender_node_feature") != tfgnn.HIDDEN_STATE or settings.get("sender_edge_feature") is not None):
      return None
    message_fns[edge_set] = settings["message_fn"]
  return message_fns, node_update["next_state"]


def _mean_poolings(edge_index: tf.Tensor, real: tf.Tensor, nodes: int) -> dict:
  """{edge set: function (N, d) values per op -> (N, d) each op's mean over its real incoming
  edges of the senders' values, 0 without any (TF-GNN's "mean")}, for `feeds` (consumers hear
  producers) and its reverse. Filler edges pool into an extra row N that is cut off."""
  def pooling(receivers: tf.Tensor, senders: tf.Tensor):
    receivers = tf.where(real, tf.cast(receivers, tf.int32), nodes)
    senders = tf.where(real, tf.cast(senders, tf.int32), 0)
    counts = tf.math.unsorted_segment_sum(tf.ones_like(receivers, tf.float32), receivers, nodes + 1)[:nodes]
    scale = (1.0 / tf.maximum(counts, 1.0))[:, tf.newaxis]
    return lambda values: tf.math.unsorted_segment_sum(tf.gather(values, senders), receivers, nodes + 1)[:nodes] * scale
  return {"feeds": pooling(edge_index[:, 0], edge_index[:, 1]),
          gnn.REVERSED_EDGE_SET: pooling(edge_index[:, 1], edge_index[:, 0])}


@dataclasses.dataclass(frozen=True)
class LateJoinLayers:
  """A late-join tile model's layers, called here as the model calls them."""
  encoder: tile_model.TileEncoder
  updates: list  # per GraphUpdate: ({edge set: message function}, next-state layer)
  readout: tile_model.TileReadout


def late_join_layers(model: tf.keras.Model) -> Optional[LateJoinLayers]:
  """The layers of a late-join tile model (tile_model.build_tile_model); None for a model of another structure."""
  layers = [layer for layer in model.layers if not isinstance(layer, (tf.keras.layers.InputLayer, gnn.AddReversedEdges))]
  if len(layers) < 2:
    return None
  encoder, updates, readout = layers[0], [_convolution_inputs(layer) for layer in layers[1:-1]], layers[-1]
  if (not isinstance(encoder, tile_model.TileEncoder) or encoder.join != "late" or None in updates
      or not isinstance(readout, tile_model.TileReadout) or readout.join != "late"):
    return None
  return LateJoinLayers(encoder, updates, readout)


def kernel_part(layers: LateJoinLayers, node_feat, node_opcode, edge_index, num_nodes, num_edges) -> tf.Tensor:
  """(units,) the kernel's share of the readout's hidden layer (TileReadout.kernel_part) from a
  bucket's padded arrays (tile_shapes.kernel_input_specs). Filler rows may hold anything, NaN
  included; the ids of real edges must name real ops (the caller checks)."""
  nodes, edges = node_feat.shape[0], edge_index.shape[0]
  real_op = tf.range(nodes) < num_nodes
  mean_poolings = _mean_poolings(edge_index, tf.range(edges) < num_edges, nodes)
  states = layers.encoder.encode_ops(tf.cast(node_opcode, tf.int64), tf.where(real_op[:, tf.newaxis], node_feat, 0.0),
                                     exact_log=False)
  for message_fns, next_state in layers.updates:
    pooled = {edge_set: mean_poolings[edge_set](message_fn(states))  # message per op, then gathered
              for edge_set, message_fn in sorted(message_fns.items())}
    states = next_state((states, pooled, {}))  # what NodeSetUpdate passes: state, edge inputs, context
  kernel_state = tf.reduce_sum(tf.where(real_op[:, tf.newaxis], states, 0.0), axis=0) / tf.cast(num_nodes, tf.float32)
  return layers.readout.kernel_part(kernel_state)


def config_part(layers: LateJoinLayers, config_feat) -> tf.Tensor:
  """(C, units) the configs' share of the readout's hidden layer (TileReadout.config_part)."""
  return layers.readout.config_part(layers.encoder.encode_configs(config_feat))


def joined_scores(layers: LateJoinLayers, kernel_part_, config_part_, num_configs) -> tf.Tensor:
  """(C,) scores of the two shares, 0 past num_configs (filler configs: 0, not noise)."""
  scores = layers.readout.scores_of_parts(kernel_part_, config_part_)
  return tf.where(tf.range(config_part_.shape[0]) < num_configs, scores, 0.0)
