"""An analytical TPU-like cost model: the runtime labels of generated TpuGraphs data.

Not a TPU simulator; a small model with the structure real TPU costs have, so that a learned
ranker must see the graph and the config to do well:

* Memory is tiled (8, 128) over the two minor-most dimensions of a tensor's layout: a tensor
  occupies ceil(d2/8)*8 * ceil(d1/128)*128 * (the other dims) elements, so a layout that puts a
  small or misaligned dimension minor-most wastes bandwidth.
* Layout search offers each configurable op a few candidate layouts, as XLA's autotuner does: per
  tensor the default and at most one alternative (the op's preferred layout, else the two
  minor-most dims swapped), so 2-8 per op.
* Every op is a roofline: max(flops / peak, bytes / bandwidth) + a fixed launch overhead.
  Convolutions and dots run on a matrix unit (MXU_FLOPS) that writes the result's minor-most
  dimension across 128 lanes: a small dimension there wastes lanes, unless the lhs operand is read
  in another order than its preferred one, which frees the emitter to put the output features
  there instead (LayoutCostModel._lane_utilisation). Result and operand layouts interact, a single
  op can dominate a program, and leaving the default can be faster. Other ops run on the vector
  unit.
* A layout change costs a copy: when a consumer wants an operand in a layout other than the one
  a configured producer wrote, the tensor is read in one layout and written in the other (a
  producer no config sets writes what its consumer asks for). Configurable
  ops want the layouts their config sets, layout-preserving ops their first operand's, other ops
  that read data the default.
* Layouts flow: an elementwise op whose operand has its shape inherits that operand's layout, so
  one configurable node's choice reaches (and is paid for by) the ops downstream of it.
* Reshapes and transposes are free (bitcasts) when their layouts make memory order unchanged.
* Kernels (tile collection) run tile by tile, so the best tile depends on the kernel's graph:
  - ceil-division and (8, 128) alignment waste where a tile does not divide the output's dims;
  - tiles are split over CORES TensorCores: one tile leaves a core idle, an odd count unbalances;
  - per core, tiles are software-pipelined (the next tile's DMA overlaps this tile's compute):
    busy = m + c + (n - 1) * max(m, c), plus TILE_OVERHEAD_SECONDS per tile, so more tiles
    pay overhead but hide the smaller of memory and compute; kernels with transcendental ops
    (TRANSCENDENTAL_FLOPS each) or matrix ops are compute-heavy and gain from deeper pipelines;
  - a tile's VMEM working set is the double-buffered share of the output and of every streamed
    operand (so it grows with operand count and element size), broadcast operands (re-read by
    every tile) and materialized intermediates; when two tiles' buffers do not fit VMEM_BYTES the
    kernel runs single-buffered (no overlap) and what still does not fit spills to HBM;
  - convolutions and dots (wrapped as fusions, as XLA:TPU runs them) re-read their activations
    once per tile of output features (for convolutions the kernel tile's output features) and
    their weights once per tile of the other output dims; the kernel tile (input, output
    features) sets matrix-unit utilisation and the weight block in VMEM.
  Capacities and per-tile costs are scaled by 1/KERNEL_SCALE to the zoo's small kernels.
* Measurements carry multiplicative noise N(1, NOISE_FRACTION).

Layout costs are decomposed into factors (tables over the layout choices of 1-3 "layout
variables") so that the runtime of 100k configs of a 20k-node program is a few table lookups per
factor, evaluated in chunks.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence

import numpy as np
from tensorflow.compiler.xla import xla_data_pb2
from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.hlo import candidates
from tpu_graphs.hlo import features

MXU_FLOPS = 1.0e14
VECTOR_FLOPS = 4.0e12
HBM_BYTES_PER_SECOND = 1.2e12
OP_OVERHEAD_SECONDS = 1e-7
TILE_SHAPE = (8, 128)  # (second-minor, minor)
# The tile model runs the zoo's kernels (32 px, batch <= 4) on a TPU shrunk by KERNEL_SCALE in its
# per-kernel capacities and fixed per-tile costs, so that they bind as they do for full-size
# kernels (224 px, large batches: ~50-200x more data) on a 16 MiB-VMEM, 0.35 us-per-tile TPU.
KERNEL_SCALE = 128
VMEM_BYTES = 16 * 2**20 // KERNEL_SCALE
TILE_OVERHEAD_SECONDS = 3.5e-7 / KERNEL_SCALE
CORES = 2  # TensorCores sharing a kernel's tiles (megacore), each with 1/CORES of HBM bandwidth
TRANSCENDENTAL_FLOPS = 16.0  # vector-unit operations per element of exp, rsqrt, divide, ...
BROADCAST_RATIO = 8  # parameters this many times smaller than the output are broadcast into it
# Measurement noise: real runtimes repeat closely (unet_3d.4x4.bf16's configs spread by 1.6% in all,
# and a model trained on half of them ranks the rest at tau 0.4).
NOISE_FRACTION = 0.002
# A layout change fused into its consumer's loop: a strided pass over the tensor, this share of a
# separate copy's read and write.
COPY_SHARE = 0.25
# Ops whose result takes the layout of an operand of the same shape.
LAYOUT_PRESERVING_OPCODES = frozenset({
    "abs", "add", "and", "atan2", "clamp", "compare", "convert", "cosine", "divide", "exponential",
    "exponential-minus-one", "floor", "ceil", "log", "log-plus-one", "logistic", "maximum", "minimum",
    "multiply", "negate", "not", "or", "power", "remainder", "round-nearest-afz", "rsqrt", "select",
    "sign", "sine", "sqrt", "subtract", "tanh", "xor", "reduce-precision", "erf", "cbrt", "tan"})
TRANSCENDENTAL_OPCODES = frozenset({
    "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "tanh", "rsqrt", "sqrt",
    "cbrt", "power", "sine", "cosine", "tan", "atan2", "erf", "divide"})
MATERIALIZED_OPCODES = frozenset({"reduce", "reduce-window", "dot", "convolution", "transpose", "concatenate",
                                  "pad", "reverse", "gather", "scatter", "sort", "dynamic-update-slice"})
# Ops XLA fuses into their neighbours' kernels: no launch and no HBM pass of their own (their
# layouts still flow, and a layout change they need is still paid).
FUSED_OPCODES = LAYOUT_PRESERVING_OPCODES | frozenset({
    "broadcast", "convert", "bitcast", "reshape", "parameter", "constant", "get-tuple-element", "tuple", "iota"})
# Ops that pass tensors on without reading them: they need no particular layout.
_DATA_FREE_OPCODES = frozenset({"tuple", "get-tuple-element", "bitcast"})
# Ops that call small scalar computations (reducers, comparators): those are not costed.
_SCALAR_CALLERS = frozenset({"reduce", "reduce-window", "map", "sort", "scatter", "select-and-scatter",
                             "all-reduce", "reduce-scatter"})
_ELEMENT_BYTES = {
    xla_data_pb2.PRED: 1, xla_data_pb2.S8: 1, xla_data_pb2.U8: 1, xla_data_pb2.S16: 2,
    xla_data_pb2.U16: 2, xla_data_pb2.F16: 2, xla_data_pb2.BF16: 2, xla_data_pb2.S32: 4,
    xla_data_pb2.U32: 4, xla_data_pb2.F32: 4, xla_data_pb2.S64: 8, xla_data_pb2.U64: 8,
    xla_data_pb2.F64: 8, xla_data_pb2.C64: 8, xla_data_pb2.C128: 16}


def element_bytes(shape) -> int:
  """Bytes per element of an array shape (0 for tuples, tokens and opaque values)."""
  return _ELEMENT_BYTES.get(shape.element_type, 0)


def passes_layout(instruction) -> bool:
  """Whether an op's result takes the layout of its same-shaped first operand: elementwise ops, and
  identity transposes (TensorFlow's matmul emits one after many dots), which are bitcasts."""
  if instruction.opcode == "transpose":
    return list(instruction.dimensions) == sorted(instruction.dimensions)
  return instruction.opcode in LAYOUT_PRESERVING_OPCODES


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


def _axis(slot: int, num_tensors: int) -> list:
  """The shape that puts a (k,) table of `slot` on its own axis among a node's tensor slots."""
  axis = [1] * num_tensors
  axis[slot] = -1
  return axis


def _roofline(flops, peak, bytes_moved):
  return np.maximum(flops / peak, bytes_moved / HBM_BYTES_PER_SECOND) + OP_OVERHEAD_SECONDS


def _operands(instruction, by_id) -> list:
  return [by_id[o] for o in instruction.operand_ids]


def instruction_flops(instruction, by_id) -> float:
  """Floating-point operations of one HLO instruction (multiply-adds count two)."""
  out = math.prod(instruction.shape.dimensions) if is_array(instruction.shape) else 0
  operands = _operands(instruction, by_id)
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


@dataclasses.dataclass(frozen=True)
class LayoutVariable:
  """One tensor whose layout a config sets: slot t (0 result, 1-2 operands) of node `node`."""

  node: int
  slot: int
  dims: tuple
  choices: np.ndarray  # (k, rank) minor-to-major orders, candidates.candidate_layouts
  padded_bytes: np.ndarray  # (k,) bytes the tensor occupies under each choice


class LayoutCostModel:
  """Runtime of a whole program (an unoptimized HloModuleProto) under layout configs.

  A config gives, for every LayoutVariable, the index of its choice; unconfigured tensors keep
  the default layout (choice 0). `runtimes(choices)` is the noiseless model, in seconds.

  Attributes:
    configurable_nodes: (nc,) node indices (positions in the module's node order), ascending.
    variables: the layout variables, slot-major within each configurable node.
    node_variables: for configurable node j, the variable index of each of its 3 tensor slots, or -1.
  """

  def __init__(self, instructions: Sequence[hlo_pb2.HloInstructionProto], costed: np.ndarray,
               configurable_nodes: Sequence[int]):
    """
    Args:
      instructions: the module's n instructions in node order (featurize.ModuleFeatures.instructions).
      costed: (n,) bool, the nodes that execute as ops (not inside reducers or other scalar bodies).
      configurable_nodes: the nodes configs set layouts for (array results of rank >= 1).
    """
    self.configurable_nodes = np.asarray(sorted(configurable_nodes), np.int64)
    by_id = {inst.id: inst for inst in instructions}
    node_of_id = {inst.id: i for i, inst in enumerate(instructions)}
    self.variables: list[LayoutVariable] = []
    self.node_variables = np.full((len(self.configurable_nodes), features.LAYOUT_MAX_TENSORS), -1, np.int64)
    slot_variable = {}  # (node, slot) -> variable
    for j, node in enumerate(self.configurable_nodes):
      instruction = instructions[node]
      tensors = ([instruction] + _operands(instruction, by_id))[:features.LAYOUT_MAX_TENSORS]
      alternatives = candidates.alternative_layouts(instruction, tensors, by_id)
      for slot, (tensor, alternative) in enumerate(zip(tensors, alternatives)):
        if is_array(tensor.shape) and len(tensor.shape.dimensions) >= 1:
          slot_variable[node, slot] = len(self.variables)
          self.node_variables[j, slot] = len(self.variables)
          self.variables.append(self._variable(node, slot, tensor.shape, alternative))
    self.constant = 0.0
    self._factors: dict[tuple, np.ndarray] = {}
    # The variable whose layout each node's result has (propagated), or -1 for the default.
    source = np.full(len(instructions), -1, np.int64)
    for node, instruction in enumerate(instructions):
      operands = _operands(instruction, by_id)
      if (node, 0) in slot_variable:
        source[node] = slot_variable[node, 0]
      elif (passes_layout(instruction) and operands and is_array(instruction.shape)
            and list(operands[0].shape.dimensions) == list(instruction.shape.dimensions)):
        source[node] = source[node_of_id[operands[0].id]]
      if costed[node]:
        self._add_node_costs(node, instruction, operands, source, slot_variable, node_of_id, by_id)

  @staticmethod
  def _variable(node: int, slot: int, shape, alternative: Optional[tuple]) -> LayoutVariable:
    dims = tuple(int(d) for d in shape.dimensions)
    choices = candidates.candidate_layouts(len(dims), alternative)
    padded = np.asarray([padded_elements(dims, c) for c in choices], np.float64) * element_bytes(shape)
    return LayoutVariable(node, slot, dims, choices, padded)

  def _tensor_bytes(self, shape, variable: int) -> np.ndarray:
    """(k,) bytes of a tensor of `shape` laid out as each choice of `variable`, or (1,) default."""
    if variable >= 0:
      return self.variables[variable].padded_bytes
    dims = list(shape.dimensions)
    return np.asarray([padded_elements(dims, candidates.default_layout(len(dims))) * element_bytes(shape)], np.float64)

  def _orders(self, shape, variable: int) -> np.ndarray:
    """(k, rank) layouts a tensor of `shape` may have: the choices of `variable`, or the default."""
    if variable >= 0:
      return self.variables[variable].choices
    return np.asarray([candidates.default_layout(len(shape.dimensions))], np.int64).reshape(1, -1)

  def _copy_table(self, shape, produced: int, wanted: int) -> np.ndarray:
    """(k_produced, k_wanted) seconds of the layout change a consumer pays when it reads a tensor
    of `shape` in the layout `wanted` (a variable, or -1: the default) that its producer wrote in
    the layout `produced`: a transposing pass fused into the consumer, COPY_SHARE of a separate
    copy's read and write; nothing when the two are equal."""
    same = (self._orders(shape, produced)[:, None, :] == self._orders(shape, wanted)[None, :, :]).all(-1)
    return np.where(same, 0.0, COPY_SHARE * 2 * array_bytes(shape) / HBM_BYTES_PER_SECOND)

  def _add(self, variables: tuple, table: np.ndarray) -> None:
    """Adds a cost table indexed by the choices of `variables` (-1 entries: the default, index 0)."""
    keep = [a for a, v in enumerate(variables) if v >= 0]
    table = table[tuple(slice(None) if v >= 0 else 0 for v in variables)]
    variables = tuple(variables[a] for a in keep)
    if not variables:
      self.constant += float(table)
      return
    order = np.argsort(variables, kind="stable")
    key = tuple(variables[a] for a in order)
    table = np.transpose(table, order)
    if len(set(key)) < len(key):  # the same variable twice: take the diagonal
      table = _merge_repeated(key, table)
      key = tuple(sorted(set(key)))
    self._factors[key] = self._factors.get(key, 0.0) + table

  def _add_node_costs(self, node, instruction, operands, source, slot_variable, node_of_id, by_id):
    flops = instruction_flops(instruction, by_id)
    peak = MXU_FLOPS if instruction.opcode in candidates.MXU_OPCODES else VECTOR_FLOPS
    if (node, 0) in slot_variable:
      # A configurable node: a factor over its (up to 3) tensor slots.
      slots = [slot_variable.get((node, s), -1) for s in range(features.LAYOUT_MAX_TENSORS)]
      tensors = ([instruction] + operands)[:features.LAYOUT_MAX_TENSORS]
      bytes_moved, efficiency = 0.0, 1.0
      if instruction.opcode in candidates.MXU_OPCODES:
        # The matrix unit's emitter tiles its operands itself as it streams them in: they cost
        # their bytes whatever their layout; the result is written in its (padded) layout.
        bytes_moved = self.variables[slots[0]].padded_bytes.reshape(_axis(0, len(tensors))) + sum(
            array_bytes(operand.shape) for operand in operands)
        efficiency = self._lane_utilisation(instruction, slots, len(tensors), by_id)
      else:
        for s, tensor in enumerate(tensors):
          if slots[s] >= 0:
            bytes_moved = bytes_moved + self.variables[slots[s]].padded_bytes.reshape(_axis(s, len(tensors)))
      table = _roofline(flops, peak * efficiency, bytes_moved)
      if instruction.opcode in ("reshape", "transpose") and len(tensors) == 2 and min(slots) >= 0:
        table = np.where(_bitcast_pairs(instruction, self.variables[slots[0]], self.variables[slots[1]]),
                         OP_OVERHEAD_SECONDS, table)
      shape = [len(self.variables[v].choices) if v >= 0 else 1 for v in slots[:len(tensors)]]
      self._add(tuple(slots[:len(tensors)]), np.broadcast_to(np.asarray(table, np.float64), shape))
      wanted_layouts = {s - 1: slots[s] for s in range(1, len(tensors))}
    else:
      own = source[node]
      bytes_moved = self._tensor_bytes(instruction.shape, own) if is_array(instruction.shape) else np.zeros(1)
      wanted_layouts = {}
      for j, operand in enumerate(operands):
        if not is_array(operand.shape):
          continue
        same_shape = list(operand.shape.dimensions) == list(instruction.shape.dimensions)
        if same_shape and passes_layout(instruction):
          bytes_moved = bytes_moved + self._tensor_bytes(operand.shape, own)
          wanted_layouts[j] = own
        else:
          bytes_moved = bytes_moved + self._tensor_bytes(operand.shape, -1)
          if instruction.opcode not in _DATA_FREE_OPCODES:
            wanted_layouts[j] = -1
      if instruction.opcode not in FUSED_OPCODES and not passes_layout(instruction):
        self._add((own,), np.asarray(_roofline(flops, peak, bytes_moved), np.float64).reshape(-1))
    # Copies where an operand arrives in another layout than the consumer reads it in. A producer
    # no config sets (produced < 0) writes what its consumer asks for: XLA's layout assignment
    # propagates operand layouts back to unconstrained producers, so only a configured layout
    # meeting another one costs a copy (in the real unet3d, forward convolutions whose operands
    # take their alternative layouts run 0.3% faster, not slower).
    for j, wanted in wanted_layouts.items():
      produced = source[node_of_id[operands[j].id]]
      if wanted == produced or produced < 0:
        continue
      self._add((produced, wanted), self._copy_table(operands[j].shape, produced, wanted))

  def _lane_utilisation(self, instruction, slots: list, num_tensors: int, by_id) -> np.ndarray:
    """Matrix-unit utilisation of a convolution or dot under each (result, lhs) layout choice,
    relative to MXU_FLOPS and shaped to broadcast over the node's slots.

    The matrix unit writes the result's minor-most dimension across its 128 lanes, so a result
    dimension of d elements there fills d / ceil(d/128)*128 of them. With the result's output
    features minor-most that is the features' utilisation. With another dimension minor-most the
    lhs operand decides: read in its preferred order (contracting / input features minor-most),
    it streams straight in and the result's minor dimension must go on the lanes; read in any
    other order it is re-tiled on the way in anyway, and the emitter puts whichever of the two
    dimensions fills the lanes better there. So operand and result layouts interact, and a move
    away from the default can be faster (a 192-wide dimension fills lanes better than 64).

    A streamed lhs with a size-1 result dimension minor-most has no matrix-unit tiling at all:
    the op runs as a vector-unit loop whose lanes hold the lhs's minor-most dimension (a weight
    gradient's batch of 2 fills 2 lanes in 128), so one small op can slow a whole program
    several times over, as the real unet3d's first weight gradient does (3x), while a 4-wide
    dimension there (unet_3d.4x4.bf16) costs nothing measurable.
    """
    result = self.variables[slots[0]]
    preferred = candidates.preferred_minor_dims(instruction, by_id)
    output_features = preferred[0]
    result_minor = result.choices[:, 0]
    result_sizes = np.asarray(result.dims)[result_minor]
    lanes = lane_utilisation(result_sizes)
    feature_lanes = lane_utilisation(np.asarray(result.dims[output_features]))
    lhs_dims = np.asarray(by_id[instruction.operand_ids[0]].shape.dimensions)
    if slots[1] >= 0:
      lhs_minor = self.variables[slots[1]].choices[:, 0]
    else:
      lhs_minor = np.asarray(candidates.default_layout(len(lhs_dims))[:1])
    lhs_streams = (lhs_minor == preferred[1]).reshape(_axis(1, num_tensors))
    vector_loop = (VECTOR_FLOPS / MXU_FLOPS * lane_utilisation(lhs_dims[lhs_minor])).reshape(_axis(1, num_tensors))
    forced = np.where((result_sizes == 1).reshape(_axis(0, num_tensors)), vector_loop, lanes.reshape(_axis(0, num_tensors)))
    lanes, features_minor = lanes.reshape(_axis(0, num_tensors)), (result_minor == output_features).reshape(_axis(0, num_tensors))
    return np.where(features_minor, feature_lanes, np.where(lhs_streams, forced, np.maximum(lanes, feature_lanes)))

  def runtimes(self, choices: np.ndarray) -> np.ndarray:
    """(c,) noiseless runtimes in seconds of configs `choices` (c, num_variables) int."""
    total = np.full(choices.shape[0], self.constant)
    for key, table in self._factors.items():
      total += table[tuple(choices[:, v] for v in key)]
    return total

  def config_features(self, choices: np.ndarray) -> np.ndarray:
    """(c, nc, 18) float32 node_config_feat of configs `choices` (c, num_variables): every tensor's
    two minor-most dimensions set, the rest -1 (unconstrained), as the real files mostly set
    those of convolutions and dots (unet3d's rank-5 tensors: (3, 4, -1, -1, -1, -1)); the
    candidates differ only there."""
    width = features.LAYOUT_MAX_TENSORS * features.LAYOUT_MAX_DIMS
    result = np.full((choices.shape[0], len(self.configurable_nodes), width), -1.0, np.float32)
    for j in range(len(self.configurable_nodes)):
      for slot, v in enumerate(self.node_variables[j]):
        if v < 0:
          continue
        orders = self.variables[v].choices[choices[:, v]][:, :features.CONFIGURED_LAYOUT_DIMS]
        start = slot * features.LAYOUT_MAX_DIMS
        result[:, j, start:start + orders.shape[1]] = orders
    return result

  def choices_of(self, node_config_feat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The inverse of config_features, for configs written by someone else (a real file of this
    program): (c, num_variables) int64 choices, and (c, num_variables) bool, False where a tensor's
    layout is none of its candidates (left at the default, choice 0; real reshapes are offered
    every order of their dims, the model two). A tensor whose dims are all -1 (unconstrained)
    takes the default.

    Args:
      node_config_feat: (c, nc, 18) minor-to-major orders per configurable node, as in the npz
        files, for the model's configurable_nodes in their order.
    """
    configured = np.rint(np.asarray(node_config_feat)).astype(np.int64)
    if configured.shape[1:] != (len(self.configurable_nodes), features.LAYOUT_MAX_TENSORS * features.LAYOUT_MAX_DIMS):
      raise ValueError(f"node_config_feat of shape {configured.shape} does not fit {len(self.configurable_nodes)} "
                       "configurable nodes")
    choices = np.zeros((configured.shape[0], len(self.variables)), np.int64)
    offered = np.ones(choices.shape, bool)
    for j, variables in enumerate(self.node_variables):
      for slot, v in enumerate(variables):
        if v < 0:
          continue
        orders = configured[:, j, slot * features.LAYOUT_MAX_DIMS:(slot + 1) * features.LAYOUT_MAX_DIMS]
        distinct, config_order = np.unique(orders, axis=0, return_inverse=True)
        for index, order in enumerate(distinct):
          given = order[order >= 0]
          matches = np.flatnonzero((self.variables[v].choices[:, :len(given)] == given).all(1))
          rows = config_order.reshape(-1) == index
          choices[rows, v] = matches[0] if len(matches) else 0
          offered[rows, v] = len(matches) > 0
    return choices, offered


def _merge_repeated(key: tuple, table: np.ndarray) -> np.ndarray:
  """Collapses axes of `table` that index the same variable (key sorted) to their diagonal."""
  letters = "abcdefgh"
  distinct = sorted(set(key))
  subscripts = "".join(letters[distinct.index(v)] for v in key)
  return np.einsum(f"{subscripts}->{''.join(letters[:len(distinct)])}", table)


def _bitcast_pairs(instruction, result: LayoutVariable, operand: LayoutVariable) -> np.ndarray:
  """(k_result, k_operand) bool: layout pairs for which a reshape / transpose moves no data.

  A transpose is a bitcast when the result's physical order is the operand's; a reshape only
  between default layouts (row-major order is what reshape preserves).
  """
  if instruction.opcode == "transpose":
    permutation = np.asarray(instruction.dimensions, np.int64)
    mapped = permutation[result.choices]  # result dim -> operand dim, in result physical order
    return (mapped[:, None, :] == operand.choices[None, :, :]).all(-1)
  pairs = np.zeros((len(result.choices), len(operand.choices)), bool)
  pairs[0, 0] = True
  return pairs


def costed_nodes(module: hlo_pb2.HloModuleProto) -> np.ndarray:
  """(n,) bool in node order: False for instructions of computations only reducers call."""
  scalar = {cid for c in module.computations for i in c.instructions if i.opcode in _SCALAR_CALLERS
            for cid in i.called_computation_ids}
  return np.asarray([c.id not in scalar for c in module.computations for _ in c.instructions], bool)


# ---------------------------------------------------------------------------------------------
# Tile sizes of a fused kernel.


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
  """The work of a kernel module (featurize.kernel_modules): entry root = the fusion instruction."""
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
    nbytes = lambda p: float(math.prod(p.shape.dimensions) * element_bytes(p.shape)) if p is not None else 0.0
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
      broadcast += padded_elements(dims, candidates.default_layout(len(dims))) * element_bytes(parameter.shape)
    else:
      streamed += math.prod(dims) * element_bytes(parameter.shape)
  scratch = sum(math.prod(i.shape.dimensions) * element_bytes(i.shape) for i in fused
                if i.opcode in MATERIALIZED_OPCODES and is_array(i.shape))
  flops = sum(instruction_flops(i, by_id) * (TRANSCENDENTAL_FLOPS if i.opcode in TRANSCENDENTAL_OPCODES else 1)
              for i in fused)
  return KernelWork(
      output_dims=output_dims,
      output_minor_to_major=tuple(int(d) for d in shape.layout.minor_to_major) or
      candidates.default_layout(len(shape.dimensions)),
      output_element_bytes=max(element_bytes(shape), 1),
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
  padded_tile = padded_elements(output_tile, work.output_minor_to_major) if dims else 1
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
  peak = MXU_FLOPS * efficiency if work.uses_mxu else VECTOR_FLOPS
  compute = work.flops * share / peak
  moved = padded_tile * work.output_element_bytes + work.streamed_input_bytes * share + matrix_bytes \
      + work.broadcast_input_bytes + 2 * spilled
  memory = moved / (HBM_BYTES_PER_SECOND / CORES)
  per_core = math.ceil(tiles / CORES)
  if double_buffered:
    busy = compute + memory + (per_core - 1) * max(compute, memory)
  else:
    busy = per_core * (compute + memory)
  return busy + per_core * TILE_OVERHEAD_SECONDS + OP_OVERHEAD_SECONDS


def tile_footprint_target(work: KernelWork, output_tile: Sequence[int]) -> float:
  """How far a tile's output working set is from a quarter of VMEM (log ratio): the compiler
  default picks the valid tile closest to that target."""
  padded_tile = padded_elements(output_tile, work.output_minor_to_major) if work.output_dims else 1
  return abs(math.log(padded_tile * work.output_element_bytes * 2) - math.log(VMEM_BYTES / 4))
