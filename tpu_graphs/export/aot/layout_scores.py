"""A layout model's two halves on one padded pruned graph, arranged for ahead-of-time compilation.

Run on a padded GraphTensor, the model compiles to TF-GNN's general machinery taken literally:
every pooling (messages to their receivers, GraphNorm's and the readout's sums over a graph's ops,
the placing of config rows at their ops) is an unsorted segment sum or a scatter, and XLA's CPU
backend has no scatter of its own: it rewrites each into a while loop with one trip per scattered
row (a dynamic slice, an add and a dynamic update per trip), 22 such loops per call of 32 configs
for the default model. Its reductions over the leading axis fare little better: fused with what
produces their input, each output element becomes a chain of dependent scalar additions. Here the
model's own layers (its weights, called as the model calls them) run on the bucket's arrays
(layout_shapes.py) with neither:

* messages pooled along `feeds` through neighbour tables (NeighbourTable): a few gathers of
  whole rows added together, one vectorized loop, and a small matrix product for the rare op with
  more neighbours than the table's slots;
* config rows placed at their ops by a gather (each op's slot), not a scatter, their states
  computed by the rows signature (`config_row_states`), which the caller runs once per distinct
  row rather than once per config and op;
* GraphNorm's means and the readout's sum over the graph's ops by halving: the upper half of the
  rows added to the lower, log2(N) times (`op_sum`), elementwise work that vectorizes;
* padding masked, not a filler component: filler ops are zeroed and left out of every sum; the
  tables never name them.

Op states are (N, C, units) per chunk, ops outermost, so that a gather moves whole rows of
C x units floats and every Dense layer is one (N C, units) matrix product. The arithmetic is the
model's (scores equal the plain signature's up to the order of float additions,
tests/export/test_saved_model.py); reading the model's sublayers ties this module to the layer structure
of layout_model.OpContext and ConfigScorer, whose types layout_model.context_and_scores checks.
"""

from __future__ import annotations

import tensorflow as tf

from tpu_graphs.models import layout_features, layout_model


def op_sum(values: tf.Tensor) -> tf.Tensor:
  """(N, ...) -> (1, ...) the sum over the leading axis (N a power of two: the buckets' sizes).

  The upper half of the rows is added to the lower until _SUMMED_ROWS are left, then those are
  reduced. Halving is elementwise work that vectorizes; the final reduce is what XLA will not fuse
  into the sum's consumers (it counts as expensive), so the sum is computed once, not once per
  element of what broadcasts it (an (N, C, d) GraphNorm: N times the work).
  """
  while values.shape[0] > _SUMMED_ROWS:
    half = values.shape[0] // 2
    values = values[:half] + values[half:]
  return tf.reduce_sum(values, axis=0, keepdims=True)


_SUMMED_ROWS = 8


class NeighbourTable:
  """Sums and means over each op's edges in one direction of `feeds` (layout_shapes' neighbour
  tables): NEIGHBOUR_SLOTS gathers added, plus a matrix product for the hubs' other edges,
  gathered to the hubs."""

  def __init__(self, arrays: dict, direction: str, other_end: tf.Tensor):
    """other_end: (E,) int32 each edge's op at its other end (the neighbour), any op for filler."""
    self.edges = arrays[direction]  # (N, S) edge ids, E: none
    self._real = self.edges < other_end.shape[0]
    self.neighbours = tf.gather(tf.concat([other_end, [0]], 0), self.edges)  # (N, S), 0 for none
    self.degrees = arrays[f"{direction}_degrees"]
    self._hubs = arrays[f"{direction}_hubs"]  # (H, E)
    self._hub_of = arrays[f"{direction}_hub_of"]  # (N,), H: none
    self._other_end = other_end

  def _total(self, on_slots: list, on_edges) -> tf.Tensor:
    """(N, ...) the sum of each op's real slots' values, plus for a hub the sum of on_edges()
    ((E, ...) values on the edges) over its other edges. Graphs without hubs (most) skip that
    product: it runs under a condition."""
    mask = lambda slot, value: tf.where(tf.reshape(self._real[:, slot], [-1] + [1] * (value.shape.rank - 1)),
                                        value, 0.0)
    slots = tf.add_n([mask(slot, value) for slot, value in enumerate(on_slots)])

    def with_hubs():
      values = on_edges()
      flat = tf.matmul(self._hubs, tf.reshape(values, [values.shape[0], -1]))
      hub_sums = tf.reshape(flat, tf.concat([[self._hubs.shape[0]], tf.shape(values)[1:]], 0))
      return slots + tf.gather(tf.concat([hub_sums, tf.zeros_like(hub_sums[:1])], 0), self._hub_of)

    return tf.cond(tf.reduce_any(self._hub_of < self._hubs.shape[0]), with_hubs, lambda: slots)

  def sums(self, values: tf.Tensor) -> tf.Tensor:
    """(N, ...) values of the ops -> (N, ...) each op's sum over its neighbours', 0 without any."""
    on_slots = [tf.gather(values, self.neighbours[:, slot]) for slot in range(self.neighbours.shape[1])]
    return self._total(on_slots, lambda: tf.gather(values, self._other_end))

  def edge_sums(self, on_edges: tf.Tensor) -> tf.Tensor:
    """(E, ...) values of the edges themselves -> (N, ...) each op's sum over its edges."""
    padded = tf.concat([on_edges, tf.zeros_like(on_edges[:1])], 0)
    on_slots = [tf.gather(padded, self.edges[:, slot]) for slot in range(self.edges.shape[1])]
    return self._total(on_slots, lambda: on_edges)

  def means(self, values: tf.Tensor) -> tf.Tensor:
    """(N, ...) -> (N, ...) each op's mean over its neighbours (TF-GNN's "mean"), 0 without any."""
    scale = 1.0 / tf.cast(tf.maximum(self.degrees, 1), values.dtype)
    return self.sums(values) * tf.reshape(scale, [-1] + [1] * (values.shape.rank - 1))


class PaddedGraph:
  """A bucket's pruned graph with its padding masked: op features (filler rows zeroed),
  default layouts, and the neighbour tables of `feeds` both ways."""

  def __init__(self, arrays: dict):
    node_feat = arrays["node_feat"]
    self.nodes = node_feat.shape[0]
    self.num_nodes = arrays["num_nodes"]
    self.real_op = tf.range(self.nodes) < self.num_nodes  # (N,)
    self.node_feat = tf.where(self.real_op[:, tf.newaxis], node_feat, 0.0)
    self.default_layout = layout_features.default_layouts(self.node_feat)  # (N, 6)
    edge_index = arrays["edge_index"]
    real_edge = tf.range(edge_index.shape[0]) < arrays["num_edges"]
    # (E,) each edge's consumer and producer; 0 (a real op) for filler edges, which no table names.
    self.consumers_of_edges, self.producers_of_edges = (
        tf.where(real_edge, tf.cast(edge_index[:, i], tf.int32), 0) for i in (0, 1))
    self.producers = NeighbourTable(arrays, "producers", self.producers_of_edges)  # each op hears its producers
    self.consumers = NeighbourTable(arrays, "consumers", self.consumers_of_edges)

  def mask(self, values: tf.Tensor) -> tf.Tensor:
    """(N, ...) values with the filler ops' rows zeroed."""
    return tf.where(tf.reshape(self.real_op, [-1] + [1] * (values.shape.rank - 1)), values, 0.0)

  def op_mean(self, values: tf.Tensor) -> tf.Tensor:
    """(N, ...) -> (1, ...) the mean over the graph's real ops."""
    return op_sum(self.mask(values)) / tf.cast(self.num_nodes, values.dtype)


def _round(round_: layout_model.OpRound, graph: PaddedGraph, states: tf.Tensor) -> tf.Tensor:
  """OpRound.call on (N, ...) states: each op's messages once, pooled along `feeds` both ways."""
  return round_.next_states(states, graph.producers.means(round_._to_consumers(states)),  # pylint: disable=protected-access
                            graph.consumers.means(round_._to_producers(states)))  # pylint: disable=protected-access


def _graph_norm(norm: layout_model.GraphNorm, graph: PaddedGraph, states: tf.Tensor) -> tf.Tensor:
  """GraphNorm.call on (N, C, d) states: per config, over the graph's real ops."""
  centred = states - norm.alpha * graph.op_mean(states)
  if norm.scale:
    centred *= tf.math.rsqrt(graph.op_mean(tf.square(centred)) + 1e-5)
  return centred * norm.gamma + norm.beta


def op_context(op_context_layer: layout_model.OpContext, arrays: dict) -> tf.Tensor:
  """(N, units) OpContext of a bucket's graph (layout_shapes.context_input_specs, by name); filler
  rows hold values nobody reads."""
  graph = PaddedGraph(arrays)
  layer = op_context_layer
  opcode = tf.where(graph.real_op, tf.cast(arrays["node_opcode"], tf.int32), 0)
  encoded = layer._op_encoder.encode(opcode, graph.node_feat)  # pylint: disable=protected-access
  states = layer._joined(tf.concat([encoded, layer._default_layout(graph.default_layout)], axis=-1))  # pylint: disable=protected-access
  for round_ in layer._rounds:  # pylint: disable=protected-access
    states = _round(round_, graph, states)
  return states


def _edge_copy_counts(graph: PaddedGraph, values: tf.Tensor, configured: tf.Tensor) -> tf.Tensor:
  """layout_model.edge_copy_counts on (N, C, 18) values: (N, C, 2) float32 per op and config, how
  many of its producers and of its consumers meet it with a layout change (computed once per edge)."""
  output = values[..., :layout_features.MAX_DIMS]
  default = tf.broadcast_to(graph.default_layout[:, tf.newaxis, :], tf.shape(output))
  produced = tf.where((configured[:, tf.newaxis] & (output[..., 0] >= 0))[..., tf.newaxis], output, default)
  copies = layout_features.edge_copies(tf.gather(produced, graph.producers_of_edges),
                                       tf.gather(values, graph.consumers_of_edges))  # (E, C)
  return tf.stack([graph.producers.edge_sums(copies), graph.consumers.edge_sums(copies)], axis=-1)


def config_row_states(config_scorer: layout_model.ConfigScorer, arrays: dict) -> tf.Tensor:
  """(R, config units) ConfigScorer.row_states of config rows given their ops' features and opcodes
  (layout_shapes.rows_input_specs, by name)."""
  ops = layout_model.row_op_inputs(arrays["node_feat"], arrays["node_opcode"])
  return config_scorer.row_states(arrays["node_config_feat"], ops)


def config_scores(config_scorer: layout_model.ConfigScorer, arrays: dict) -> tf.Tensor:
  """(C,) ConfigScorer scores of a chunk of configs of a bucket's graph given its op context and the
  states of its config rows (layout_shapes.chunk_input_specs, by name), 0 past num_configs. Filler
  rows may hold anything."""
  layer = config_scorer
  graph = PaddedGraph(arrays)
  node_config_feat = arrays["node_config_feat"]
  nodes, configs, slots = graph.nodes, node_config_feat.shape[0], node_config_feat.shape[1]
  real_slot = tf.range(slots) < arrays["num_configurable"]
  op_slot = tf.where(graph.real_op, arrays["op_slot"], slots)
  configured = (op_slot >= 0) & (op_slot < slots)
  op_slot = tf.where(configured, op_slot, slots)  # slot K: the filler row of unset values, read by no configured op

  def slot_major(values: tf.Tensor, filler: float) -> tf.Tensor:
    """(C, K, w) -> (K + 1, C, w), the filler slot K last."""
    return tf.concat([tf.transpose(values, [1, 0, 2]), tf.fill([1, configs, values.shape[-1]], filler)], 0)

  rows = slot_major(tf.where(real_slot[tf.newaxis, :, tf.newaxis], node_config_feat, -1.0), -1.0)
  config_states = tf.where(configured[:, tf.newaxis, tf.newaxis],
                           tf.gather(slot_major(arrays["row_states"], 0.0), op_slot), 0.0)  # (N, C, units)
  values = tf.gather(layout_features.layout_categories(rows) - 1, op_slot)  # (N, C, 18), -1 unset
  joined = [config_states, tf.broadcast_to(tf.cast(configured, tf.float32)[:, tf.newaxis, tf.newaxis],
                                           [nodes, configs, 1])]
  if "copies" in layer.encodings:
    joined.append(_edge_copy_counts(graph, values, configured))
  states = tf.nn.relu(layer._context(arrays["context"])[:, tf.newaxis, :] +  # pylint: disable=protected-access
                      layer._joined(tf.concat(joined, axis=-1)))  # pylint: disable=protected-access
  for index, round_ in enumerate(layer._rounds):  # pylint: disable=protected-access
    states = _round(round_, graph, states)
    if layer._norms:  # pylint: disable=protected-access
      states = _graph_norm(layer._norms[index], graph, states)  # pylint: disable=protected-access
  per_op = tf.squeeze(layer._score(layer._hidden(states)), -1)  # (N, C)  pylint: disable=protected-access
  scores = op_sum(graph.mask(per_op))[0]
  return tf.where(tf.range(configs) < arrays["num_configs"], scores, 0.0)  # filler configs: 0, not noise
