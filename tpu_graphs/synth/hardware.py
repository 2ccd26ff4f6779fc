"""The TPU-like machine that prices generated data: what the layout and the tile cost models share.

Not a TPU simulator; a small model with the structure real TPU costs have, so that a learned
ranker must see the graph and the config to do well (layout_cost_model.py, tile_cost_model.py):

* Memory is tiled (8, 128) over the two minor-most dimensions of a tensor's layout: a tensor
  occupies ceil(d2/8)*8 * ceil(d1/128)*128 * (the other dims) elements, so a layout that puts a
  small or misaligned dimension minor-most wastes bandwidth.
* Work runs as a roofline, max(flops / peak, bytes / bandwidth) + a fixed launch overhead, on the
  matrix unit (MXU_FLOPS: convolutions and dots, which write their result's minor-most dimension
  across 128 lanes, lane_utilisation) or the vector unit (VECTOR_FLOPS: everything else).
* Measurements carry multiplicative noise N(1, NOISE_FRACTION).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from tensorflow.compiler.xla import xla_data_pb2

MXU_FLOPS = 1.0e14
VECTOR_FLOPS = 4.0e12
HBM_BYTES_PER_SECOND = 1.2e12
OP_OVERHEAD_SECONDS = 1e-7
TILE_SHAPE = (8, 128)  # (second-minor, minor)
# Measurement noise: real runtimes repeat closely, so that configs a fraction of a percent apart
# still rank (docs/generated-data.md, "What it is").
NOISE_FRACTION = 0.002
_ELEMENT_BYTES = {
    xla_data_pb2.PRED: 1, xla_data_pb2.S8: 1, xla_data_pb2.U8: 1, xla_data_pb2.S16: 2,
    xla_data_pb2.U16: 2, xla_data_pb2.F16: 2, xla_data_pb2.BF16: 2, xla_data_pb2.S32: 4,
    xla_data_pb2.U32: 4, xla_data_pb2.F32: 4, xla_data_pb2.S64: 8, xla_data_pb2.U64: 8,
    xla_data_pb2.F64: 8, xla_data_pb2.C64: 8, xla_data_pb2.C128: 16}


def element_bytes(shape) -> int:
  """Bytes per element of an array shape (0 for tuples, tokens and opaque values)."""
  return _ELEMENT_BYTES.get(shape.element_type, 0)


def array_bytes(shape) -> float:
  """Bytes of an array's elements, unpadded (0 for tuples, tokens and opaque values)."""
  return float(math.prod(shape.dimensions)) * element_bytes(shape)


def is_array(shape) -> bool:
  return element_bytes(shape) > 0


def padded_elements(dims: Sequence[int], minor_to_major: Sequence[int]) -> int:
  """Elements a tensor occupies in (8, 128)-tiled memory under the layout `minor_to_major`."""
  dims = [max(int(d), 1) for d in dims]
  if not dims:
    return 1
  minor = math.ceil(dims[minor_to_major[0]] / TILE_SHAPE[1]) * TILE_SHAPE[1]
  if len(dims) == 1:
    return minor
  second = math.ceil(dims[minor_to_major[1]] / TILE_SHAPE[0]) * TILE_SHAPE[0]
  return minor * second * math.prod(dims[d] for d in minor_to_major[2:])


def measure(runtime_seconds: np.ndarray, rng: np.random.Generator) -> np.ndarray:
  """Noisy measured runtimes (same shape) in integer nanoseconds, at least 1."""
  noisy = np.asarray(runtime_seconds, np.float64) * 1e9 * (1.0 + NOISE_FRACTION * rng.standard_normal(
      np.shape(runtime_seconds)))
  return np.maximum(np.rint(noisy), 1).astype(np.int64)


def lane_utilisation(sizes) -> np.ndarray:
  """Share of the matrix unit's 128 lanes that a dimension of `sizes` elements fills."""
  sizes = np.maximum(np.asarray(sizes, np.float64), 1.0)
  return sizes / (np.ceil(sizes / TILE_SHAPE[1]) * TILE_SHAPE[1])


def operands_of(instruction, by_id) -> list:
  """The operand instructions of `instruction`, by_id: instruction id -> instruction."""
  return [by_id[o] for o in instruction.operand_ids]


def instruction_flops(instruction, by_id) -> float:
  """Floating-point operations of one HLO instruction (multiply-adds count two)."""
  out = math.prod(instruction.shape.dimensions) if is_array(instruction.shape) else 0
  operands = operands_of(instruction, by_id)
  if instruction.opcode == "convolution":
    numbers = instruction.convolution_dimension_numbers
    lhs, kernel = operands[0].shape.dimensions, operands[1].shape.dimensions
    window = math.prod(kernel[d] for d in numbers.kernel_spatial_dimensions)
    return 2.0 * out * window * lhs[numbers.input_feature_dimension] / max(instruction.feature_group_count, 1)
  if instruction.opcode == "dot":
    lhs = operands[0].shape.dimensions
    return 2.0 * out * math.prod(lhs[d] for d in instruction.dot_dimension_numbers.lhs_contracting_dimensions)
  if instruction.opcode in ("reduce", "reduce-window") and operands:
    window = math.prod(d.size for d in instruction.window.dimensions) if instruction.window.dimensions else 1
    return float(math.prod(operands[0].shape.dimensions)) * window
  if instruction.opcode in ("parameter", "constant", "get-tuple-element", "tuple", "bitcast", "reshape",
                            "transpose", "copy", "broadcast", "slice", "concatenate", "pad", "iota"):
    return 0.0
  return float(out)
