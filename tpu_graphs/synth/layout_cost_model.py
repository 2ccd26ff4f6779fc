"""The layout cost model: the runtime labels of generated layout files, on the machine of hardware.py.

* Layout search offers each configurable op a few candidate layouts, as XLA's autotuner does: per
  tensor the default and at most one alternative (the op's preferred layout, else the two
  minor-most dims swapped), so 2-8 per op.
* Every op is a roofline (hardware.py). Convolutions and dots write the result's minor-most
  dimension across the matrix unit's 128 lanes: a small dimension there wastes lanes, unless the
  lhs operand is read in another order than its preferred one, which frees the emitter to put the
  output features there instead (LayoutCostModel._lane_utilisation). Result and operand layouts
  interact, a single op can dominate a program, and leaving the default can be faster.
* A layout change costs a copy: when a consumer wants an operand in a layout other than the one
  a configured producer wrote, the tensor is read in one layout and written in the other (a
  producer no config sets writes what its consumer asks for). Configurable
  ops want the layouts their config sets, layout-preserving ops their first operand's, other ops
  that read data the default.
* Layouts flow: an elementwise op whose operand has its shape inherits that operand's layout, so
  one configurable node's choice reaches (and is paid for by) the ops downstream of it.
* Reshapes and transposes are free (bitcasts) when their layouts make memory order unchanged.

Layout costs are decomposed into factors (tables over the layout choices of 1-3 "layout
variables") so that the runtime of 100k configs of a 20k-node program is a few table lookups per
factor, evaluated in chunks.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np
from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.hlo import candidates
from tpu_graphs.hlo import features
from tpu_graphs.synth import hardware

# A layout change fused into its consumer's loop: a strided pass over the tensor, this share of a
# separate copy's read and write.
COPY_SHARE = 0.25
# Ops whose result takes the layout of an operand of the same shape.
LAYOUT_PRESERVING_OPCODES = frozenset({
    "abs", "add", "and", "atan2", "clamp", "compare", "convert", "cosine", "divide", "exponential",
    "exponential-minus-one", "floor", "ceil", "log", "log-plus-one", "logistic", "maximum", "minimum",
    "multiply", "negate", "not", "or", "power", "remainder", "round-nearest-afz", "rsqrt", "select",
    "sign", "sine", "sqrt", "subtract", "tanh", "xor", "reduce-precision", "erf", "cbrt", "tan"})
# Ops XLA fuses into their neighbours' kernels: no launch and no HBM pass of their own (their
# layouts still flow, and a layout change they need is still paid).
FUSED_OPCODES = LAYOUT_PRESERVING_OPCODES | frozenset({
    "broadcast", "convert", "bitcast", "reshape", "parameter", "constant", "get-tuple-element", "tuple", "iota"})
# Ops that pass tensors on without reading them: they need no particular layout.
_DATA_FREE_OPCODES = frozenset({"tuple", "get-tuple-element", "bitcast"})
# Ops that call small scalar computations (reducers, comparators): those are not costed.
_SCALAR_CALLERS = frozenset({"reduce", "reduce-window", "map", "sort", "scatter", "select-and-scatter",
                             "all-reduce", "reduce-scatter"})


def passes_layout(instruction) -> bool:
  """Whether an op's result takes the layout of its same-shaped first operand: elementwise ops, and
  identity transposes (TensorFlow's matmul emits one after many dots), which are bitcasts."""
  if instruction.opcode == "transpose":
    return list(instruction.dimensions) == sorted(instruction.dimensions)
  return instruction.opcode in LAYOUT_PRESERVING_OPCODES


def _axis(slot: int, num_tensors: int) -> list:
  """The shape that puts a (k,) table of `slot` on its own axis among a node's tensor slots."""
  axis = [1] * num_tensors
  axis[slot] = -1
  return axis


def _roofline(flops, peak, bytes_moved):
  return np.maximum(flops / peak, bytes_moved / hardware.HBM_BYTES_PER_SECOND) + hardware.OP_OVERHEAD_SECONDS


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
      tensors = ([instruction] + hardware.operands_of(instruction, by_id))[:features.LAYOUT_MAX_TENSORS]
      alternatives = candidates.alternative_layouts(instruction, tensors, by_id)
      for slot, (tensor, alternative) in enumerate(zip(tensors, alternatives)):
        if hardware.is_array(tensor.shape) and len(tensor.shape.dimensions) >= 1:
          slot_variable[node, slot] = len(self.variables)
          self.node_variables[j, slot] = len(self.variables)
          self.variables.append(self._variable(node, slot, tensor.shape, alternative))
    self.constant = 0.0
    self._factors: dict[tuple, np.ndarray] = {}
    # The variable whose layout each node's result has (propagated), or -1 for the default.
    source = np.full(len(instructions), -1, np.int64)
    for node, instruction in enumerate(instructions):
      operands = hardware.operands_of(instruction, by_id)
      if (node, 0) in slot_variable:
        source[node] = slot_variable[node, 0]
      elif (passes_layout(instruction) and operands and hardware.is_array(instruction.shape)
            and list(operands[0].shape.dimensions) == list(instruction.shape.dimensions)):
        source[node] = source[node_of_id[operands[0].id]]
      if costed[node]:
        self._add_node_costs(node, instruction, operands, source, slot_variable, node_of_id, by_id)

  @staticmethod
  def _variable(node: int, slot: int, shape, alternative: Optional[tuple]) -> LayoutVariable:
    dims = tuple(int(d) for d in shape.dimensions)
    choices = candidates.candidate_layouts(len(dims), alternative)
    padded = (np.asarray([hardware.padded_elements(dims, c) for c in choices], np.float64)
              * hardware.element_bytes(shape))
    return LayoutVariable(node, slot, dims, choices, padded)

  def _tensor_bytes(self, shape, variable: int) -> np.ndarray:
    """(k,) bytes of a tensor of `shape` laid out as each choice of `variable`, or (1,) default."""
    if variable >= 0:
      return self.variables[variable].padded_bytes
    dims = list(shape.dimensions)
    default = candidates.default_layout(len(dims))
    return np.asarray([hardware.padded_elements(dims, default) * hardware.element_bytes(shape)], np.float64)

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
    return np.where(same, 0.0, COPY_SHARE * 2 * hardware.array_bytes(shape) / hardware.HBM_BYTES_PER_SECOND)

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
    flops = hardware.instruction_flops(instruction, by_id)
    peak = hardware.MXU_FLOPS if instruction.opcode in candidates.MXU_OPCODES else hardware.VECTOR_FLOPS
    if (node, 0) in slot_variable:
      # A configurable node: a factor over its (up to 3) tensor slots.
      slots = [slot_variable.get((node, s), -1) for s in range(features.LAYOUT_MAX_TENSORS)]
      tensors = ([instruction] + operands)[:features.LAYOUT_MAX_TENSORS]
      bytes_moved, efficiency = 0.0, 1.0
      if instruction.opcode in candidates.MXU_OPCODES:
        # The matrix unit's emitter tiles its operands itself as it streams them in: they cost
        # their bytes whatever their layout; the result is written in its (padded) layout.
        bytes_moved = self.variables[slots[0]].padded_bytes.reshape(_axis(0, len(tensors))) + sum(
            hardware.array_bytes(operand.shape) for operand in operands)
        efficiency = self._lane_utilisation(instruction, slots, len(tensors), by_id)
      else:
        for s, tensor in enumerate(tensors):
          if slots[s] >= 0:
            bytes_moved = bytes_moved + self.variables[slots[s]].padded_bytes.reshape(_axis(s, len(tensors)))
      table = _roofline(flops, peak * efficiency, bytes_moved)
      if instruction.opcode in ("reshape", "transpose") and len(tensors) == 2 and min(slots) >= 0:
        table = np.where(_bitcast_pairs(instruction, self.variables[slots[0]], self.variables[slots[1]]),
                         hardware.OP_OVERHEAD_SECONDS, table)
      shape = [len(self.variables[v].choices) if v >= 0 else 1 for v in slots[:len(tensors)]]
      self._add(tuple(slots[:len(tensors)]), np.broadcast_to(np.asarray(table, np.float64), shape))
      wanted_layouts = {s - 1: slots[s] for s in range(1, len(tensors))}
    else:
      own = source[node]
      bytes_moved = self._tensor_bytes(instruction.shape, own) if hardware.is_array(instruction.shape) else np.zeros(1)
      wanted_layouts = {}
      for j, operand in enumerate(operands):
        if not hardware.is_array(operand.shape):
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
    # take their alternative layouts run a little faster, not slower: docs/generated-data.md).
    for j, wanted in wanted_layouts.items():
      produced = source[node_of_id[operands[j].id]]
      if wanted == produced or produced < 0:
        continue
      self._add((produced, wanted), self._copy_table(operands[j].shape, produced, wanted))

  def _lane_utilisation(self, instruction, slots: list, num_tensors: int, by_id) -> np.ndarray:
    """Matrix-unit utilisation of a convolution or dot under each (result, lhs) layout choice,
    relative to hardware.MXU_FLOPS and shaped to broadcast over the node's slots.

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
    several times over, as the real unet3d's first weight gradient does, while a 4-wide
    dimension there (unet_3d.4x4.bf16) costs nothing measurable (docs/generated-data.md).
    """
    result = self.variables[slots[0]]
    preferred = candidates.preferred_minor_dims(instruction, by_id)
    output_features = preferred[0]
    result_minor = result.choices[:, 0]
    result_sizes = np.asarray(result.dims)[result_minor]
    lanes = hardware.lane_utilisation(result_sizes)
    feature_lanes = hardware.lane_utilisation(np.asarray(result.dims[output_features]))
    lhs_dims = np.asarray(by_id[instruction.operand_ids[0]].shape.dimensions)
    if slots[1] >= 0:
      lhs_minor = self.variables[slots[1]].choices[:, 0]
    else:
      lhs_minor = np.asarray(candidates.default_layout(len(lhs_dims))[:1])
    lhs_streams = (lhs_minor == preferred[1]).reshape(_axis(1, num_tensors))
    vector_loop = (hardware.VECTOR_FLOPS / hardware.MXU_FLOPS
                   * hardware.lane_utilisation(lhs_dims[lhs_minor])).reshape(_axis(1, num_tensors))
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
