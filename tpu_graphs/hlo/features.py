"""Feature vectors of the TpuGraphs format, computed from XLA protos.

* Node features (140 per HLO instruction): what the instruction is and how it is shaped, in the
  release's column order (see NODE_FEATURE_NAMES): root flag, element size, one-hot element
  type, shape dimensions, parameter number, `dimensions` attribute, window, convolution
  dimension numbers, group counts, slice / dynamic-slice / padding attributes, stability flag and
  the result layout's minor-to-major order. Fields an instruction does not have are zero; a
  dimension sequence is its first k values (zero padded), often followed by its sum and product
  (the product of an empty sequence is 1).
* Tile config features (24 per config): kernel, output and input tile bounds, 6 values + sum +
  product each (here an empty sequence has product 0).
* Layout config features (18 per configurable node): the minor-to-major order of up to 3
  tensors of the node, 6 dimensions each, -1 where unset.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Sequence

import numpy as np
from tensorflow.compiler.xla import xla_data_pb2

_TYPE = xla_data_pb2.PrimitiveType
# The one-hot element types, in column order.
ELEMENT_TYPES = (
    ("invalid_type", _TYPE.PRIMITIVE_TYPE_INVALID), ("pred", _TYPE.PRED), ("s8", _TYPE.S8),
    ("s16", _TYPE.S16), ("s32", _TYPE.S32), ("s64", _TYPE.S64), ("u8", _TYPE.U8),
    ("u16", _TYPE.U16), ("u32", _TYPE.U32), ("u64", _TYPE.U64), ("f16", _TYPE.F16),
    ("f32", _TYPE.F32), ("f64", _TYPE.F64), ("bf16", _TYPE.BF16), ("c64", _TYPE.C64),
    ("c128", _TYPE.C128), ("tuple", _TYPE.TUPLE), ("opaque_type", _TYPE.OPAQUE_TYPE),
    ("token", _TYPE.TOKEN))
_ELEMENT_TYPE_COLUMN = {element_type: column for column, (_, element_type) in enumerate(ELEMENT_TYPES)}

LAYOUT_MAX_TENSORS = 3
LAYOUT_MAX_DIMS = 6


def _leading(values: Sequence[int], count: int) -> list[float]:
  """The first `count` values, zero padded."""
  head = [float(v) for v in values[:count]]
  return head + [0.0] * (count - len(head))


def _with_sum_product(values: Sequence[int], count: int, empty_product: float = 1.0) -> list[float]:
  """`count` leading values, then their sum and product (over all values, not just the leading)."""
  values = list(values)
  product = float(math.prod(values)) if values else empty_product
  return _leading(values, count) + [float(sum(values)), product]


def _bools(values: Sequence[bool], count: int) -> list[float]:
  """`count` leading flags as 0/1, then how many are true and how many false."""
  values = list(values)
  trues = sum(1 for v in values if v)
  return _leading([1 if v else 0 for v in values], count) + [float(trues), float(len(values) - trues)]


def _numbered(prefix: str, count: int, aggregates: Iterable[str] = ("sum", "product")) -> list[str]:
  return [f"{prefix}_{i}" for i in range(count)] + [f"{prefix}_{a}" for a in aggregates]


def _one_hot_element_type(element_type: int) -> list[float]:
  row = [0.0] * len(ELEMENT_TYPES)
  column = _ELEMENT_TYPE_COLUMN.get(element_type)
  if column is not None:
    row[column] = 1.0
  return row


def _convolution_dimension_numbers(numbers) -> list[float]:
  return ([float(numbers.input_batch_dimension), float(numbers.input_feature_dimension)]
          + _leading(numbers.input_spatial_dimensions, 4)
          + [float(numbers.kernel_input_feature_dimension), float(numbers.kernel_output_feature_dimension)]
          + _leading(numbers.kernel_spatial_dimensions, 4)
          + [float(numbers.output_batch_dimension), float(numbers.output_feature_dimension)])


_WINDOW_FIELDS = ("size", "stride", "padding_low", "padding_high", "window_dilation", "base_dilation")


def _window(window) -> list[float]:
  dims = window.dimensions
  row = []
  for field in _WINDOW_FIELDS:
    row += _with_sum_product([getattr(d, field) for d in dims], 6)
  return row + _bools([d.window_reversal for d in dims], 6)


def _slice_dimensions(slices) -> list[float]:
  return (_with_sum_product([s.start for s in slices], 2) + _with_sum_product([s.stride for s in slices], 2)
          + _with_sum_product([s.limit for s in slices], 2))


def _padding(padding_config) -> list[float]:
  dims = padding_config.dimensions
  return (_with_sum_product([d.edge_padding_low for d in dims], 2)
          + _with_sum_product([d.edge_padding_high for d in dims], 2))


# (column names, values of an instruction given whether it is its computation's root), in order.
_NODE_FEATURE_GROUPS: tuple[tuple[list[str], Callable], ...] = (
    (["is_root"], lambda inst, is_root: [1.0 if is_root else 0.0]),
    (["element_size_in_bits"], lambda inst, is_root: [0.0]),
    ([f"shape_element_type_is_{name}" for name, _ in ELEMENT_TYPES],
     lambda inst, is_root: _one_hot_element_type(inst.shape.element_type)),
    (_numbered("shape_dimensions", 6), lambda inst, is_root: _with_sum_product(inst.shape.dimensions, 6)),
    (["shape_tuple_shapes_size"], lambda inst, is_root: [float(len(inst.shape.tuple_shapes))]),
    (["parameter_number"], lambda inst, is_root: [float(inst.parameter_number)]),
    (_numbered("dimensions", 6, ()), lambda inst, is_root: _leading(inst.dimensions, 6)),
    ([name for field in _WINDOW_FIELDS for name in _numbered(f"window_{field}", 6)]
     + _numbered("window_window_reversal", 6, ("true_count", "false_count")),
     lambda inst, is_root: _window(inst.window)),
    (["convolution_dim_numbers_input_batch_dim", "convolution_dim_numbers_input_feature_dim"]
     + _numbered("convolution_dim_numbers_input_spatial_dims", 4, ())
     + ["convolution_dim_numbers_kernel_input_feature_dim", "convolution_dim_numbers_kernel_output_feature_dim"]
     + _numbered("convolution_dim_numbers_kernel_spatial_dims", 4, ())
     + ["convolution_dim_numbers_output_batch_dim", "convolution_dim_numbers_output_feature_dim"],
     lambda inst, is_root: _convolution_dimension_numbers(inst.convolution_dimension_numbers)),
    (["feature_group_count", "batch_group_count"],
     lambda inst, is_root: [float(inst.feature_group_count), float(inst.batch_group_count)]),
    (_numbered("slice_dims_start", 2) + _numbered("slice_dims_stride", 2) + _numbered("slice_dims_limit", 2),
     lambda inst, is_root: _slice_dimensions(inst.slice_dimensions)),
    (_numbered("dynamic_slice_sizes", 2), lambda inst, is_root: _with_sum_product(inst.dynamic_slice_sizes, 2)),
    (_numbered("padding_config_edge_padding_low", 2) + _numbered("padding_config_edge_padding_high", 2),
     lambda inst, is_root: _padding(inst.padding_config)),
    (["is_stable"], lambda inst, is_root: [1.0 if inst.is_stable else 0.0]),
    (_numbered("layout_minor_to_major", 6, ()),
     lambda inst, is_root: _leading(inst.shape.layout.minor_to_major, 6)),
)

NODE_FEATURE_NAMES: tuple[str, ...] = tuple(name for names, _ in _NODE_FEATURE_GROUPS for name in names)


def node_features(instruction, is_root: bool) -> list[float]:
  """The 140 feature values of one HloInstructionProto, in NODE_FEATURE_NAMES order."""
  row = []
  for _, values in _NODE_FEATURE_GROUPS:
    row += values(instruction, is_root)
  return row


TILE_CONFIG_FEATURE_NAMES: tuple[str, ...] = tuple(
    _numbered("kernel_bounds", 6) + _numbered("output_bounds", 6) + _numbered("input_bounds", 6))


def tile_config_features(tile_size_config) -> np.ndarray:
  """(24,) float32 features of a tpu_graphs.TileSizeConfig, in TILE_CONFIG_FEATURE_NAMES order."""
  row = []
  for bounds in (tile_size_config.kernel_bounds, tile_size_config.output_bounds, tile_size_config.input_bounds):
    row += _with_sum_product(bounds, 6, empty_product=0.0)
  return np.asarray(row, np.float32)


class LayoutConfigError(ValueError):
  """A layout configuration cannot be encoded in 18 features."""


def layout_config_features(layout_config) -> np.ndarray:
  """(nc, 18) float32 features of a tpu_graphs.LayoutConfig, one row per configured node.

  Row j holds tensor t's minor-to-major dims in columns 6t..6t+5 (dims past 6 dropped); -1 pads
  tensors and dims that are not set.
  """
  rows = np.full((len(layout_config.nodes), LAYOUT_MAX_TENSORS * LAYOUT_MAX_DIMS), -1.0, np.float32)
  for j, node in enumerate(layout_config.nodes):
    if len(node.tensors) > LAYOUT_MAX_TENSORS:
      raise LayoutConfigError(f"configurable node {j} sets {len(node.tensors)} tensor layouts, at most "
                              f"{LAYOUT_MAX_TENSORS} fit the format")
    for t, tensor in enumerate(node.tensors):
      dims = list(tensor.dims)[:LAYOUT_MAX_DIMS]
      rows[j, t * LAYOUT_MAX_DIMS:t * LAYOUT_MAX_DIMS + len(dims)] = dims
  return rows
