"""docs/features.md: generated from the featurizer's own tables, current, numbered as the release
numbers its columns, and true of what the featurizer computes."""

import pathlib
import re
import sys

import numpy as np
import pytest
from tensorflow.compiler.xla import xla_data_pb2
from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.hlo import feature_spec, features, tuning_pb2

DOCUMENT = pathlib.Path(__file__).resolve().parents[2] / feature_spec.DOCUMENT_PATH
# Section title prefix -> what the section documents.
SECTIONS = {"node": "## Node features", "tile": "## Tile config values", "layout": "## Layout config values"}


def documented_columns(kind: str) -> dict[int, str]:
  """{index: name} of one table of docs/features.md, as a reader of the file sees it."""
  text = DOCUMENT.read_text()
  section = text.split(SECTIONS[kind], 1)[1].split("\n## ", 1)[0]
  return {int(index): name for index, name in re.findall(r"^\| (\d+) \| `(\w+)` \|", section, re.MULTILINE)}


def test_the_document_is_what_the_featurizer_tables_render():
  assert DOCUMENT.read_text() == feature_spec.render(), (
      "docs/features.md is stale: run .venv/bin/python -m tpu_graphs.hlo.feature_spec > docs/features.md")


@pytest.mark.parametrize("kind, width", [("node", 140), ("tile", 24), ("layout", 18)])
def test_every_column_is_documented_once_in_order(kind, width):
  assert list(documented_columns(kind)) == list(range(width))


# Indices of the public release's description of its columns (the TpuGraphs README), which the
# numbering must keep whatever the code's tables say.
RELEASE_INDICES = {
    "node": {0: "is_root", 1: "element_size_in_bits", 2: "shape_element_type_is_invalid_type",
             15: "shape_element_type_is_bf16", 20: "shape_element_type_is_token", 21: "shape_dimensions_0",
             27: "shape_dimensions_sum", 28: "shape_dimensions_product", 29: "shape_tuple_shapes_size",
             30: "parameter_number", 31: "dimensions_0", 37: "window_size_0", 45: "window_stride_0",
             69: "window_window_dilation_0", 77: "window_base_dilation_0", 85: "window_window_reversal_0",
             92: "window_window_reversal_false_count", 93: "convolution_dim_numbers_input_batch_dim",
             106: "convolution_dim_numbers_output_feature_dim", 107: "feature_group_count", 108: "batch_group_count",
             109: "slice_dims_start_0", 120: "slice_dims_limit_product", 121: "dynamic_slice_sizes_0",
             125: "padding_config_edge_padding_low_0", 132: "padding_config_edge_padding_high_product",
             133: "is_stable", 134: "layout_minor_to_major_0", 139: "layout_minor_to_major_5"},
    "tile": {0: "kernel_bounds_0", 7: "kernel_bounds_product", 8: "output_bounds_0", 16: "input_bounds_0",
             23: "input_bounds_product"},
    "layout": {0: "output_layout_0", 6: "input_layout_0", 12: "kernel_layout_0", 17: "kernel_layout_5"},
}


@pytest.mark.parametrize("kind", sorted(RELEASE_INDICES))
def test_documented_indices_are_the_releases(kind):
  columns = documented_columns(kind)
  assert {index: columns[index] for index in RELEASE_INDICES[kind]} == RELEASE_INDICES[kind]


def every_field_instruction() -> hlo_pb2.HloInstructionProto:
  """An instruction with every field the node features read set, to values that tell columns apart
  (no real opcode sets them all; the features do not look at the opcode)."""
  inst = hlo_pb2.HloInstructionProto(opcode="convolution", parameter_number=5, dimensions=[3, 1],
                                     feature_group_count=4, batch_group_count=2, dynamic_slice_sizes=[4, 6, 2],
                                     is_stable=True)
  inst.shape.element_type = xla_data_pb2.BF16
  inst.shape.dimensions.extend([2, 8, 8, 16, 1, 1, 3])
  inst.shape.layout.minor_to_major.extend([6, 5, 4, 3, 2, 1, 0])
  inst.shape.tuple_shapes.add()
  inst.shape.tuple_shapes.add()
  inst.window.dimensions.add(size=3, stride=2, padding_low=1, padding_high=0, window_dilation=1, base_dilation=2,
                             window_reversal=True)
  inst.window.dimensions.add(size=5, stride=1, padding_low=2, padding_high=2, window_dilation=2, base_dilation=1)
  numbers = inst.convolution_dimension_numbers
  numbers.input_batch_dimension, numbers.input_feature_dimension = 1, 4
  numbers.input_spatial_dimensions.extend([2, 3])
  numbers.kernel_input_feature_dimension, numbers.kernel_output_feature_dimension = 5, 6
  numbers.kernel_spatial_dimensions.extend([7, 8])
  numbers.output_batch_dimension, numbers.output_feature_dimension = 9, 10
  for start, limit, stride in ((1, 7, 2), (0, 4, 1), (3, 5, 1)):
    inst.slice_dimensions.add(start=start, limit=limit, stride=stride)
  for low, high in ((1, 2), (3, 0)):
    inst.padding_config.dimensions.add(edge_padding_low=low, edge_padding_high=high)
  return inst


# Each nonzero column of every_field_instruction() as the document defines it, worked by hand;
# every other column is 0.
EVERY_FIELD_VALUES = {
    "is_root": 1, "shape_element_type_is_bf16": 1,
    **dict(zip([f"shape_dimensions_{i}" for i in range(6)], [2, 8, 8, 16, 1, 1])),
    "shape_dimensions_sum": 39, "shape_dimensions_product": 6144, "shape_tuple_shapes_size": 2,
    "parameter_number": 5, "dimensions_0": 3, "dimensions_1": 1,
    "window_size_0": 3, "window_size_1": 5, "window_size_sum": 8, "window_size_product": 15,
    "window_stride_0": 2, "window_stride_1": 1, "window_stride_sum": 3, "window_stride_product": 2,
    "window_padding_low_0": 1, "window_padding_low_1": 2, "window_padding_low_sum": 3,
    "window_padding_low_product": 2, "window_padding_high_1": 2, "window_padding_high_sum": 2,
    "window_window_dilation_0": 1, "window_window_dilation_1": 2, "window_window_dilation_sum": 3,
    "window_window_dilation_product": 2, "window_base_dilation_0": 2, "window_base_dilation_1": 1,
    "window_base_dilation_sum": 3, "window_base_dilation_product": 2,
    "window_window_reversal_0": 1, "window_window_reversal_true_count": 1, "window_window_reversal_false_count": 1,
    "convolution_dim_numbers_input_batch_dim": 1, "convolution_dim_numbers_input_feature_dim": 4,
    "convolution_dim_numbers_input_spatial_dims_0": 2, "convolution_dim_numbers_input_spatial_dims_1": 3,
    "convolution_dim_numbers_kernel_input_feature_dim": 5, "convolution_dim_numbers_kernel_output_feature_dim": 6,
    "convolution_dim_numbers_kernel_spatial_dims_0": 7, "convolution_dim_numbers_kernel_spatial_dims_1": 8,
    "convolution_dim_numbers_output_batch_dim": 9, "convolution_dim_numbers_output_feature_dim": 10,
    "feature_group_count": 4, "batch_group_count": 2,
    "slice_dims_start_0": 1, "slice_dims_start_sum": 4, "slice_dims_stride_0": 2, "slice_dims_stride_1": 1,
    "slice_dims_stride_sum": 4, "slice_dims_stride_product": 2, "slice_dims_limit_0": 7, "slice_dims_limit_1": 4,
    "slice_dims_limit_sum": 16, "slice_dims_limit_product": 140,
    "dynamic_slice_sizes_0": 4, "dynamic_slice_sizes_1": 6, "dynamic_slice_sizes_sum": 12,
    "dynamic_slice_sizes_product": 48,
    "padding_config_edge_padding_low_0": 1, "padding_config_edge_padding_low_1": 3,
    "padding_config_edge_padding_low_sum": 4, "padding_config_edge_padding_low_product": 3,
    "padding_config_edge_padding_high_0": 2, "padding_config_edge_padding_high_sum": 2,
    "is_stable": 1, **dict(zip([f"layout_minor_to_major_{i}" for i in range(6)], [6, 5, 4, 3, 2, 1])),
}


def expected_row(kind: str, nonzero: dict, default: float = 0.0) -> list[float]:
  """The documented columns of one table filled with `nonzero` by name, `default` elsewhere."""
  assert set(nonzero) <= set(documented_columns(kind).values())  # no value for a column the document lacks
  return [nonzero.get(name, default) for _, name in sorted(documented_columns(kind).items())]


def test_node_features_of_an_instruction_are_what_the_document_defines():
  row = features.node_features(every_field_instruction(), is_root=True)
  np.testing.assert_array_equal(row, expected_row("node", EVERY_FIELD_VALUES))


def test_tile_config_values_are_what_the_document_defines():
  row = features.tile_config_features(tuning_pb2.TileSizeConfig(kernel_bounds=[1, 2, 3, 4, 5, 6, 7],
                                                                 output_bounds=[2, 26]))
  values = {**{f"kernel_bounds_{i}": i + 1 for i in range(6)}, "kernel_bounds_sum": 28,
            "kernel_bounds_product": 5040, "output_bounds_0": 2, "output_bounds_1": 26, "output_bounds_sum": 28,
            "output_bounds_product": 52}  # no input bounds: sum and product 0
  np.testing.assert_array_equal(row, expected_row("tile", values))


def test_layout_config_values_are_what_the_document_defines():
  config = tuning_pb2.LayoutConfig()
  node = config.nodes.add()
  node.tensors.add(dims=[4, 0])
  node.tensors.add(dims=[0, 1, 2, 3, 4, 5, 6])
  values = {"output_layout_0": 4, "output_layout_1": 0, **{f"input_layout_{i}": i for i in range(6)}}
  np.testing.assert_array_equal(features.layout_config_features(config)[0], expected_row("layout", values, -1.0))


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
