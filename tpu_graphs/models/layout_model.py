"""Layout models: one score per config of a batch of whole programs (lower score = predicted faster).

Input: a GraphTensor of the layout schema (data/schemas/layout.pbtxt) with b components, op nodes
(n), `feeds` edges, and per graph a list of configs: config nodes (c) and node_config nodes (one
per config and configurable op, 18 layout values) linked by `configures` (to the op) and
`belongs_to` (to the config). Output: scores (c,) float32, aligned with the config node set.

A compiler asks for many configs of one program, and only the configurable ops' layout values
change from one config to the next, so the model is two halves:

* `OpContext`, once per graph: each op's state (n, units) from its opcode, its features
  (normalized with training statistics) and its own default layout, then `context_layers` rounds
  of message passing. Nothing here depends on a config.
* `ConfigScorer`, per config: op states (n, k, config_units), one per op and config slot of its
  graph's list (k: config_lists.list_size), start from the op's context and the config's layout on
  it (values read as categories, the op's cost features of that layout, and per `feeds` edge
  whether the config makes XLA copy between producer and consumer; layout_features.py). Rounds of
  residual message passing along `feeds` both ways, each followed by GraphNorm over the ops of one
  graph and config, let layouts interact through producers and consumers. The readout scores
  every op and sums over the graph: an additive cost model, learnt.

Serving computes the context once and scores configs chunk by chunk against it
(`context_and_scores`); training calls both halves on a batch. Optional, inside the model: Graph
Segment Training (segment_training.py), which bounds memory on whole programs. Pruning to
configurable ops is per graph, so the task does it as records are read (tasks.LayoutTask) and the
export runs it before the model.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.data import graphs
from tpu_graphs.hlo import features, opcodes
from tpu_graphs.models import config_lists, gnn, layout_features, layout_preprocessing, segment_training

_LAYOUT_VALUES = graphs.LAYOUT_CONFIG_FEATURE_WIDTH
_CONVOLUTION_OPCODE = opcodes.OPCODE_IDS["convolution"]
# What the config half reads of a config's layouts, each measured in benchmarks/real_layout.py
# --ablation: "categories": layout values as categories (one table per value position), else as raw
# numbers; "costs": layout_features.config_cost_features of each configurable op; "copies":
# producer/consumer layout changes along `feeds` (edge_copy_counts).
CONFIG_ENCODINGS = ("categories", "costs", "copies")


def node_config_rows(graph: tfgnn.GraphTensor) -> tf.Tensor:
  """(N, 18) node_config features, one row per `configures` edge.

  Under padding to static sizes the node set holds filler nodes that no edge reaches, so rows are
  gathered along the edges: every (op, config slot) pairing below is edge-aligned.
  """
  return tf.gather(graph.node_sets["node_config"]["feat"], graph.edge_sets["configures"].adjacency.source)


def _op_slot_indices(graph: tfgnn.GraphTensor) -> tf.Tensor:
  """(N, 2) int64 [op, config slot] of every `configures` edge (node_config node)."""
  positions = config_lists.list_positions(graph)[:, 1]
  config_of = tf.cast(graph.edge_sets["belongs_to"].adjacency.target, tf.int64)
  op_of = tf.cast(graph.edge_sets["configures"].adjacency.target, tf.int64)
  # Both edge sets list node_config nodes in order (records.join, graph_tensor_from_arrays).
  return tf.stack([op_of, tf.gather(positions, config_of)], axis=1)


def scatter_to_op_slots(graph: tfgnn.GraphTensor, rows: tf.Tensor, by_gather: bool = False) -> tf.Tensor:
  """(n, k, w): rows (N, w), one per `configures` edge, placed at [op, config slot]; zeros elsewhere.

  by_gather: through an (n, k) table of each place's row, for callers that take no gradient:
  TensorFlow's scatter kernel copies row by row on one thread (a tenth of a served chunk), a
  gather on every core; but a gather's gradient is a scatter, which XLA on a CPU runs as a loop.
  """
  num_ops = tf.cast(graph.node_sets["op"].total_size, tf.int64)
  size = tf.cast(config_lists.list_size(graph), tf.int64)
  indices = _op_slot_indices(graph)
  if not by_gather:
    return tf.scatter_nd(indices, rows, tf.concat([tf.stack([num_ops, size]), tf.shape(rows, tf.int64)[1:]], 0))
  count = tf.shape(indices)[0]
  row_at = tf.tensor_scatter_nd_update(tf.fill(tf.stack([num_ops, size]), count), indices, tf.range(count))
  return tf.gather(tf.concat([rows, tf.zeros_like(rows[:1])], 0), row_at)  # row N: zeros


def op_config_values(graph: tfgnn.GraphTensor, by_gather: bool = False) -> tuple[tf.Tensor, tf.Tensor]:
  """(n, k, 18) int32 layout values each config sets on each op (-1 where it sets none), and
  (n, k) bool whether the op is configured in that slot (by_gather: scatter_to_op_slots')."""
  values = layout_features.layout_categories(node_config_rows(graph))  # shifted: 0 = unset
  placed = scatter_to_op_slots(graph, tf.concat([values, tf.ones_like(values[:, :1])], axis=-1), by_gather)
  return placed[..., :_LAYOUT_VALUES] - 1, placed[..., _LAYOUT_VALUES] > 0


def edge_copy_counts(graph: tfgnn.GraphTensor, values: tf.Tensor, configured: tf.Tensor,
                     default_layout: tf.Tensor) -> tf.Tensor:
  """(n, k, 2) float32 per op and config: how many of its producers, and how many of its consumers,
  meet it with a layout change (layout_features.edge_copies) along `feeds`.

  A producer's output layout is the one its config sets, else its default layout.
  """
  num_ops = tf.shape(values)[0]
  output = values[..., :layout_features.MAX_DIMS]
  default = tf.broadcast_to(default_layout[:, tf.newaxis, :], tf.shape(output))
  produced = tf.where((configured & (output[..., 0] >= 0))[..., tf.newaxis], output, default)
  feeds = graph.edge_sets["feeds"].adjacency
  producers, consumers = tf.cast(feeds.source, tf.int32), tf.cast(feeds.target, tf.int32)
  copies = layout_features.edge_copies(tf.gather(produced, producers), tf.gather(values, consumers))  # (e, k)
  return tf.stack([tf.math.unsorted_segment_sum(copies, consumers, num_ops),
                   tf.math.unsorted_segment_sum(copies, producers, num_ops)], axis=-1)


def row_op_inputs(op_feat: tf.Tensor, opcode: tf.Tensor) -> dict:
  """What a config row's state (ConfigScorer.row_states) reads of its op, per op: "shape" (n, 6)
  output dimension sizes, "default_layout" (n, 6) int32, "matrix_dims" (n, 2) int32
  (layout_features.matrix_feature_dims)."""
  is_convolution = tf.equal(tf.cast(opcode, tf.int32), _CONVOLUTION_OPCODE)
  return {"shape": op_feat[:, features.SHAPE_COLUMNS], "default_layout": layout_features.default_layouts(op_feat),
          "matrix_dims": layout_features.matrix_feature_dims(op_feat, is_convolution)}


def dense_product(values: tf.Tensor, kernel: tf.Tensor) -> tf.Tensor:
  """(..., w) values times a (w, u) kernel as one (rows, w) product, reshaped back to (..., u)."""
  flat = tf.matmul(tf.reshape(values, [-1, values.shape[-1]]), kernel)
  return tf.reshape(flat, tf.concat([tf.shape(values)[:-1], tf.shape(kernel)[-1:]], 0))


def dense_on_rows(layer: tf.keras.layers.Layer, values: tf.Tensor) -> tf.Tensor:
  """A Dense layer on (..., w) values as one (rows, w) product, reshaped back.

  Keras runs a Dense on a 3-D input as a tensordot followed by a bias add and the activation as
  TensorFlow kernels of their own, each a pass over the (ops x configs x units) states; on 2-D
  rows TensorFlow fuses them into the product (a tenth of a served nlp call). The same arithmetic.
  """
  flat = layer(tf.reshape(values, [-1, values.shape[-1]]))
  return tf.reshape(flat, tf.concat([tf.shape(values)[:-1], tf.shape(flat)[-1:]], 0))


class LayoutCategories(tf.keras.layers.Layer):
  """(..., w) layout values -> (..., dim): the sum over value positions of a learnt vector per
  (position, value category). Equal to an embedding per position concatenated and projected by a
  linear layer, computed as one product of the rows' one-hot categories with the table.

  A product rather than w table lookups, whatever runs it: the gradient of a lookup is a scatter
  into the table, which XLA on a CPU runs as one loop iteration per row and position (over a
  million per step of the recipe); XLA compiles the lookups' sum to a scalar loop (over a quarter
  of a native layout call); and TensorFlow's kernels spent more time gathering the (..., w, dim)
  vectors and reducing them over w than the product takes.
  """

  def __init__(self, dim: int, **kwargs):
    super().__init__(**kwargs)
    self.dim = dim
    self._table = tf.keras.layers.Embedding(_LAYOUT_VALUES * layout_features.LAYOUT_CATEGORIES, dim)

  def call(self, values: tf.Tensor) -> tf.Tensor:
    if not self._table.built:  # only its weights are used
      self._table.build(tf.TensorShape([None]))
    positions = values.shape[-1] * layout_features.LAYOUT_CATEGORIES
    categories = layout_features.layout_categories(tf.cast(values, tf.float32))
    one_hot = tf.reshape(tf.one_hot(categories, layout_features.LAYOUT_CATEGORIES), [-1, positions])
    summed = tf.matmul(one_hot, self._table.embeddings[:positions])
    return tf.reshape(summed, tf.concat([tf.shape(values)[:-1], [self.dim]], 0))

  def get_config(self):
    return {**super().get_config(), "dim": self.dim}


class OpRound(tf.keras.layers.Layer):
  """One round of message passing over op states ((n, d) or (n, k, d)) along `feeds` both ways.

  Each op's messages relu(W h) are computed once per op, not per edge, and averaged over its
  producers and over its consumers; then new = relu(h + W' [h, from producers, from consumers])
  ("residual_gcn") or relu(W' [...]) ("sage"). The same as gnn.message_passing_update's, whose
  messages are computed per edge: a layout graph has more edges than ops, and a config's states
  pass through every round.
  """

  def __init__(self, units: int, backbone: str = "residual_gcn", **kwargs):
    super().__init__(**kwargs)
    if backbone not in gnn.BACKBONES:
      raise ValueError(f"unknown GNN backbone {backbone!r}; known: {gnn.BACKBONES}")
    self.units, self.backbone = units, backbone
    self._to_consumers = tf.keras.layers.Dense(units, activation="relu")
    self._to_producers = tf.keras.layers.Dense(units, activation="relu")
    self._next = tf.keras.layers.Dense(units, activation=None if backbone == "residual_gcn" else "relu")

  def call(self, graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
    states = graph.node_sets["op"][tfgnn.HIDDEN_STATE]
    heard = [states]
    for message, sender, receiver in ((self._to_consumers, tfgnn.SOURCE, tfgnn.TARGET),
                                      (self._to_producers, tfgnn.TARGET, tfgnn.SOURCE)):
      on_edges = tfgnn.broadcast_node_to_edges(graph, "feeds", sender, feature_value=dense_on_rows(message, states))
      heard.append(tfgnn.pool_edges_to_node(graph, "feeds", receiver, "mean", feature_value=on_edges))
    return graph.replace_features(node_sets={"op": {tfgnn.HIDDEN_STATE: self.next_states(*heard)}})

  def next_states(self, states: tf.Tensor, from_producers: tf.Tensor, from_consumers: tf.Tensor) -> tf.Tensor:
    """The round's new states from what each op heard. The next-state layer's kernel is applied as
    one product per part of [states, from producers, from consumers]: the same sum as on their
    concatenation, without copying every state into it."""
    if not self._next.built:
      self._next.build(tf.TensorShape([None, 3 * self.units]))
    width = states.shape[-1]
    kernel = self._next.kernel
    update = tf.add_n([dense_product(part, kernel[i * width:(i + 1) * width])
                       for i, part in enumerate((states, from_producers, from_consumers))])
    update = self._next.activation(update + self._next.bias)
    return tf.nn.relu(states + update) if self.backbone == "residual_gcn" else update

  def get_config(self):
    return {**super().get_config(), "units": self.units, "backbone": self.backbone}


class OpContext(tf.keras.layers.Layer):
  """The config-independent half: op states (n, units) from the opcode, the normalized features
  and the op's default layout, after `rounds` rounds of message passing (OpRound)."""

  def __init__(self, units: int, rounds: int, backbone: str = "residual_gcn", feature_mean=None,
               feature_deviation=None, **kwargs):
    super().__init__(**kwargs)
    self.units, self.rounds, self.backbone = units, rounds, backbone
    self._op_encoder = gnn.OpEncoder(units, feature_scaling=layout_preprocessing.OpFeatureNormalization(
        feature_mean, feature_deviation))
    self._default_layout = LayoutCategories(units)
    self._joined = tf.keras.layers.Dense(units, activation="relu")
    self._rounds = [OpRound(units, backbone) for _ in range(rounds)]

  def call(self, graph: tfgnn.GraphTensor) -> tf.Tensor:
    default_layout = layout_features.default_layouts(graph.node_sets["op"]["feat"])  # (n, 6)
    states = self._joined(tf.concat([self._op_encoder(graph), self._default_layout(default_layout)], axis=-1))
    graph = graph.replace_features(node_sets={"op": {tfgnn.HIDDEN_STATE: states}})
    for round_ in self._rounds:
      graph = round_(graph)
    return graph.node_sets["op"][tfgnn.HIDDEN_STATE]

  def get_config(self):
    return {**super().get_config(), "units": self.units, "rounds": self.rounds, "backbone": self.backbone}


class GraphNorm(tf.keras.layers.Layer):
  """GraphNorm (Cai et al., 2021) of op states (n, k, d) over the ops of one graph and config:
  (h - alpha * mean) / spread * gamma + beta, with a learnt share alpha of the mean removed. Each
  config is normalized on its own, so a config's scores do not depend on its list.

  Without `scale` the centred states are not divided by their spread over the graph's ops. That
  spread is a property of the program (its mix of ops) more than of the config, so dividing by it
  rescales every op's layout effect by a factor that differs between programs; docs/research.md
  says what each choice measured.
  """

  def __init__(self, units: int, scale: bool = True, **kwargs):
    super().__init__(**kwargs)
    self.units, self.scale = units, scale
    self.alpha = self.add_weight(name="alpha", shape=[units], initializer="ones")
    self.gamma = self.add_weight(name="gamma", shape=[units], initializer="ones")
    self.beta = self.add_weight(name="beta", shape=[units], initializer="zeros")

  def _graph_mean(self, graph: tfgnn.GraphTensor, states: tf.Tensor) -> tf.Tensor:
    return tfgnn.broadcast_context_to_nodes(graph, "op", feature_value=tfgnn.pool_nodes_to_context(
        graph, "op", "mean", feature_value=states))

  def call(self, graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
    states = graph.node_sets["op"][tfgnn.HIDDEN_STATE]
    centred = states - self.alpha * self._graph_mean(graph, states)
    if self.scale:
      centred *= tf.math.rsqrt(self._graph_mean(graph, tf.square(centred)) + 1e-5)
    normalized = centred * self.gamma + self.beta
    return graph.replace_features(node_sets={"op": {tfgnn.HIDDEN_STATE: normalized}})

  def get_config(self):
    return {**super().get_config(), "units": self.units, "scale": self.scale}


class ConfigScorer(tf.keras.layers.Layer):
  """The per-config half: (graph, op context (n, units)) -> scores (c,).

  Op states (n, k, units) start as relu(W context + V row + w configured + U copies), where row is
  relu(the config's layout values on the op as LayoutCategories + W' its cost features) and copies
  its edge_copy_counts; then `rounds` OpRounds, each followed by GraphNorm if asked; then the sum
  over a graph's ops of a per-op score.
  """

  def __init__(self, units: int, rounds: int, backbone: str = "residual_gcn", graph_norm: bool = True,
               graph_norm_scale: bool = True, encodings: Sequence[str] = CONFIG_ENCODINGS, **kwargs):
    super().__init__(**kwargs)
    unknown = set(encodings) - set(CONFIG_ENCODINGS)
    if unknown:
      raise ValueError(f"unknown config encodings {sorted(unknown)}; known: {CONFIG_ENCODINGS}")
    self.units, self.rounds, self.backbone = units, rounds, backbone
    self.graph_norm, self.graph_norm_scale, self.encodings = graph_norm, graph_norm_scale, tuple(encodings)
    self._categories = LayoutCategories(units) if "categories" in self.encodings else None
    self._row = tf.keras.layers.Dense(units, activation="relu")
    self._context = tf.keras.layers.Dense(units)
    self._joined = tf.keras.layers.Dense(units)
    self._rounds = [OpRound(units, backbone) for _ in range(rounds)]
    self._norms = [GraphNorm(units, graph_norm_scale) for _ in range(rounds)] if graph_norm else []
    self._hidden = tf.keras.layers.Dense(units, activation="relu")
    self._score = tf.keras.layers.Dense(1)

  def row_states(self, rows: tf.Tensor, ops: dict) -> tf.Tensor:
    """(R, units) states of config rows (R, 18), each one config's layout values on one op, given
    `ops` (row_op_inputs of each row's op). A row's state depends on nothing else, and configs
    repeat a few rows per op (5 to 8 distinct in the sample's graphs), so a caller that scores
    many configs can compute each distinct row once (`distinct_row_states`;
    native/library/layout_library.cc does it on the host)."""
    inputs = [rows if self._categories is None else self._categories(rows)]
    if "costs" in self.encodings:
      inputs.append(layout_features.config_cost_features(rows, ops["shape"], ops["default_layout"], ops["matrix_dims"]))
    return self._row(tf.concat(inputs, axis=-1))

  def distinct_row_states(self, rows: tf.Tensor, op_of: tf.Tensor, ops: dict) -> tuple[tf.Tensor, tf.Tensor]:
    """row_states of rows (R, 18) of ops op_of (R,), each distinct (op, row) pair computed once:
    (D, units) states of the distinct pairs and (R,) int32 the index of every row's among them.

    Pairs are told apart by their exact bits, so the states equal row_states'. The number of
    distinct pairs is data, which XLA cannot compile: for callers that do not need XLA.
    """
    keys = tf.concat([tf.cast(op_of, tf.int32)[:, tf.newaxis], tf.bitcast(rows, tf.int32)], axis=-1)
    distinct, index = tf.raw_ops.UniqueV2(x=keys, axis=[0], out_idx=tf.int32)
    ops_of_distinct = {name: tf.gather(value, distinct[:, 0]) for name, value in ops.items()}
    distinct_rows = tf.ensure_shape(tf.bitcast(distinct[:, 1:], tf.float32), [None, rows.shape[-1]])
    return self.row_states(distinct_rows, ops_of_distinct), index

  def call(self, inputs: tuple[tfgnn.GraphTensor, tf.Tensor], serving: bool = False,
           rows: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Scores (c,). rows: the states (N, units) of the graph's config rows (node_config_rows), if
    the caller has them already (a pruning model's SavedModel computes each distinct row's once per
    call, `distinct_row_states`). serving: for callers that need neither XLA nor gradients, rows
    placed at their ops by gathers (scatter_to_op_slots)."""
    graph, context = inputs
    ops = row_op_inputs(graph.node_sets["op"]["feat"], graph.node_sets["op"]["opcode"])
    if rows is None:
      op_of = graph.edge_sets["configures"].adjacency.target
      rows = self.row_states(node_config_rows(graph), {name: tf.gather(value, op_of) for name, value in ops.items()})
    config_states = scatter_to_op_slots(graph, rows, by_gather=serving)  # (n, k, units)
    default_layout = ops["default_layout"]
    values, configured = op_config_values(graph, by_gather=serving)
    joined = [config_states, tf.cast(configured, tf.float32)[..., tf.newaxis]]
    if "copies" in self.encodings:
      joined.append(edge_copy_counts(graph, values, configured, default_layout))
    states = tf.nn.relu(self._context(context)[:, tf.newaxis, :] + dense_on_rows(self._joined, tf.concat(joined, axis=-1)))
    graph = graph.replace_features(node_sets={"op": {tfgnn.HIDDEN_STATE: states}})
    for index, round_ in enumerate(self._rounds):
      graph = round_(graph)
      if self._norms:
        graph = self._norms[index](graph)
    per_op = tf.squeeze(dense_on_rows(self._score, dense_on_rows(self._hidden, graph.node_sets["op"][tfgnn.HIDDEN_STATE])), -1)  # (n, k)
    per_list = tfgnn.pool_nodes_to_context(graph, "op", "sum", feature_value=per_op)  # (b, k)
    return tf.gather_nd(per_list, config_lists.list_positions(graph))

  def get_config(self):
    return {**super().get_config(), "units": self.units, "rounds": self.rounds, "backbone": self.backbone,
            "graph_norm": self.graph_norm, "graph_norm_scale": self.graph_norm_scale,
            "encodings": list(self.encodings)}


class TwoHalves(NamedTuple):
  """A layout scorer's halves for callers that score many config chunks of one graph (serving)."""
  context: OpContext  # graph -> (n, units) op context, once per graph
  config_scorer: ConfigScorer  # (graph, context) -> (c,) scores, per chunk


def context_and_scores(scorer: tf.keras.Model) -> Optional[TwoHalves]:
  """The halves of a layout scorer built by build_layout_model without segments: the context of
  its structure once, then each chunk against it. None for other models."""
  try:
    op_context, config_scorer = scorer.get_layer("op_context"), scorer.get_layer("config_scorer")
  except ValueError:
    return None
  if not isinstance(op_context, OpContext) or not isinstance(config_scorer, ConfigScorer):
    return None
  return TwoHalves(op_context, config_scorer)


# Keras traces a subclassed layer's call through autograph when a functional model is built on it;
# none of ours (nor TF-GNN's) branches on tensors, and the rewriting cost seconds per model.
@tf.autograph.experimental.do_not_convert
def build_layout_model(graph_spec: tfgnn.GraphTensorSpec, backbone: str = "residual_gcn", units: int = 64,
                       num_layers: int = 3, context_layers: int = 0, config_units: Optional[int] = None,
                       feature_statistics: Optional[tuple[np.ndarray, np.ndarray]] = None,
                       segment_size: Optional[int] = None, graph_norm: bool = True, graph_norm_scale: bool = True,
                       config_encodings: Sequence[str] = CONFIG_ENCODINGS) -> tf.keras.Model:
  """Keras model: layout GraphTensor (merged components) -> (c,) config scores, lower = faster.

  Args:
    graph_spec: spec of the input, e.g. a merged batch of `records.graph_spec("layout")`.
    backbone: "residual_gcn" or "sage" (OpRound).
    units: width of the config-independent op states (OpContext).
    num_layers: rounds of message passing per config (ConfigScorer).
    context_layers: rounds of config-independent message passing (OpContext).
    config_units: width of the per-config op states; default `units`.
    feature_statistics: (mean, deviation) of log-scaled op features (140,) from
      `layout_preprocessing.op_feature_statistics` on the training graphs; None = log scale only.
    segment_size: if set, Graph Segment Training (segment_training.SegmentedScorer) with segments
      of this many ops.
    graph_norm: GraphNorm after every round of per-config message passing.
    graph_norm_scale: GraphNorm divides by the spread of op states over the graph (GraphNorm.scale).
    config_encodings: what the per-config half reads of layouts, a subset of CONFIG_ENCODINGS.
  """
  inputs = tf.keras.layers.Input(type_spec=graph_spec if segment_size is None else graph_spec.relax(
      num_nodes=True, num_edges=True))  # segments are smaller graphs than the input
  mean, deviation = feature_statistics if feature_statistics is not None else (None, None)
  context = OpContext(units, context_layers, backbone, mean, deviation, name="op_context")(inputs)
  scores = ConfigScorer(config_units or units, num_layers, backbone, graph_norm, graph_norm_scale, config_encodings,
                        name="config_scorer")((inputs, context))
  scorer = tf.keras.Model(inputs, scores, name=f"layout_{backbone}")
  if segment_size is None:
    return scorer
  whole = tf.keras.layers.Input(type_spec=graph_spec)
  return tf.keras.Model(whole, segment_training.SegmentedScorer(scorer, segment_size)(whole),
                        name=f"layout_{backbone}_segments")
