"""Feature vectors: column layout and values for hand-built XLA protos."""

import sys

import numpy as np
import pytest
from tensorflow.compiler.xla import xla_data_pb2
from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.data import graphs
from tpu_graphs.hlo import features
from tpu_graphs.hlo import tuning_pb2


def column(name: str) -> int:
  return features.NODE_FEATURE_NAMES.index(name)


def test_widths_match_the_format():
  assert len(features.NODE_FEATURE_NAMES) == graphs.NODE_FEATURE_WIDTH
  assert len(set(features.NODE_FEATURE_NAMES)) == graphs.NODE_FEATURE_WIDTH
  assert len(features.TILE_CONFIG_FEATURE_NAMES) == graphs.TILE_CONFIG_FEATURE_WIDTH
  with pytest.raises(AttributeError):  # the one table of the columns cannot be changed by its readers
    features.NODE_FEATURE_GROUPS[0].names = ("changed",)


def test_convolution_features():
  conv = hlo_pb2.HloInstructionProto(opcode="convolution", feature_group_count=1, batch_group_count=1)
  conv.shape.element_type = xla_data_pb2.BF16
  conv.shape.dimensions.extend([2, 8, 8, 16])
  conv.shape.layout.minor_to_major.extend([3, 0, 2, 1])
  for size in (3, 3):
    conv.window.dimensions.add(size=size, stride=1, padding_low=1, padding_high=1, window_dilation=1,
                               base_dilation=1)
  conv.convolution_dimension_numbers.input_feature_dimension = 3
  row = np.asarray(features.node_features(conv, is_root=True))
  assert row[column("is_root")] == 1
  assert row[column("shape_element_type_is_bf16")] == 1 and row[2:21].sum() == 1
  assert row[column("shape_dimensions_sum")] == 34 and row[column("shape_dimensions_product")] == 2048
  assert row[column("window_size_product")] == 9 and row[column("window_window_reversal_false_count")] == 2
  assert row[column("convolution_dim_numbers_input_feature_dim")] == 3
  assert row[column("layout_minor_to_major_0")] == 3 and row[column("layout_minor_to_major_3")] == 1
  assert row[features.SHAPE_COLUMNS].tolist() == [2, 8, 8, 16, 0, 0]  # the result's shape, zero padded to rank 6


def test_every_convolution_dimension_number_has_its_own_column():
  # A 3-d convolution whose sixteen dimension numbers are all different, so that two columns
  # swapped, shifted or dropped show; a fourth spatial entry is absent and reads 0.
  conv = hlo_pb2.HloInstructionProto(opcode="convolution")
  numbers = conv.convolution_dimension_numbers
  numbers.input_batch_dimension, numbers.input_feature_dimension = 11, 12
  numbers.input_spatial_dimensions.extend([13, 14, 15])
  numbers.kernel_input_feature_dimension, numbers.kernel_output_feature_dimension = 21, 22
  numbers.kernel_spatial_dimensions.extend([23, 24, 25])
  numbers.output_batch_dimension, numbers.output_feature_dimension = 31, 32
  numbers.output_spatial_dimensions.extend([33, 34, 35])  # not a feature of the release
  row = np.asarray(features.node_features(conv, is_root=False))
  prefix = "convolution_dim_numbers_"
  expected = {"input_batch_dim": 11, "input_feature_dim": 12, "input_spatial_dims_0": 13,
              "input_spatial_dims_1": 14, "input_spatial_dims_2": 15, "input_spatial_dims_3": 0,
              "kernel_input_feature_dim": 21, "kernel_output_feature_dim": 22, "kernel_spatial_dims_0": 23,
              "kernel_spatial_dims_1": 24, "kernel_spatial_dims_2": 25, "kernel_spatial_dims_3": 0,
              "output_batch_dim": 31, "output_feature_dim": 32}
  assert {name[len(prefix):]: row[column(name)] for name in features.NODE_FEATURE_NAMES
          if name.startswith(prefix)} == expected
  assert np.count_nonzero(row >= 11) == 12  # no dimension number lands in another column too


def test_absent_sequences_have_product_one_and_zero_sum():
  scalar = hlo_pb2.HloInstructionProto(opcode="constant")
  row = np.asarray(features.node_features(scalar, is_root=False))
  for sequence in ("shape_dimensions", "window_size", "slice_dims_limit", "padding_config_edge_padding_low"):
    assert row[column(f"{sequence}_sum")] == 0 and row[column(f"{sequence}_product")] == 1, sequence


def test_tile_config_features():
  config = tuning_pb2.TileSizeConfig(kernel_bounds=[1, 2, 3, 4, 5, 6, 7], output_bounds=[2, 26])
  row = features.tile_config_features(config)
  np.testing.assert_array_equal(row[:8], [1, 2, 3, 4, 5, 6, 28, 5040])
  np.testing.assert_array_equal(row[8:16], [2, 26, 0, 0, 0, 0, 28, 52])
  np.testing.assert_array_equal(row[16:], [0] * 8)  # an empty sequence has product 0 here


def test_layout_config_features_pad_with_minus_one():
  config = tuning_pb2.LayoutConfig()
  node = config.nodes.add()
  node.tensors.add(dims=[4, 0])
  node.tensors.add(dims=[0, 1, 2, 3, 4, 5, 6])
  config.nodes.add()
  rows = features.layout_config_features(config)
  assert rows.shape == (2, 18) and rows.dtype == np.float32
  np.testing.assert_array_equal(rows[0], [4, 0, -1, -1, -1, -1, 0, 1, 2, 3, 4, 5] + [-1] * 6)
  np.testing.assert_array_equal(rows[1], [-1] * 18)


def test_layout_config_with_four_tensors_is_rejected():
  config = tuning_pb2.LayoutConfig()
  node = config.nodes.add()
  for _ in range(4):
    node.tensors.add(dims=[0])
  with pytest.raises(features.LayoutConfigError, match="4 tensor layouts"):
    features.layout_config_features(config)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
