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

import dataclasses
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
# Layout dimensions a config sets per tensor, minor-most first; the rest stay -1 (unconstrained), as
# in the real files (unet3d's rank-5 tensors: (3, 4, -1, -1, -1, -1)).
CONFIGURED_LAYOUT_DIMS = 2


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


@dataclasses.dataclass(frozen=True)
class FeatureGroup:
  """Consecutive feature columns computed together from one part of an XLA proto.

  The one table of what each column is: the featurizer computes its values from it, and
  docs/features.md is generated from it (tpu_graphs/hlo/feature_spec.py), so the documented index,
  name and meaning of a column cannot drift from the code that fills it.

  names, meanings: one entry per column, in column order.
  source: the proto field(s) read, e.g. "shape.dimensions" of an HloInstructionProto.
  units: what the numbers count (elements, dimension indices, a 0/1 flag, ...).
  values: the proto (and for node features whether the instruction is its computation's root)
    -> one float per column.
  """
  names: tuple[str, ...]
  meanings: tuple[str, ...]
  source: str
  units: str
  values: Callable[..., list[float]]


def _sequence(prefix: str, entry: str, whole: str, count: int, aggregates: Sequence[str] = ("sum", "product"),
              empty_product: float = 1.0) -> tuple[tuple[str, ...], tuple[str, ...]]:
  """(names, meanings) of a sequence's columns: its first `count` entries (prefix_0 ..; `entry`
  describes entry {i}), then aggregates over all of its entries (`whole` names them): "sum",
  "product", or for flags "true_count" and "false_count"."""
  names = [f"{prefix}_{i}" for i in range(count)] + [f"{prefix}_{a}" for a in aggregates]
  meanings = [f"{entry.format(i=i)}; 0 if there is no entry {i}" for i in range(count)]
  aggregate_meanings = {
      "sum": f"sum of {whole} (all of them, not only the first {count}); 0 if there are none",
      "product": f"product of {whole} (all of them); {empty_product:g} if there are none",
      "true_count": f"number of {whole} that are true",
      "false_count": f"number of {whole} that are false"}
  return tuple(names), tuple(meanings) + tuple(aggregate_meanings[a] for a in aggregates)


def _group(columns: tuple[tuple[str, ...], tuple[str, ...]], source: str, units: str,
           values: Callable[..., list[float]]) -> FeatureGroup:
  return FeatureGroup(columns[0], columns[1], source, units, values)


_WINDOW_MEANINGS = {"size": "window size", "stride": "window stride", "padding_low": "padding before the base area",
                    "padding_high": "padding after the base area",
                    "window_dilation": "window dilation (1 = none: d - 1 holes between window elements)",
                    "base_dilation": "base dilation (1 = none: d - 1 holes between base elements)"}


def _window_groups() -> list[FeatureGroup]:
  """The window's six per-dimension fields (convolution, reduce-window, select-and-scatter), then
  its reversal flags; one group each."""
  groups = []
  for field in _WINDOW_FIELDS:
    groups.append(_group(
        _sequence(f"window_{field}", f"{_WINDOW_MEANINGS[field]} in window dimension {{i}} "
                  f"(`window.dimensions[{{i}}].{field}`)", f"the {field} values of every window dimension", 6),
        f"window.dimensions[*].{field}", "dilation factor" if "dilation" in field else "elements",
        lambda inst, is_root, field=field: _with_sum_product([getattr(d, field) for d in inst.window.dimensions], 6)))
  groups.append(_group(
      _sequence("window_window_reversal", "1 if window dimension {i} is reversed "
                "(`window.dimensions[{i}].window_reversal`), else 0", "the window dimensions' reversal flags", 6,
                ("true_count", "false_count")),
      "window.dimensions[*].window_reversal", "0/1 flag; count",
      lambda inst, is_root: _bools([d.window_reversal for d in inst.window.dimensions], 6)))
  return groups


_CONVOLUTION_COLUMNS = (
    ("convolution_dim_numbers_input_batch_dim", "input_batch_dimension: the input's batch dimension"),
    ("convolution_dim_numbers_input_feature_dim", "input_feature_dimension: the input's feature dimension"),
    *((f"convolution_dim_numbers_input_spatial_dims_{i}",
       f"input_spatial_dimensions[{i}]: the input's spatial dimension {i}; 0 if there is no entry {i}")
      for i in range(4)),
    ("convolution_dim_numbers_kernel_input_feature_dim",
     "kernel_input_feature_dimension: the kernel's (rhs) input feature dimension"),
    ("convolution_dim_numbers_kernel_output_feature_dim",
     "kernel_output_feature_dimension: the kernel's (rhs) output feature dimension"),
    *((f"convolution_dim_numbers_kernel_spatial_dims_{i}",
       f"kernel_spatial_dimensions[{i}]: the kernel's spatial dimension {i}; 0 if there is no entry {i}")
      for i in range(4)),
    ("convolution_dim_numbers_output_batch_dim", "output_batch_dimension: the output's batch dimension"),
    ("convolution_dim_numbers_output_feature_dim", "output_feature_dimension: the output's feature dimension"),
)

# The node feature columns, in the release's order (indices 0-139).
NODE_FEATURE_GROUPS: tuple[FeatureGroup, ...] = (
    FeatureGroup(("is_root",), ("1 if the instruction is the root (output) of its computation "
                                "(its id is the computation's root_id), else 0",),
                 "HloComputationProto.root_id", "0/1 flag", lambda inst, is_root: [1.0 if is_root else 0.0]),
    FeatureGroup(("element_size_in_bits",), ("always 0 (the release's extractor no longer fills it)",),
                 "none", "bits", lambda inst, is_root: [0.0]),
    FeatureGroup(tuple(f"shape_element_type_is_{name}" for name, _ in ELEMENT_TYPES),
                 tuple(f"1 if the result's element type (`shape.element_type`) is {name.upper()} "
                       f"(xla.PrimitiveType {number}), else 0" for name, number in ELEMENT_TYPES),
                 "shape.element_type", "0/1 flag (one-hot)",
                 lambda inst, is_root: _one_hot_element_type(inst.shape.element_type)),
    _group(_sequence("shape_dimensions", "size of dimension {i} of the result (`shape.dimensions[{i}]`)",
                     "the result's dimension sizes (a scalar or a tuple has none)", 6), "shape.dimensions", "elements",
           lambda inst, is_root: _with_sum_product(inst.shape.dimensions, 6)),
    FeatureGroup(("shape_tuple_shapes_size",), ("number of elements of a tuple-shaped result "
                                                "(len(shape.tuple_shapes)); 0 for arrays",),
                 "shape.tuple_shapes", "count", lambda inst, is_root: [float(len(inst.shape.tuple_shapes))]),
    FeatureGroup(("parameter_number",), ("the K of a parameter(K) instruction; 0 for every other opcode",),
                 "parameter_number", "parameter index", lambda inst, is_root: [float(inst.parameter_number)]),
    _group(_sequence("dimensions", "`dimensions[{i}]`: a dimension number the instruction acts on (broadcast, reduce, "
                     "transpose, reverse, concatenate, ...)", "", 6, ()),
           "dimensions", "dimension index", lambda inst, is_root: _leading(inst.dimensions, 6)),
    *_window_groups(),
    FeatureGroup(tuple(name for name, _ in _CONVOLUTION_COLUMNS),
                 tuple(f"convolution_dimension_numbers.{meaning}" for _, meaning in _CONVOLUTION_COLUMNS),
                 "convolution_dimension_numbers", "dimension index",
                 lambda inst, is_root: _convolution_dimension_numbers(inst.convolution_dimension_numbers)),
    FeatureGroup(("feature_group_count", "batch_group_count"),
                 ("feature_group_count of a convolution (grouped / depthwise convolution); the proto's 0 where unset",
                  "batch_group_count of a convolution; the proto's 0 where unset"),
                 "feature_group_count, batch_group_count", "count",
                 lambda inst, is_root: [float(inst.feature_group_count), float(inst.batch_group_count)]),
    _group(_sequence("slice_dims_start", "start index of a slice in dimension {i} (`slice_dimensions[{i}].start`)",
                     "the slice's start indices", 2), "slice_dimensions[*].start",
           "elements (index)", lambda inst, is_root: _with_sum_product([d.start for d in inst.slice_dimensions], 2)),
    _group(_sequence("slice_dims_stride", "stride of a slice in dimension {i} (`slice_dimensions[{i}].stride`)",
                     "the slice's strides", 2), "slice_dimensions[*].stride",
           "elements per step", lambda inst, is_root: _with_sum_product([d.stride for d in inst.slice_dimensions], 2)),
    _group(_sequence("slice_dims_limit", "exclusive end index of a slice in dimension {i} (`slice_dimensions[{i}].limit`)",
                     "the slice's end indices", 2),
           "slice_dimensions[*].limit", "elements (index)",
           lambda inst, is_root: _with_sum_product([d.limit for d in inst.slice_dimensions], 2)),
    _group(_sequence("dynamic_slice_sizes", "size of a dynamic slice in dimension {i} (`dynamic_slice_sizes[{i}]`)",
                     "the dynamic slice's sizes", 2),
           "dynamic_slice_sizes", "elements", lambda inst, is_root: _with_sum_product(inst.dynamic_slice_sizes, 2)),
    _group(_sequence("padding_config_edge_padding_low", "padding a pad adds before dimension {i} "
                     "(`padding_config.dimensions[{i}].edge_padding_low`; interior padding is not a feature)",
                     "the low edge paddings", 2),
           "padding_config.dimensions[*].edge_padding_low", "elements",
           lambda inst, is_root: _with_sum_product([d.edge_padding_low for d in inst.padding_config.dimensions], 2)),
    _group(_sequence("padding_config_edge_padding_high", "padding a pad adds after dimension {i} "
                     "(`padding_config.dimensions[{i}].edge_padding_high`)", "the high edge paddings", 2),
           "padding_config.dimensions[*].edge_padding_high", "elements",
           lambda inst, is_root: _with_sum_product([d.edge_padding_high for d in inst.padding_config.dimensions], 2)),
    FeatureGroup(("is_stable",), ("1 if a sort is stable (is_stable), else 0",), "is_stable", "0/1 flag",
                 lambda inst, is_root: [1.0 if inst.is_stable else 0.0]),
    _group(_sequence("layout_minor_to_major", "the dimension at position {i} of the result's minor-to-major layout "
                     "order, position 0 most minor (`shape.layout.minor_to_major[{i}]`)", "", 6, ()),
           "shape.layout.minor_to_major", "dimension index",
           lambda inst, is_root: _leading(inst.shape.layout.minor_to_major, 6)))

NODE_FEATURE_NAMES: tuple[str, ...] = tuple(name for group in NODE_FEATURE_GROUPS for name in group.names)
# The node_feat columns of a node's result shape (zero-padded past its rank).
SHAPE_COLUMNS = slice(NODE_FEATURE_NAMES.index("shape_dimensions_0"),
                      NODE_FEATURE_NAMES.index("shape_dimensions_5") + 1)


def node_features(instruction, is_root: bool) -> list[float]:
  """The 140 feature values of one HloInstructionProto, in NODE_FEATURE_NAMES order."""
  row = []
  for group in NODE_FEATURE_GROUPS:
    row += group.values(instruction, is_root)
  return row


def _bounds_group(field: str, what: str) -> FeatureGroup:
  return _group(_sequence(field, f"{what} in dimension {{i}} (`{field}[{{i}}]`)", f"the {field}", 6, empty_product=0.0),
                f"TileSizeConfig.{field}",
                "elements (tile size)", lambda config: _with_sum_product(getattr(config, field), 6, empty_product=0.0))


# The tile config columns (indices 0-23); input bounds are mostly empty: XLA derives them from the
# output (and kernel) bounds.
TILE_CONFIG_FEATURE_GROUPS: tuple[FeatureGroup, ...] = (
    _bounds_group("kernel_bounds", "tile size of a convolution's kernel (filter)"),
    _bounds_group("output_bounds", "tile size of the kernel's output"),
    _bounds_group("input_bounds", "tile size of the kernel's input (usually unset: XLA derives it)"))
TILE_CONFIG_FEATURE_NAMES: tuple[str, ...] = tuple(name for group in TILE_CONFIG_FEATURE_GROUPS for name in group.names)


def tile_config_features(tile_size_config) -> np.ndarray:
  """(24,) float32 features of a tpu_graphs.TileSizeConfig, in TILE_CONFIG_FEATURE_NAMES order."""
  row = []
  for group in TILE_CONFIG_FEATURE_GROUPS:
    row += group.values(tile_size_config)
  return np.asarray(row, np.float32)


def _layout_group(tensor: int, name: str, what: str) -> FeatureGroup:
  names = tuple(f"{name}_layout_{i}" for i in range(LAYOUT_MAX_DIMS))
  meanings = tuple(f"the dimension at position {i} of the minor-to-major layout order of {what}, position 0 most "
                   f"minor (`tensors[{tensor}].dims[{i}]`); -1 if there is no entry {i} or no such tensor"
                   for i in range(LAYOUT_MAX_DIMS))
  return FeatureGroup(names, meanings, f"LayoutConfig.nodes[j].tensors[{tensor}].dims", "dimension index; -1 unset",
                      lambda node, tensor=tensor: _layout_row(node, tensor))


def _layout_row(node, tensor: int) -> list[float]:
  """One tensor's minor-to-major dims of a NodeLayoutConfig, past 6 dropped, -1 padded."""
  dims = list(node.tensors[tensor].dims)[:LAYOUT_MAX_DIMS] if tensor < len(node.tensors) else []
  return [float(d) for d in dims] + [-1.0] * (LAYOUT_MAX_DIMS - len(dims))


# The layout config columns of one configurable node (indices 0-17): a minor-to-major order for
# each of its first three tensors. The release names them output, input and kernel; the program
# graphs of new code (featurize.program_graph) fill them with the result and the first two operands.
LAYOUT_CONFIG_FEATURE_GROUPS: tuple[FeatureGroup, ...] = (
    _layout_group(0, "output", "the node's result (output)"),
    _layout_group(1, "input", "the node's first operand (input)"),
    _layout_group(2, "kernel", "the node's second operand (a convolution's kernel, a dot's right-hand side)"))
LAYOUT_CONFIG_FEATURE_NAMES: tuple[str, ...] = tuple(
    name for group in LAYOUT_CONFIG_FEATURE_GROUPS for name in group.names)


class LayoutConfigError(ValueError):
  """A layout configuration cannot be encoded in 18 features."""


def layout_config_features(layout_config) -> np.ndarray:
  """(nc, 18) float32 features of a tpu_graphs.LayoutConfig, one row per configured node, in
  LAYOUT_CONFIG_FEATURE_NAMES order.

  Row j holds tensor t's minor-to-major dims in columns 6t..6t+5 (dims past 6 dropped); -1 pads
  tensors and dims that are not set.
  """
  rows = np.empty((len(layout_config.nodes), len(LAYOUT_CONFIG_FEATURE_NAMES)), np.float32)
  for j, node in enumerate(layout_config.nodes):
    if len(node.tensors) > LAYOUT_MAX_TENSORS:
      raise LayoutConfigError(f"configurable node {j} sets {len(node.tensors)} tensor layouts, at most "
                              f"{LAYOUT_MAX_TENSORS} fit the format")
    rows[j] = [value for group in LAYOUT_CONFIG_FEATURE_GROUPS for value in group.values(node)]
  return rows
