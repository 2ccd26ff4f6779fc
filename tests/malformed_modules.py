"""Malformed HLO modules, each with the message (a regular expression) both featurizers refuse it
with: the Python one (tests/hlo/test_module_check.py) and the C++ one (tests/native/test_native_featurizer.py)."""

from __future__ import annotations

from typing import Optional

import pytest
from tensorflow.compiler.xla.service import hlo_pb2


def module(*instructions: dict, computations: Optional[list] = None,
           entry: Optional[int] = 1, entry_name: str = "") -> hlo_pb2.HloModuleProto:
  """An HloModuleProto of one computation (id 1, "main") holding `instructions` (dicts of fields),
  the last one its root; `computations` adds (id, name, [called ids]) computations of one parameter
  each; `entry` is its entry_computation_id, `entry_name` its entry_computation_name."""
  built = hlo_pb2.HloModuleProto(name="m", entry_computation_name=entry_name)
  main = built.computations.add(name="main", id=1)
  for fields in instructions:
    instruction = main.instructions.add(**{key: value for key, value in fields.items() if key != "dims"})
    instruction.shape.element_type = 11  # F32
    instruction.shape.dimensions.extend(fields.get("dims", [4]))
  main.root_id = main.instructions[-1].id
  for computation_id, name, calls in computations or []:
    extra = built.computations.add(name=name, id=computation_id)
    extra.instructions.add(name=f"p.{computation_id}", opcode="parameter", id=100 + computation_id,
                           called_computation_ids=calls)
    extra.root_id = 100 + computation_id
  if entry is not None:
    built.entry_computation_id = entry
  return built


PARAMETER = {"name": "p", "opcode": "parameter", "id": 10}

CASES = [
    pytest.param(module(PARAMETER, {"name": "add.3", "opcode": "add", "id": 11, "operand_ids": [10, 11]}),
                 r"module 'm': instruction 'add.3' is its own operand \(a cycle\)", id="self_cycle"),
    pytest.param(module(PARAMETER, {"name": "a", "opcode": "add", "id": 11, "operand_ids": [10, 12]},
                        {"name": "b", "opcode": "add", "id": 12, "operand_ids": [11]}),
                 r"module 'm': instruction '[ab]' depends on itself through its operands \(a cycle in computation "
                 r"'main'\)", id="two_instruction_cycle"),
    pytest.param(module(PARAMETER, {"name": "neg", "opcode": "negate", "id": 11, "operand_ids": [10]}, entry=None),
                 r"module 'm': has no entry computation", id="no_entry_computation"),
    pytest.param(module(PARAMETER, {"name": "neg", "opcode": "negate", "id": 11, "operand_ids": [10]}, entry=5,
                        entry_name="main"),
                 r"module 'm': has no entry computation \(entry_computation_id 5 names none of its 1 computations, "
                 r"as XLA requires\)", id="entry_id_naming_no_computation_beside_the_entry_name"),
    pytest.param(module(PARAMETER, {"name": "neg", "opcode": "negate", "id": 11, "operand_ids": [10], "dims": [4, -1]}),
                 r"module 'm': instruction 'neg' has a negative dimension in its shape \[4, -1\]",
                 id="negative_dimension"),
    pytest.param(module(PARAMETER, {"name": "neg", "opcode": "negate", "id": 11, "operand_ids": [99]}),
                 r"module 'm': instruction 'neg' has operand id 99, which no instruction of computation 'main' has",
                 id="dangling_operand"),
    pytest.param(module(PARAMETER, {"name": "neg", "opcode": "negate", "id": 11, "operand_ids": [102]},
                        computations=[(2, "other", [])]),
                 r"instruction 'neg' has operand id 102, which no instruction of computation 'main' has \(a dangling "
                 r"operand\)", id="operand_of_another_computation"),
    pytest.param(module(PARAMETER, {"name": "call", "opcode": "call", "id": 11, "operand_ids": [10],
                                    "called_computation_ids": [2]}, computations=[(2, "f", [3]), (3, "g", [2])]),
                 r"module 'm': computation '[fg]' calls itself, directly or through others \(a cycle\)",
                 id="call_cycle"),
    pytest.param(module(PARAMETER, {"name": "call", "opcode": "call", "id": 11, "called_computation_ids": [7]}),
                 r"module 'm': instruction 'call' calls computation id 7, which the module lacks",
                 id="call_of_a_missing_computation"),
]
# Case id -> its module.
MODULES = {case.id: case.values[0] for case in CASES}
