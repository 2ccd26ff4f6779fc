"""An optimized module's fused kernels as modules of their own, shaped like the release's kernel
modules (the tile collection's graphs; native/hlo/fusion_kernels.cc makes the same)."""

from __future__ import annotations

from typing import Optional

from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.data import graphs
from tpu_graphs.hlo import module_check


def _called_computations(computations: dict, roots) -> list[int]:
  """Ids of the computations `roots` call, transitively, each after every computation it calls."""
  ordered: list[int] = []

  def visit(computation_id: int) -> None:
    if computation_id in ordered:
      return
    for instruction in computations[computation_id].instructions:
      for callee in instruction.called_computation_ids:
        visit(callee)
    ordered.append(computation_id)

  for computation_id in roots:
    visit(computation_id)
  return ordered


def kernel_modules(module: hlo_pb2.HloModuleProto, source: Optional[str] = None) -> list[hlo_pb2.HloModuleProto]:
  """One module per fusion instruction of `module`, shaped like the release's kernel modules.

  Each holds the computations the fusion calls (transitively, callees first) and an entry
  computation named after the fusion: one parameter per distinct operand, and the fusion as root.
  `source` (a file) is what errors name; defaults to the module.

  Raises:
    graphs.GraphFileError: the module is malformed (check_module) or has no fusion (it was not optimized).
  """
  source = source or f"HLO module {module.name!r}"
  module_check.check_module(module, source)
  computations = {c.id: c for c in module.computations}
  instructions = {i.id: i for c in module.computations for i in c.instructions}
  fusions = [(c, i) for c in module.computations for i in c.instructions if i.opcode == "fusion"]
  # A fusion nested inside another fusion's computations belongs to that kernel.
  fused = set(_called_computations(computations, [cid for _, i in fusions for cid in i.called_computation_ids]))
  fusions = [fusion for computation, fusion in fusions if computation.id not in fused]
  if not fusions:
    named = "" if f"{module.name!r}" in source else f"module {module.name!r} "
    raise graphs.GraphFileError(source, f"{named}has no fusion instruction to make a kernel of: kernels need the "
                                "optimized HLO (stage='optimized_hlo_serialized', or XLA's *after_optimizations.hlo.pb "
                                "dump), not the unoptimized one (stage='hlo_serialized')")
  next_id = 1 + max(instructions)
  kernels = []
  for fusion in fusions:
    kernel = hlo_pb2.HloModuleProto(name=fusion.name, entry_computation_name=fusion.name)
    called = _called_computations(computations, fusion.called_computation_ids)
    kernel.computations.extend(computations[c] for c in called)
    entry = kernel.computations.add(name=fusion.name, id=next_id)
    parameter_ids = {}
    for number, operand_id in enumerate(dict.fromkeys(fusion.operand_ids)):
      parameter = entry.instructions.add(
          name=f"parameter.{number}", opcode="parameter", id=next_id + 1 + number, parameter_number=number)
      parameter.shape.CopyFrom(instructions[operand_id].shape)
      parameter_ids[operand_id] = parameter.id
    root = entry.instructions.add()
    root.CopyFrom(fusion)
    del root.operand_ids[:]
    root.operand_ids.extend(parameter_ids[o] for o in fusion.operand_ids)
    entry.root_id = root.id
    kernel.entry_computation_id = entry.id
    kernels.append(kernel)
  return kernels
