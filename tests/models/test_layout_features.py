"""Layout cost features on hand-computed cases: a transposed layout, a padded minor dimension, a
mismatched producer/consumer pair, and the categories the model embeds."""

import math
import sys

import numpy as np
import pytest
import tensorflow as tf

from tpu_graphs.data import records
from tpu_graphs.hlo import features
from tpu_graphs.models import layout_features, layout_model

UNSET = [-1] * 6


def _op_features(shape, layout) -> np.ndarray:
  """One op's 140 features with the given shape and default minor-to-major order, zero padded."""
  row = np.zeros(140, np.float32)
  row[features.SHAPE_COLUMNS] = list(shape) + [0] * (6 - len(shape))
  row[layout_features.DEFAULT_LAYOUT_COLUMNS] = list(layout) + [0] * (6 - len(layout))
  return row


def _layout(*dims) -> list:
  return list(dims) + [-1] * (6 - len(dims))


def test_default_layout_is_cut_to_the_rank_the_shape_gives():
  node_feat = np.stack([_op_features([2, 100], [1, 0]), _op_features([], [])])
  np.testing.assert_array_equal(layout_features.default_layouts(tf.constant(node_feat)).numpy(),
                                [_layout(1, 0), UNSET])


def test_transposed_layout_puts_the_other_dimension_minor_most():
  shape = tf.constant([[2.0, 100.0, 0, 0, 0, 0]] * 2)
  sizes = layout_features.minor_dimension_sizes(shape, tf.constant([_layout(1, 0), _layout(0, 1)])).numpy()
  np.testing.assert_array_equal(sizes, [[100, 2], [2, 100]])


def test_padding_waste_of_a_small_minor_dimension_under_8_by_128_tiles():
  waste = layout_features.tiling_padding_waste(tf.constant([[100.0, 2.0], [2.0, 100.0], [256.0, 16.0]])).numpy()
  np.testing.assert_allclose(waste, [math.log(128 / 100) + math.log(8 / 2), math.log(128 / 2) + math.log(104 / 100),
                                     0.0], rtol=1e-6)


def test_layouts_differ_only_where_both_are_set():
  a = tf.constant([_layout(1, 0), _layout(1, 0), _layout(1, 0), _layout(4, 0)])
  b = tf.constant([_layout(1, 0), _layout(0, 1), UNSET, _layout(4, 3, 2, 1, 0)])
  np.testing.assert_array_equal(layout_features.same_layout(a, b).numpy(), [True, False, False, False])
  np.testing.assert_array_equal(layout_features.layout_change(a, b).numpy(), [0, 1, 0, 1])


def test_cost_features_of_a_transposed_output_on_a_padded_minor_dimension():
  row = tf.constant([_layout(0, 1) + _layout(1, 0) + UNSET], tf.float32)  # output transposed, input 0 default
  costs = layout_features.config_cost_features(row, tf.constant([[2.0, 100.0, 0, 0, 0, 0]]),
                                               tf.constant([_layout(1, 0)]), tf.constant([[-1, -1]])).numpy()[0]
  assert costs.shape == (layout_features.NUM_COST_FEATURES,)
  np.testing.assert_allclose(costs, [1, 0, 1, math.log(2), math.log(100),
                                     math.log(128 / 2) + math.log(104 / 100), 1, 0, 0, 0, 0], rtol=1e-6)


def test_matrix_unit_roles_of_a_weight_gradient_convolution_follow_its_dimension_numbers():
  # unet3d's weight-gradient convolutions: output features dim 4, input features (the batch) dim 0.
  feat = np.zeros((2, 140), np.float32)
  feat[:, layout_features.OUTPUT_FEATURE_COLUMN] = 4
  dims = layout_features.matrix_feature_dims(tf.constant(feat), tf.constant([True, False])).numpy()
  np.testing.assert_array_equal(dims, [[4, 0], [-1, -1]])
  rows = tf.constant([_layout(3, 4) + _layout(0, 4) + UNSET, _layout(4, 3) + _layout(4, 0) + UNSET,
                      _layout(4, 3) + _layout(0, 4) + UNSET], tf.float32)
  shape = tf.constant([[3.0, 3, 3, 1, 32, 0]])
  costs = layout_features.config_cost_features(rows, shape, tf.constant([_layout(4, 3, 2, 1, 0)]),
                                               tf.constant(dims[:1])).numpy()
  # Row 0: the input streams (batch minor-most) and the output's size-1 dimension is minor-most, so
  # the lanes are forced onto it: 1 of 128 filled; rows 1-2: the 32 output features fill 32.
  np.testing.assert_allclose(costs[:, -4:], [[0, 1, 1, math.log(1 / 128)], [1, 0, 0, math.log(32 / 128)],
                                              [1, 1, 0, math.log(32 / 128)]], rtol=1e-6)
  # The matrix unit writes a convolution's result tiles itself: no minor sizes or tile padding.
  np.testing.assert_array_equal(costs[:, 3:6], np.zeros((3, 3)))
  other_op = layout_features.config_cost_features(rows, shape, tf.constant([_layout(4, 3, 2, 1, 0)]),
                                                  tf.constant(dims[1:])).numpy()
  np.testing.assert_array_equal(other_op[:, -4:], np.zeros((3, 4)))
  assert (other_op[0, 3:6] != 0).any()


def test_a_producer_whose_layout_the_consumer_does_not_ask_for_is_a_copy():
  producer = tf.constant([_layout(1, 0)] * 3)
  consumer = tf.constant([UNSET + _layout(0, 1) + UNSET, UNSET + _layout(0, 1) + _layout(1, 0), UNSET * 3])
  np.testing.assert_array_equal(layout_features.edge_copies(producer, consumer).numpy(), [1, 0, 0])


def test_copy_counts_of_a_mismatched_producer_consumer_pair_in_a_graph():
  # Ops 0 -> 1 -> 2, op 0 not configurable (default layout [1, 0]), ops 1 and 2 configurable.
  node_feat = np.stack([_op_features([2, 100], [1, 0])] * 3)
  edges = np.array([[1, 0], [2, 1]])  # [consumer, producer]
  agree = _layout(1, 0) + _layout(1, 0) + UNSET
  transposed = _layout(0, 1) + _layout(1, 0) + UNSET  # op 1 reads [1, 0] but writes [0, 1]
  configs = np.array([[agree, agree], [transposed, agree]], np.float32)  # (2 configs, 2 ops, 18)
  graph = records.graph_tensor_from_arrays("layout", node_feat, np.zeros(3, np.uint8), edges,
                                           node_config_ids=np.array([1, 2]), node_config_feat=configs)
  values, configured = layout_model.op_config_values(graph)
  np.testing.assert_array_equal(configured.numpy(), [[False, False], [True, True], [True, True]])
  copies = layout_model.edge_copy_counts(graph, values, configured,
                                         layout_features.default_layouts(tf.constant(node_feat))).numpy()
  # Config 0: no copies. Config 1: op 2 asks [1, 0] of op 1, which writes [0, 1].
  np.testing.assert_array_equal(copies[:, 0], [[0, 0], [0, 0], [0, 0]])
  np.testing.assert_array_equal(copies[:, 1], [[0, 0], [0, 1], [1, 0]])


def test_layout_values_become_categories_with_unset_as_zero():
  np.testing.assert_array_equal(layout_features.layout_categories(tf.constant([-1.0, 0.0, 5.0])).numpy(), [0, 1, 6])


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
