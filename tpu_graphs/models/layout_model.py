"""Layout models: one score per config of a batch of whole programs (lower score = predicted faster).

Input: a GraphTensor of the layout schema (data/schemas/layout.pbtxt) with b components, op nodes
(n), `feeds` edges, and per graph a list of configs: config nodes (c) and node_config nodes (one
per config and configurable op, 18 layout values) linked by `configures` (to the op) and
`belongs_to` (to the config). Output: scores (c,) float32, aligned with the config node set.

Op states are (n, k, d): one state per op and per config slot of its graph's list (k: the longest
list in the batch, or a static bound under XLA, config_lists.list_size). Within one program,
runtime is close to a sum of per-op layout effects plus copies where a producer's layout differs
from what its consumer asks for (layout_features.py), so:

* the encoder reads layout values as categories (one embedding shared by the config values and
  the op's own default layout), adds each configurable op's cost features (layout changes, minor
  dimension sizes, (8, 128) padding waste) and, per `feeds` edge, whether the config makes XLA
  copy between producer and consumer;
* a residual GNN (gnn.message_passing_update, messages along `feeds` and its reverse), each round
  followed by GraphNorm over the ops of one graph and config, lets layouts interact (GraphNorm
  removes each config's mean op state: better on real programs, worse on unseen generated ones,
  see experiments.LayoutSettings.graph_norm);
* the readout scores every op and sums over the graph: an additive cost model, learnt. Optional
  cross-config attention lets each config's pooled state see the other configs of its list (its
  scores then depend on the list a config is scored in).

Optional, inside the model: op feature normalization with training statistics, and Graph Segment
Training (SegmentedScorer: segments scored as graphs of their own, gradients through one drawn
segment per graph and step), which bounds memory on whole programs. Pruning to configurable ops
is per graph, not per chunk of configs, so the task does it as records are read
(tasks.LayoutTask(prune_hops)) and the export runs it before the model.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.data import graphs
from tpu_graphs.hlo import features, opcodes
from tpu_graphs.models import config_lists, gnn, layout_features, layout_preprocessing

_LAYOUT_VALUES = graphs.LAYOUT_CONFIG_FEATURE_WIDTH
_CONVOLUTION_OPCODE = opcodes.OPCODE_IDS["convolution"]


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


def scatter_to_op_slots(graph: tfgnn.GraphTensor, rows: tf.Tensor) -> tf.Tensor:
  """(n, k, w): rows (N, w), one per `configures` edge, placed at [op, config slot]; zeros elsewhere."""
  num_ops = tf.cast(graph.node_sets["op"].total_size, tf.int64)
  size = tf.cast(config_lists.list_size(graph), tf.int64)
  shape = tf.concat([tf.stack([num_ops, size]), tf.shape(rows, tf.int64)[1:]], 0)
  return tf.scatter_nd(_op_slot_indices(graph), rows, shape)


def op_config_values(graph: tfgnn.GraphTensor) -> tuple[tf.Tensor, tf.Tensor]:
  """(n, k, 18) int32 layout values each config sets on each op (-1 where it sets none), and
  (n, k) bool whether the op is configured in that slot."""
  values = layout_features.layout_categories(node_config_rows(graph))  # shifted: 0 = unset
  placed = scatter_to_op_slots(graph, tf.concat([values, tf.ones_like(values[:, :1])], axis=-1))
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


class LayoutEmbedding(tf.keras.layers.Layer):
  """(..., w) layout values -> (..., w * dim): one embedding per (position, value category), shared
  by config rows (w = 18: output, input 0, input 1) and default layouts (w = 6: output positions)."""

  def __init__(self, dim: int, **kwargs):
    super().__init__(**kwargs)
    self.dim = dim
    self._embedding = tf.keras.layers.Embedding(_LAYOUT_VALUES * layout_features.LAYOUT_CATEGORIES, dim)

  def call(self, values: tf.Tensor) -> tf.Tensor:
    width = values.shape[-1]
    categories = layout_features.layout_categories(tf.cast(values, tf.float32))
    embedded = self._embedding(categories + layout_features.LAYOUT_CATEGORIES * tf.range(width))
    return tf.reshape(embedded, tf.concat([tf.shape(values)[:-1], [width * self.dim]], 0))

  def get_config(self):
    return {**super().get_config(), "dim": self.dim}


# What the encoder tells the GNN about a config's layouts, each measured in benchmarks/real_layout.py:
# "categories": layout values (and each op's default layout) as embedded categories, else as raw
# numbers; "costs": layout_features.config_cost_features of each configurable op; "copies":
# producer/consumer layout changes along `feeds` (edge_copy_counts).
CONFIG_ENCODINGS = ("categories", "costs", "copies")


class LayoutEncoder(tf.keras.layers.Layer):
  """Initial op states (n, k, units) from the op (opcode, normalized features, default layout) and
  each config's layout on it, encoded as `encodings` (a subset of CONFIG_ENCODINGS) say."""

  def __init__(self, units: int, feature_mean=None, feature_deviation=None, layout_dim: int = 8,
               encodings: Sequence[str] = CONFIG_ENCODINGS, **kwargs):
    super().__init__(**kwargs)
    unknown = set(encodings) - set(CONFIG_ENCODINGS)
    if unknown:
      raise ValueError(f"unknown config encodings {sorted(unknown)}; known: {CONFIG_ENCODINGS}")
    self.units, self.layout_dim, self.encodings = units, layout_dim, tuple(encodings)
    self._op_encoder = gnn.OpEncoder(units, feature_scaling=layout_preprocessing.OpFeatureNormalization(
        feature_mean, feature_deviation))
    self._layouts = LayoutEmbedding(layout_dim) if "categories" in self.encodings else None
    self._default = tf.keras.layers.Dense(units, activation="relu")
    self._configs = tf.keras.layers.Dense(units, activation="relu")
    self._joined = tf.keras.layers.Dense(units, activation="relu")

  def _encoded_layouts(self, values: tf.Tensor) -> tf.Tensor:
    """(..., w) layout values -> embedded categories, or the values themselves as floats."""
    return self._layouts(values) if self._layouts is not None else tf.cast(values, tf.float32)

  def call(self, graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
    op_feat = graph.node_sets["op"]["feat"]
    default_layout = layout_features.default_layouts(op_feat)  # (n, 6)
    op_states = self._default(tf.concat([self._op_encoder(graph), self._encoded_layouts(default_layout)], axis=-1))
    rows = node_config_rows(graph)  # (N, 18)
    row_inputs = [self._encoded_layouts(rows)]
    if "costs" in self.encodings:
      op_of = tf.cast(graph.edge_sets["configures"].adjacency.target, tf.int32)
      matrix_dims = layout_features.matrix_feature_dims(
          op_feat, tf.equal(tf.cast(graph.node_sets["op"]["opcode"], tf.int32), _CONVOLUTION_OPCODE))
      row_inputs.append(layout_features.config_cost_features(
          rows, tf.gather(op_feat[:, features.SHAPE_COLUMNS], op_of), tf.gather(default_layout, op_of),
          tf.gather(matrix_dims, op_of)))
    config_states = scatter_to_op_slots(graph, self._configs(tf.concat(row_inputs, axis=-1)))
    values, configured = op_config_values(graph)
    joined = [tf.repeat(op_states[:, tf.newaxis, :], tf.shape(config_states)[1], axis=1), config_states,
              tf.cast(configured, tf.float32)[..., tf.newaxis]]
    if "copies" in self.encodings:
      joined.append(edge_copy_counts(graph, values, configured, default_layout))
    return graph.replace_features(node_sets={"op": {tfgnn.HIDDEN_STATE: self._joined(tf.concat(joined, axis=-1))}})

  def get_config(self):
    return {**super().get_config(), "units": self.units, "layout_dim": self.layout_dim,
            "encodings": list(self.encodings)}


class GraphNorm(tf.keras.layers.Layer):
  """GraphNorm (Cai et al., 2021) of op states (n, k, d) over the ops of one graph and config:
  (h - alpha * mean) / spread * gamma + beta, with a learnt share alpha of the mean removed. Each
  config is normalized on its own, so a config's scores do not depend on its list.

  Without `scale` the centred states are not divided by their spread over the graph's ops. That
  spread is a property of the program (its mix of ops) more than of the config, so dividing by it
  rescales every op's layout effect by a factor that differs between programs; see
  experiments.LayoutSettings.graph_norm_scale for what each choice measured.
  """

  def __init__(self, units: int, scale: bool = True, **kwargs):
    super().__init__(**kwargs)
    self.units, self.scale = units, scale
    width = units
    self.alpha = self.add_weight(name="alpha", shape=[width], initializer="ones")
    self.gamma = self.add_weight(name="gamma", shape=[width], initializer="ones")
    self.beta = self.add_weight(name="beta", shape=[width], initializer="zeros")

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


def graph_fingerprints(graph: tfgnn.GraphTensor) -> tf.Tensor:
  """(b,) int64 in [0, 2**30): a hash of each graph's op count and op features, which tells the
  graphs of a run apart where the model sees no graph id (xla.model_features drops strings)."""
  op = graph.node_sets["op"]
  sizes = tf.cast(op.sizes, tf.int64)
  component = tf.repeat(tf.range(tf.shape(sizes, tf.int64)[0]), sizes)
  weights = tf.range(1, graphs.NODE_FEATURE_WIDTH + 1, dtype=tf.float32) / graphs.NODE_FEATURE_WIDTH
  summary = tf.math.unsorted_segment_sum(tf.linalg.matvec(op["feat"], weights), component, tf.shape(sizes)[0])
  text = tf.strings.join([tf.strings.as_string(sizes), tf.strings.as_string(summary, precision=3)], ":")
  return tf.strings.to_hash_bucket_fast(text, 2 ** 30)


class SegmentedScorer(tf.keras.layers.Layer):
  """Graph Segment Training (Cao et al., NeurIPS 2023) around a layout scorer, so that whole
  programs train and score in the memory of one segment.

  Each graph's ops are cut into segments of `segment_size` consecutive ops
  (layout_preprocessing.op_segments), each scored as a graph of its own (edges between segments
  are cut); a config's score is the sum over segments, as the readout sums over ops. In training,
  per graph one segment holding a configurable op is drawn and scored with gradients, and the other
  segments' scores of each config come from a table of the scores they got when they were last
  drawn (the paper's historical embedding table, 0 until then; no gradient): a step costs and
  holds one segment per graph, not the whole program. Outside training every segment is scored,
  one after another, so scoring holds one segment at a time. Graphs of one segment (e.g. pruned
  ones) take the scorer's own path: the same result, no overhead.
  """

  def __init__(self, scorer: tf.keras.Model, segment_size: int, seed: int = 0, **kwargs):
    super().__init__(**kwargs)
    self.scorer, self.segment_size, self.seed = scorer, segment_size, seed
    # The draws' state and the table are state of this layer, so checkpoints hold them: a run
    # resumed in a new process draws the segments and reads the scores an uninterrupted run would.
    self.generator = tf.random.Generator.from_seed(seed)
    self.table = tf.lookup.experimental.MutableHashTable(tf.int64, tf.float32, default_value=0.0)

  def _table_keys(self, graph: tfgnn.GraphTensor, segments: tf.Tensor) -> tf.Tensor:
    """(c, s) int64 keys of (graph, config, segment) for every config and the given (s,) segments."""
    configs = graph.node_sets["config"]
    graph_of_config = tf.repeat(tf.range(tf.shape(configs.sizes, tf.int64)[0]), tf.cast(configs.sizes, tf.int64))
    config_keys = (tf.gather(graph_fingerprints(graph), graph_of_config) * 2 ** 20 +
                   tf.cast(configs["config_index"], tf.int64) % 2 ** 20)
    return config_keys[:, tf.newaxis] * 2 ** 13 + segments[tf.newaxis, :] % 2 ** 13

  def _training_scores(self, graph: tfgnn.GraphTensor, segment: tf.Tensor, component: tf.Tensor,
                       most: tf.Tensor) -> tf.Tensor:
    drawn = layout_preprocessing.draw_configurable_segments(graph, self.segment_size, self.generator)
    scores = self.scorer(layout_preprocessing.segment_subgraph(graph, segment == tf.gather(drawn, component)),
                         training=True)
    keys = self._table_keys(graph, tf.range(most))  # (c, segments)
    drawn_of_config = tf.gather(drawn, config_lists.list_positions(graph)[:, 0])
    others = tf.range(most)[tf.newaxis, :] != drawn_of_config[:, tf.newaxis]
    cached = tf.reduce_sum(tf.where(others, self.table.lookup(keys), 0.0), axis=1)
    drawn_keys = tf.gather(keys, drawn_of_config, batch_dims=1)
    with tf.control_dependencies([self.table.insert(drawn_keys, tf.stop_gradient(scores))]):
      return scores + cached

  def _all_segments(self, graph: tfgnn.GraphTensor, segment: tf.Tensor, most: tf.Tensor) -> tf.Tensor:
    def add_segment(index, total):
      return index + 1, total + self.scorer(layout_preprocessing.segment_subgraph(graph, segment == index),
                                            training=False)
    _, total = tf.while_loop(lambda index, _: index < most, add_segment,
                             (tf.constant(0, tf.int64), tf.zeros([graph.node_sets["config"].total_size])),
                             parallel_iterations=1)
    return total

  def call(self, graph: tfgnn.GraphTensor, training=None) -> tf.Tensor:
    segment, counts = layout_preprocessing.op_segments(graph, self.segment_size)
    component = tf.repeat(tf.range(tf.shape(counts, tf.int64)[0]), tf.cast(graph.node_sets["op"].sizes, tf.int64))
    most = tf.reduce_max(tf.concat([counts, [1]], 0))
    if training:
      segmented = lambda: self._training_scores(graph, segment, component, most)
    else:
      segmented = lambda: self._all_segments(graph, segment, most)
    scores = tf.cond(most > 1, segmented, lambda: self.scorer(graph, training=training))
    return tf.ensure_shape(scores, [None])  # (c,): the branches' shapes do not survive tf.cond

  def get_config(self):
    return {**super().get_config(), "segment_size": self.segment_size, "seed": self.seed}


class LayoutReadout(tf.keras.layers.Layer):
  """Scores each config (c,): the sum over a graph's ops of a per-op score, plus, with
  `cross_config_attention`, a score of the op-mean state after attention over the list's configs."""

  def __init__(self, units: int, cross_config_attention: bool = False, heads: int = 4, **kwargs):
    super().__init__(**kwargs)
    self.units, self.cross_config_attention, self.heads = units, cross_config_attention, heads
    self._hidden = tf.keras.layers.Dense(units, activation="relu")
    self._score = tf.keras.layers.Dense(1)
    if cross_config_attention:
      self._attention = tf.keras.layers.MultiHeadAttention(heads, max(units // heads, 1))
      self._list_score = tf.keras.Sequential([tf.keras.layers.Dense(units, activation="relu"),
                                              tf.keras.layers.Dense(1)])

  def call(self, graph: tfgnn.GraphTensor) -> tf.Tensor:
    states = graph.node_sets["op"][tfgnn.HIDDEN_STATE]
    per_op = tf.squeeze(self._score(self._hidden(states)), -1)  # (n, k)
    per_list = tfgnn.pool_nodes_to_context(graph, "op", "sum", feature_value=per_op)  # (b, k)
    positions = config_lists.list_positions(graph)
    if self.cross_config_attention:
      pooled = tfgnn.pool_nodes_to_context(graph, "op", "mean", feature_value=states)  # (b, k, d)
      filled = tf.scatter_nd(positions, tf.ones(tf.shape(positions)[:1], tf.bool), tf.shape(per_list, tf.int64))
      attended = self._attention(pooled, pooled, attention_mask=filled[:, tf.newaxis, :] & filled[:, :, tf.newaxis])
      per_list += tf.squeeze(self._list_score(pooled + attended), -1)
    return tf.gather_nd(per_list, positions)

  def get_config(self):
    return {**super().get_config(), "units": self.units, "cross_config_attention": self.cross_config_attention,
            "heads": self.heads}


def build_layout_model(graph_spec: tfgnn.GraphTensorSpec, backbone: str = "residual_gcn", units: int = 64,
                       num_layers: int = 3,
                       feature_statistics: Optional[tuple[np.ndarray, np.ndarray]] = None,
                       segment_size: Optional[int] = None, graph_norm: bool = True, graph_norm_scale: bool = True,
                       cross_config_attention: bool = False,
                       config_encodings: Sequence[str] = CONFIG_ENCODINGS) -> tf.keras.Model:
  """Keras model: layout GraphTensor (merged components) -> (c,) config scores, lower = faster.

  Args:
    graph_spec: spec of the input, e.g. a merged batch of `records.graph_spec("layout")`.
    backbone: "residual_gcn" (residual GraphSAGE-style) or "sage" (gnn.message_passing_update).
    units: width d of every hidden state.
    num_layers: rounds of message passing.
    feature_statistics: (mean, deviation) of log-scaled op features (140,) from
      `layout_preprocessing.op_feature_statistics` on the training graphs; None = log scale only.
    segment_size: if set, Graph Segment Training (SegmentedScorer) with segments of this many ops.
    graph_norm: GraphNorm after every round of message passing.
    graph_norm_scale: GraphNorm divides by the spread of op states over the graph (GraphNorm.scale).
    cross_config_attention: attention over the configs of a list before scoring.
    config_encodings: what the encoder tells the GNN about layouts, a subset of CONFIG_ENCODINGS.
  """
  inputs = tf.keras.layers.Input(type_spec=graph_spec if segment_size is None else graph_spec.relax(
      num_nodes=True, num_edges=True))  # segments are smaller graphs than the input
  graph = gnn.AddReversedEdges()(inputs)
  mean, deviation = feature_statistics if feature_statistics is not None else (None, None)
  graph = LayoutEncoder(units, mean, deviation, encodings=config_encodings)(graph)
  for _ in range(num_layers):
    graph = gnn.message_passing_update(backbone, units)(graph)
    if graph_norm:
      graph = GraphNorm(units, graph_norm_scale)(graph)
  scores = LayoutReadout(units, cross_config_attention)(graph)
  scorer = tf.keras.Model(inputs, scores, name=f"layout_{backbone}")
  if segment_size is None:
    return scorer
  whole = tf.keras.layers.Input(type_spec=graph_spec)
  return tf.keras.Model(whole, SegmentedScorer(scorer, segment_size)(whole), name=f"layout_{backbone}_segments")
