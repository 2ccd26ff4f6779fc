"""The tile cost model: the runtime labels of generated tile files, on the machine of hardware.py.

Kernels run tile by tile, so the best tile depends on the kernel's graph:
* ceil-division and (8, 128) alignment waste where a tile does not divide the output's dims;
* tiles are split over CORES TensorCores: one tile leaves a core idle, an odd count unbalances;
* per core, tiles are software-pipelined (the next tile's DMA overlaps this tile's compute):
  busy = m + c + (n - 1) * max(m, c), plus TILE_OVERHEAD_SECONDS per tile, so more tiles
  pay overhead but hide the smaller of memory and compute; kernels with transcendental ops
  (TRANSCENDENTAL_FLOPS each) or matrix ops are compute-heavy and gain from deeper pipelines;
* a tile's VMEM working set is the double-buffered share of the output and of every streamed
  operand (so it grows with operand count and element size), broadcast operands (re-read by
  every tile) and materialized intermediates; when two tiles' buffers do not fit VMEM_BYTES the
  kernel runs single-buffered (no overlap) and what still does not fit spills to HBM;
* convolutions and dots (wrapped as fusions, as XLA:TPU runs them) re-read their activations
  once per tile of output features (for convolutions the kernel tile's output features) and
  their weights once per tile of the other output dims; the kernel tile (input, output
  features) sets matrix-unit utilisation and the weight block in VMEM.
Capacities and per-tile costs are scaled by 1/KERNEL_SCALE to the zoo's small kernels.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence

from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.hlo import candidates, fusion_kernels
from tpu_graphs.synth import hardware

# The tile model runs the zoo's kernels (32 px, batch <= 4) on a TPU shrunk by KERNEL_SCALE in its
# per-kernel capacities and fixed per-tile costs, so that they bind as they do for full-size
# kernels (224 px, large batches: ~50-200x more data) on a 16 MiB-VMEM, 0.35 us-per-tile TPU.
KERNEL_SCALE = 128
VMEM_BYTES = 16 * 2**20 // KERNEL_SCALE
TILE_OVERHEAD_SECONDS = 3.5e-7 / KERNEL_SCALE
CORES = 2  # TensorCores sharing a kernel's tiles (megacore), each with 1/CORES of HBM bandwidth
TRANSCENDENTAL_FLOPS = 16.0  # vector-unit operations per element of exp, rsqrt, divide, ...
BROADCAST_RATIO = 8  # parameters this many times smaller than the output are broadcast into it
TRANSCENDENTAL_OPCODES = frozenset({
    "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "tanh", "rsqrt", "sqrt",
    "cbrt", "power", "sine", "cosine", "tan", "atan2", "erf", "divide"})
MATERIALIZED_OPCODES = frozenset({"reduce", "reduce-window", "dot", "convolution", "transpose", "concatenate",
                                  "pad", "reverse", "gather", "scatter", "sort", "dynamic-update-slice"})


@dataclasses.dataclass(frozen=True)
class KernelWork:
  """What a kernel computes, as the tile model needs it.

  output_dims / output_minor_to_major / output_element_bytes: the kernel's (first) result.
  flops: vector- or matrix-unit operations over all fused ops, a transcendental element counting
    TRANSCENDENTAL_FLOPS.
  streamed_input_bytes: parameters split across tiles with the output (each tile reads its share).
  broadcast_input_bytes: parameters at least BROADCAST_RATIO times smaller than the output
    (biases, per-channel scales): every tile reads them whole, (8, 128)-padded.
  scratch_bytes_per_element: on-chip bytes per output element that materialized intermediates
    (reductions, transposes, concatenations, pads) need while a tile is computed.
  uses_mxu: a convolution or dot runs on the matrix unit.
  activation_bytes / weight_bytes: for a convolution or dot, its lhs and rhs parameters (not in
    the streamed or broadcast bytes): activations are re-read once per tile of output features,
    weights once per tile of the other output dims.
  feature_dimension: the output dim of the convolution's / dot's output features, or None.
  convolution_features: (input, output) feature counts of its convolution, or None.
  convolution_window: kernel window elements (e.g. 9 for 3x3) of its convolution, 1 otherwise.
  """

  output_dims: tuple
  output_minor_to_major: tuple
  output_element_bytes: int
  flops: float
  streamed_input_bytes: float
  broadcast_input_bytes: float
  scratch_bytes_per_element: float
  uses_mxu: bool
  activation_bytes: float = 0.0
  weight_bytes: float = 0.0
  feature_dimension: Optional[int] = None
  convolution_features: Optional[tuple] = None
  convolution_window: int = 1


def kernel_work(kernel: hlo_pb2.HloModuleProto) -> KernelWork:
  """The work of a kernel module (fusion_kernels.kernel_modules): entry root = the fusion instruction."""
  output_dims, convolution_features = candidates.kernel_extents(kernel)
  by_id = {i.id: i for c in kernel.computations for i in c.instructions}
  entry = next(c for c in kernel.computations if c.id == kernel.entry_computation_id)
  root = by_id[entry.root_id]
  shape = root.shape.tuple_shapes[0] if root.shape.tuple_shapes else root.shape
  output_elements = max(math.prod(shape.dimensions), 1)
  fused = [i for c in kernel.computations if c.id != entry.id for i in c.instructions]
  matrix = next((i for i in fused if i.opcode in candidates.MXU_OPCODES), None)
  matrix_fields, matrix_parameters = {}, set()
  if matrix is not None and len(matrix.shape.dimensions) == len(shape.dimensions):
    lhs, rhs = (by_id[o] for o in matrix.operand_ids[:2])
    # The parameters feeding the matrix op (through converts / bitcasts) are its lhs and rhs.
    sources = []
    for operand in (lhs, rhs):
      while operand.opcode in ("convert", "bitcast", "copy", "reshape") and operand.operand_ids:
        operand = by_id[operand.operand_ids[0]]
      sources.append(operand)
    parameters = [next((p for p in entry.instructions if p.opcode == "parameter"
                        and p.parameter_number == s.parameter_number), None) if s.opcode == "parameter" else None
                  for s in sources]
    matrix_parameters = {p.id for p in parameters if p is not None}
    nbytes = lambda p: float(math.prod(p.shape.dimensions) * hardware.element_bytes(p.shape)) if p is not None else 0.0
    matrix_fields = dict(activation_bytes=nbytes(parameters[0]), weight_bytes=nbytes(parameters[1]))
    if matrix.opcode == "convolution":
      numbers = matrix.convolution_dimension_numbers
      kernel_dims = rhs.shape.dimensions
      matrix_fields.update(
          feature_dimension=int(numbers.output_feature_dimension),
          convolution_features=convolution_features,
          convolution_window=int(math.prod(kernel_dims[d] for d in numbers.kernel_spatial_dimensions)))
    else:
      matrix_fields.update(feature_dimension=len(shape.dimensions) - 1)
  streamed, broadcast = 0.0, 0.0
  for parameter in (i for i in entry.instructions if i.opcode == "parameter" and i.id not in matrix_parameters):
    dims = list(parameter.shape.dimensions)
    if math.prod(dims) * BROADCAST_RATIO <= output_elements:
      broadcast += (hardware.padded_elements(dims, candidates.default_layout(len(dims)))
                    * hardware.element_bytes(parameter.shape))
    else:
      streamed += math.prod(dims) * hardware.element_bytes(parameter.shape)
  scratch = sum(math.prod(i.shape.dimensions) * hardware.element_bytes(i.shape) for i in fused
                if i.opcode in MATERIALIZED_OPCODES and hardware.is_array(i.shape))
  flops = sum(hardware.instruction_flops(i, by_id)
              * (TRANSCENDENTAL_FLOPS if i.opcode in TRANSCENDENTAL_OPCODES else 1) for i in fused)
  return KernelWork(
      output_dims=output_dims,
      output_minor_to_major=tuple(int(d) for d in shape.layout.minor_to_major) or
      candidates.default_layout(len(shape.dimensions)),
      output_element_bytes=max(hardware.element_bytes(shape), 1),
      flops=flops, streamed_input_bytes=float(streamed), broadcast_input_bytes=float(broadcast),
      scratch_bytes_per_element=scratch / output_elements,
      uses_mxu=matrix is not None, **matrix_fields)


def tile_runtime(work: KernelWork, output_tile: Sequence[int], kernel_tile: Sequence[int] = ()) -> float:
  """Noiseless runtime in seconds of a kernel run with `output_tile` (one size per output dim)
  and, for convolutions, `kernel_tile` (input features, output features).

  Per tile (the average one): `buffered` bytes double-buffered in VMEM, `moved` bytes of HBM
  traffic at 1/CORES of the bandwidth, `compute` seconds; see the module docstring."""
  dims = work.output_dims
  tiles = math.prod(math.ceil(d / t) for d, t in zip(dims, output_tile)) if dims else 1
  padded_tile = hardware.padded_elements(output_tile, work.output_minor_to_major) if dims else 1
  share = padded_tile / max(math.prod(dims), 1)  # of the output one (padded) tile covers
  efficiency, weight_block = 1.0, 0.0
  if work.feature_dimension is None:
    feature_tiles = 1
  else:
    feature_tiles = math.ceil(dims[work.feature_dimension] / output_tile[work.feature_dimension])
  other_tiles = tiles / feature_tiles
  if work.convolution_features and kernel_tile:
    (features_in, features_out), (tile_in, tile_out) = work.convolution_features, kernel_tile
    efficiency = min(tile_in, 128) / min(features_in, 128) * min(tile_out, 128) / min(features_out, 128)
    feature_tiles = max(feature_tiles, math.ceil(features_out / tile_out))
    weight_block = tile_in * tile_out * work.convolution_window * work.output_element_bytes
  elif work.uses_mxu and work.feature_dimension is not None:
    # A dot's output tile is its matrix-unit block: (second-minor rows, 128 lanes of features).
    efficiency = min(output_tile[work.feature_dimension], 128) / min(dims[work.feature_dimension], 128)
  # Bytes one tile moves (on average), and the part of them double-buffered on chip.
  matrix_bytes = (work.activation_bytes * feature_tiles + work.weight_bytes * other_tiles) / tiles
  buffered = (padded_tile * work.output_element_bytes + work.streamed_input_bytes * share
              + work.activation_bytes / other_tiles + max(work.weight_bytes / feature_tiles, weight_block))
  resident = work.broadcast_input_bytes + padded_tile * work.scratch_bytes_per_element
  # Double-buffered when two tiles' buffers fit VMEM; otherwise single-buffered (no overlap), and
  # what still does not fit spills: written to HBM and read back once per tile.
  double_buffered = 2 * buffered + resident <= VMEM_BYTES
  spilled = 0.0 if double_buffered else max(buffered + resident - VMEM_BYTES, 0.0)
  peak = hardware.MXU_FLOPS * efficiency if work.uses_mxu else hardware.VECTOR_FLOPS
  compute = work.flops * share / peak
  moved = padded_tile * work.output_element_bytes + work.streamed_input_bytes * share + matrix_bytes \
      + work.broadcast_input_bytes + 2 * spilled
  memory = moved / (hardware.HBM_BYTES_PER_SECOND / CORES)
  per_core = math.ceil(tiles / CORES)
  if double_buffered:
    busy = compute + memory + (per_core - 1) * max(compute, memory)
  else:
    busy = per_core * (compute + memory)
  return busy + per_core * TILE_OVERHEAD_SECONDS + hardware.OP_OVERHEAD_SECONDS


def tile_footprint_target(work: KernelWork, output_tile: Sequence[int]) -> float:
  """How far a tile's output working set is from a quarter of VMEM (log ratio): the compiler
  default picks the valid tile closest to that target."""
  padded_tile = hardware.padded_elements(output_tile, work.output_minor_to_major) if work.output_dims else 1
  return abs(math.log(padded_tile * work.output_element_bytes * 2) - math.log(VMEM_BYTES / 4))
