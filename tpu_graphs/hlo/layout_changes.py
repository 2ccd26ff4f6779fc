"""What kind of change a layout config makes to each tensor it sets, and which kinds a compiler may
make: candidates (candidates.py) leave fixed layouts alone, and descriptions (descriptions.py)
mark the kind of each tensor they list.

A layout config sets, per configurable instruction, the layout of its result and of its operands
(the layout the instruction reads them in). What that tensor is decides who owns its layout:
* ENTRY_PARAMETER: a parameter of the entry computation (or an element of one, get-tuple-element):
  its layout is the entry computation layout's, which the caller of the compiled program fixes;
* ENTRY_RESULT: the entry computation's root, and what it forwards: the elements of a root tuple,
  the tuple element a root get-tuple-element reads (`entry_results`): the same;
* CUSTOM_CALL: an operand or the result of a custom call whose layouts are constrained
  (operand_shapes_with_layout): XLA keeps them as the custom call asks;
* INTERNAL: any other tensor, whose layout XLA's layout assignment chooses.
A tensor of several kinds takes the first of CUSTOM_CALL, ENTRY_PARAMETER, ENTRY_RESULT. Only
INTERNAL tensors change by default; ENTRY_PARAMETER and ENTRY_RESULT ones too where the caller owns
the entry computation layout (`change_entry_layouts`); CUSTOM_CALL ones never.
native/hlo/layout_changes.cc applies the same rule.
"""

from __future__ import annotations

from tensorflow.compiler.xla.service import hlo_pb2

INTERNAL = "internal"
ENTRY_PARAMETER = "entry parameter"
ENTRY_RESULT = "entry result"
CUSTOM_CALL = "custom call"
# Where no module is known (an npz file names no instructions).
UNKNOWN = "unknown"
# A described tensor the config leaves at its own layout: no change.
KEPT = "kept"
# The kinds whose layouts belong to someone other than the compiler's layout assignment.
FIXED_BY_OTHERS = (ENTRY_PARAMETER, ENTRY_RESULT, CUSTOM_CALL)


def entry_results(by_id: dict, root_id: int) -> list[int]:
  """Ids of the entry root and of the tensors it forwards as the program's result: a tuple's
  elements, the element a get-tuple-element of a tuple reads, and theirs in turn."""
  found, pending = [], [root_id]
  while pending:
    instruction = by_id.get(pending.pop())
    if instruction is None or instruction.id in found:
      continue
    found.append(instruction.id)
    if instruction.opcode == "tuple":
      pending.extend(instruction.operand_ids)
    elif instruction.opcode == "get-tuple-element" and instruction.operand_ids:
      tuple_ = by_id.get(instruction.operand_ids[0])
      if tuple_ is not None and tuple_.opcode == "tuple" and 0 <= instruction.tuple_index < len(tuple_.operand_ids):
        pending.append(tuple_.operand_ids[instruction.tuple_index])
  return found


def change_kinds(module: hlo_pb2.HloModuleProto) -> dict[int, str]:
  """Instruction id -> the kind of a change to its result's layout, for every instruction that is
  not INTERNAL."""
  kinds = {}
  entry = next((c for c in module.computations if c.id == module.entry_computation_id), None)
  if entry is not None:
    by_id = {i.id: i for i in entry.instructions}
    kinds.update({result: ENTRY_RESULT for result in entry_results(by_id, entry.root_id)})
    for instruction in entry.instructions:
      if instruction.opcode == "parameter" or (
          instruction.opcode == "get-tuple-element" and instruction.operand_ids
          and by_id.get(instruction.operand_ids[0], instruction).opcode == "parameter"):
        kinds[instruction.id] = ENTRY_PARAMETER
  for computation in module.computations:
    for instruction in computation.instructions:
      if instruction.opcode == "custom-call" and instruction.operand_shapes_with_layout:
        kinds.update({tensor: CUSTOM_CALL for tensor in [instruction.id, *instruction.operand_ids]})
  return kinds


def own_layout(shape) -> tuple[int, ...]:
  """A tensor's minor-to-major order in the module: its layout, or XLA's default (descending)
  where the shape carries none."""
  return tuple(shape.layout.minor_to_major) or tuple(range(len(shape.dimensions) - 1, -1, -1))


def may_change(kind: str, change_entry_layouts: bool) -> bool:
  """Whether candidates may set a tensor of `kind` to another layout than its own."""
  return kind == INTERNAL or (change_entry_layouts and kind in (ENTRY_PARAMETER, ENTRY_RESULT))
