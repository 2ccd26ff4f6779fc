"""Graph Segment Training (Cao et al., NeurIPS 2023) around a layout scorer: whole programs train
and score in the memory of one segment of their ops (layout_model.build_layout_model's
`segment_size`)."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.data import graphs
from tpu_graphs.models import config_lists, layout_preprocessing


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
