"""The module written back: a layout config applied to the module it was drawn for, so that a
compiler (or XLA's own tools) gets the chosen layouts as a module, not only as a description.

A layout config sets, per configurable instruction, the minor-most dims of its result and of the
operands it reads (features.CONFIGURED_LAYOUT_DIMS of them; descriptions.py). Written back:
* the order is completed to a full minor_to_major permutation: the listed dims first, then the
  tensor's other dims in the order its layout in the module gives them (layout_changes.own_layout;
  an operand's is its producer's, after the results are set);
* a result's order is set on the instruction's own shape;
* an operand's is the layout the instruction reads it in, and in an HloModuleProto an operand is
  another instruction's result, which other instructions may read in another layout. So where the
  producer's layout is not the order wanted, a `copy` of the producer with that layout is inserted
  right after the producer and the instruction reads the copy, as XLA's layout assignment
  converts a layout where a use needs another. One copy serves every use wanting the same order of
  the same producer. Results are set first (in config order), so an operand read in its producer's
  new layout needs no copy.
Copies get the next free ids (after the module's largest) and the producer's name with ".copy"
(".copy.1", ... where taken). Nothing else changes: the program shapes (host_program_shape, a
computation's program_shape) keep the entry computation layout its caller fixes, and an HloProto's
buffer assignment, which new layouts and copies make stale, is left out. Re-featurizing the module
written (featurize.program_graph) gives back the config's features exactly.

Tile configs are not written: an HloModuleProto carries no tile sizes (a TPU fusion's tiling lives
in its backend config, which XLA's open source does not define); the caller sets the output tile
rank.py prints on the fusion. native/hlo/module_writer.cc writes the same module, byte for byte.

    written_module(data, "in.pb", num_candidates=100, seed=0, config=17) -> (bytes, copies inserted)
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.data import graphs
from tpu_graphs.hlo import candidates
from tpu_graphs.hlo import features
from tpu_graphs.hlo import hlo_input
from tpu_graphs.hlo import layout_changes
from tpu_graphs.hlo import tuning_pb2
from tpu_graphs.hlo import work_limits

# What the caller must do with a tile config, which a module cannot carry (rank.py, //native:rank).
TILE_SIZES_NOT_WRITTEN = (
    "a module carries no tile sizes (a TPU fusion's tiling lives in its backend config, which XLA's open source does "
    "not define): --write_module writes layout configs; set the output tile printed for each fusion yourself")


# --write_module's refusals of what it cannot write back (rank.py, //native:rank say them alike).
NEEDS_CANDIDATES = ("--write_module applies one of the candidate configs drawn: give --num_candidates N (a module's "
                    "own config is the module as it is)")
NEEDS_A_MODULE = "--write_module writes an HLO module back: the input must be one (.pb), not an npz file"


def written_line(path: str, config: int, num_copies: int) -> str:
  """What rank.py and //native:rank print after writing the module."""
  return (f"wrote {path}: candidate {config} applied, {num_copies} cop{'y' if num_copies == 1 else 'ies'} inserted "
          "for operands read in another layout than their producer's")


# The largest id an HloInstructionProto holds (int64).
_LARGEST_ID = 2**63 - 1


def full_order(listed: Sequence[int], current: Sequence[int]) -> tuple[int, ...]:
  """The minor_to_major permutation a config's partial order makes: the `listed` minor-most dims
  first, then the other dims of `current` (the tensor's order in the module) in their order."""
  return tuple(listed) + tuple(d for d in current if d not in listed)


def _current_order(shape) -> tuple[int, ...]:
  """A tensor's order to complete from: its own layout (the default where it carries none), or the
  default where that is no permutation of its dims (a malformed layout)."""
  own = layout_changes.own_layout(shape)
  return own if sorted(own) == list(range(len(shape.dimensions))) else candidates.default_layout(len(shape.dimensions))


def _unique_name(base: str, taken: set) -> str:
  name, n = f"{base}.copy", 0
  while name in taken:
    n += 1
    name = f"{base}.copy.{n}"
  taken.add(name)
  return name


def apply_layout_config(module: hlo_pb2.HloModuleProto, node_config_ids: Sequence[int], node_config_feat: np.ndarray,
                        source: str) -> tuple[hlo_pb2.HloModuleProto, int]:
  """A copy of `module` with one layout config applied (the module docstring's rule), and how many
  copies it inserted. `node_config_ids` (nc,): node i is the module's i-th instruction,
  computations in order (featurize's numbering); `node_config_feat` (nc, 18): the config's features.

  Raises:
    graphs.GraphFileError: a node id outside the module, or a layout value that is no dim of its
      tensor (features no candidate of this module has).
  """
  written = hlo_pb2.HloModuleProto()
  written.CopyFrom(module)
  located = [(c, k) for c, computation in enumerate(written.computations) for k in range(len(computation.instructions))]
  by_id = {i.id: i for computation in written.computations for i in computation.instructions}
  rows = np.asarray(node_config_feat).reshape(len(node_config_ids), features.LAYOUT_MAX_TENSORS,
                                              features.LAYOUT_MAX_DIMS)

  def listed_dims(j: int, slot: int, shape) -> Optional[list[int]]:
    dims = [int(d) for d in rows[j, slot] if d >= 0]
    if not dims:
      return None
    if len(set(dims)) != len(dims) or not all(d < len(shape.dimensions) for d in dims):
      raise graphs.GraphFileError(source, f"the config sets a layout value that is no dim of its tensor (configurable "
                                  f"node {int(node_config_ids[j])}, tensor {slot}, rank {len(shape.dimensions)})")
    return dims

  consumers = []
  for j, node in enumerate(node_config_ids):
    if not 0 <= int(node) < len(located):
      raise graphs.GraphFileError(source, f"configurable node {int(node)} is outside the {len(located)} instructions")
    c, k = located[int(node)]
    consumers.append(written.computations[c].instructions[k])
  for j, instruction in enumerate(consumers):  # results first: operands read them in their new layouts
    dims = listed_dims(j, 0, instruction.shape)
    if dims is not None:
      order = full_order(dims, _current_order(instruction.shape))
      instruction.shape.layout.minor_to_major[:] = order
  copies = {}  # (producer id, order) -> the copy
  after = {}  # producer id -> its copies, in order made
  taken = {i.name for i in by_id.values()}
  largest_id = max(by_id, default=-1)
  for j, instruction in enumerate(consumers):
    for slot in range(1, min(features.LAYOUT_MAX_TENSORS, len(instruction.operand_ids) + 1)):
      producer = by_id[instruction.operand_ids[slot - 1]]
      dims = listed_dims(j, slot, producer.shape)
      if dims is None:
        continue
      order = full_order(dims, _current_order(producer.shape))
      if tuple(producer.shape.layout.minor_to_major) == order:
        continue
      copy = copies.get((producer.id, order))
      if copy is None:
        if largest_id == _LARGEST_ID:
          raise graphs.GraphFileError(source, f"instruction id {_LARGEST_ID} is taken: no id is left for a copy")
        largest_id += 1
        copy = hlo_pb2.HloInstructionProto(name=_unique_name(producer.name, taken), opcode="copy", id=largest_id,
                                           operand_ids=[producer.id])
        copy.shape.CopyFrom(producer.shape)
        copy.shape.layout.minor_to_major[:] = order
        copies[(producer.id, order)] = copy
        after.setdefault(producer.id, []).append(copy)
      instruction.operand_ids[slot - 1] = copy.id
  if after:
    for computation in written.computations:
      if any(i.id in after for i in computation.instructions):
        ordered = []
        for instruction in computation.instructions:
          ordered.append(instruction)
          ordered.extend(after.get(instruction.id, ()))
        rebuilt = hlo_pb2.HloComputationProto()
        rebuilt.CopyFrom(computation)
        del rebuilt.instructions[:]
        rebuilt.instructions.extend(ordered)
        computation.CopyFrom(rebuilt)
  return written, len(copies)


def written_module(data: bytes, source: str, num_candidates: int, seed: int, config: int,
                   limits: work_limits.WorkLimits = work_limits.WorkLimits(),
                   change_entry_layouts: bool = False) -> tuple[bytes, int]:
  """The serialized module of `data` with candidate `config` of its layout candidates (drawn as
  candidates.candidate_graphs draws them with the same arguments) applied, in the wrapper it came
  in: an HloModuleProto as one, an HloProto as one (without its buffer assignment); a
  ModuleTuningData gives its module (its runs measured other layouts). Returns the bytes
  (deterministic serialization, as module_writer.cc writes them) and the copies inserted.

  Raises:
    graphs.GraphFileError: bytes that are no module, a TuningData (tile configs: TILE_SIZES_NOT_WRITTEN),
      or a config outside the candidates drawn.
    work_limits.WorkLimitError: candidates beyond `limits`, as candidate_graphs refuses them.
  """
  work_limits.check_module_bytes(len(data), limits, source)
  message = hlo_input.parse_hlo_message(data, source)
  if isinstance(message, tuning_pb2.TuningData):
    raise graphs.GraphFileError(source, "holds kernels' tuning data (TuningData): " + TILE_SIZES_NOT_WRITTEN)
  module = message.hlo_module if isinstance(message, hlo_pb2.HloProto) else (
      message.module if isinstance(message, tuning_pb2.ModuleTuningData) else message)
  [graph] = candidates.candidate_graphs(message.hlo_module if isinstance(message, hlo_pb2.HloProto) else message,
                                        num_candidates, False, seed, source, limits, change_entry_layouts)
  if not 0 <= config < graph.num_configs:
    raise graphs.GraphFileError(source, f"config {config} is not among the {graph.num_configs} candidates drawn "
                                f"(num_candidates {num_candidates}, seed {seed})")
  applied, num_copies = apply_layout_config(module, graph.node_config_ids, graph.node_config_feat[config], source)
  if isinstance(message, hlo_pb2.HloProto):
    applied = hlo_pb2.HloProto(hlo_module=applied)
  return applied.SerializeToString(deterministic=True), num_copies
