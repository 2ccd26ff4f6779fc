"""Whether an HloModuleProto is a module at all: the one check every reader of a module makes before
anything reads it (featurize.py, fusion_kernels.py; native/hlo/module_check.cc makes the same, with the
same messages)."""

from __future__ import annotations

from typing import Optional

from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.data import graphs


def _shape_problem(shape) -> Optional[str]:
  """Why an instruction's shape (or a tuple element of it) is not a shape, or None."""
  if any(size < 0 for size in shape.dimensions):
    return f"has a negative dimension in its shape {list(shape.dimensions)}"
  for element in shape.tuple_shapes:
    problem = _shape_problem(element)
    if problem:
      return problem
  return None


def _first_in_cycle(successors: dict) -> Optional[object]:
  """A key of `successors` (key -> keys it depends on) that lies on or behind a cycle, or None.

  Kahn's algorithm: repeatedly drop what depends on nothing left; what cannot be dropped waits
  on a cycle.
  """
  waiting = {key: len(set(after)) for key, after in successors.items()}
  dependents: dict = {}
  for key, after in successors.items():
    for other in set(after):
      dependents.setdefault(other, []).append(key)
  ready = [key for key, count in waiting.items() if count == 0]
  while ready:
    key = ready.pop()
    for dependent in dependents.get(key, ()):
      waiting[dependent] -= 1
      if waiting[dependent] == 0:
        ready.append(dependent)
  stuck = [key for key, count in waiting.items() if count > 0]
  if not stuck:
    return None
  # Walk back along dependencies that are stuck too until a key repeats: it is on the cycle.
  seen, key = set(), stuck[0]
  while key not in seen:
    seen.add(key)
    key = next(other for other in successors[key] if waiting.get(other, 0) > 0)
  return key


def check_module(module: hlo_pb2.HloModuleProto, source: str) -> None:
  """Raises GraphFileError, naming the module, the instruction and the problem, if `module` is not a
  well-formed HLO module: no entry computation, a computation whose root is not one of its
  instructions, an instruction id used twice, an operand that is no instruction of the same
  computation (dangling), a negative dimension, a data-flow cycle (an instruction that is its own
  operand included) or computations that call each other in a cycle. The one check of a module,
  before anything reads it."""
  def refuse(problem: str):
    named = f"{module.name!r}" in source  # e.g. "HLO module 'x'", else a file: name the module too
    raise graphs.GraphFileError(source, problem if named else f"module {module.name!r}: {problem}")

  if not any(c.instructions for c in module.computations):
    refuse("the module has no instructions")
  computations = {c.id: c for c in module.computations}
  if module.entry_computation_id not in computations:  # XLA finds the entry by id alone, and refuses the module
    refuse(f"has no entry computation (entry_computation_id {module.entry_computation_id} names none of its "
           f"{len(computations)} computations, as XLA requires)")
  computation_of = {}
  for computation in module.computations:
    for instruction in computation.instructions:
      if instruction.id in computation_of:
        refuse(f"instruction id {instruction.id} ({instruction.name!r}) appears twice")
      computation_of[instruction.id] = computation.id
  for computation in module.computations:
    if computation.instructions and computation_of.get(computation.root_id) != computation.id:
      refuse(f"computation {computation.name!r} has root id {computation.root_id}, none of its instructions")
    operands = {}
    for instruction in computation.instructions:
      problem = _shape_problem(instruction.shape)
      if problem:
        refuse(f"instruction {instruction.name!r} {problem}")
      for operand_id in instruction.operand_ids:
        if operand_id == instruction.id:
          refuse(f"instruction {instruction.name!r} is its own operand (a cycle)")
        if computation_of.get(operand_id) != computation.id:
          refuse(f"instruction {instruction.name!r} has operand id {operand_id}, which no instruction of "
                 f"computation {computation.name!r} has (a dangling operand)")
      for callee in instruction.called_computation_ids:
        if callee not in computations:
          refuse(f"instruction {instruction.name!r} calls computation id {callee}, which the module lacks")
      operands[instruction.id] = list(instruction.operand_ids)
    cyclic = _first_in_cycle(operands)
    if cyclic is not None:
      names = {i.id: i.name for i in computation.instructions}
      refuse(f"instruction {names[cyclic]!r} depends on itself through its operands (a cycle in computation "
             f"{computation.name!r})")
  calls = {c.id: [callee for i in c.instructions for callee in i.called_computation_ids if callee in computations]
           for c in module.computations}
  cyclic = _first_in_cycle(calls)
  if cyclic is not None:
    refuse(f"computation {computations[cyclic].name!r} calls itself, directly or through others (a cycle)")
