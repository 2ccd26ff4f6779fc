"""What a config of a graph sets, read back from its config features, in a form a compiler applies.

* Tile configs: {"output_tile": [size per output dim], "kernel_tile": [a convolution's input and
  output feature tiles, else empty]}.
* Layout configs: {"layouts": {instruction name: {"result": {"dims": dims, "change": kind},
  "operand 0": {...}, ...}}} for every instruction the config moves from the module's own layouts
  (LAYOUTS_MEANING says how to read it); kind says whose layout the tensor's is
  (layout_changes.py: "internal", "entry parameter", "entry result", "custom call"; "kept" where
  the config leaves the tensor at its own layout). Without a
  module (an npz file names no instructions) the keys are "node <i>", every configurable node the
  config sets anything on is listed, and the kind is "unknown".

The C++ side (native/hlo/descriptions.cc) describes configs alike, and //native:rank and
baselines/rank.py print the same lines (`summary`).

    describe(graph, 7, configurable_tensors(module, graph.node_config_ids))
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np
from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.data import graphs
from tpu_graphs.hlo import features
from tpu_graphs.hlo import layout_changes

LAYOUTS_MEANING = (
    "layouts: for each instruction the config moves from the module's own layouts (named as in the module; "
    "'node <i>' where the input names none), the minor_to_major order it sets on the instruction's result and "
    "operands: the listed dims are the tensor's minor-most dims, minor-most first, and its other dims are free "
    "(a partial order, as XLA's layout assignment may complete it); 'change' says what kind of change it is: "
    "'kept' (the tensor's own layout), 'internal' (a layout XLA's layout assignment chooses), 'entry parameter' or "
    "'entry result' (the entry computation layout's, fixed by the program's caller), 'custom call' (fixed by a "
    "layout-constrained custom call), 'unknown' (no module)")
# Instructions a summary names before it says how many more a config moves.
_INSTRUCTIONS_SHOWN = 3


@dataclasses.dataclass(frozen=True)
class ConfigurableTensors:
  """A configurable instruction as descriptions name it: its name, and per tensor a layout config
  may set (result, operand 0, operand 1) the minor-to-major order the module gives it and the kind
  of a change to it (layout_changes.py)."""

  name: str
  own_layouts: tuple[tuple[int, ...], ...]
  changes: tuple[str, ...]


def tensor_role(tensor: int) -> str:
  """'result', 'operand 0', 'operand 1': the name of a layout config's tensor slot."""
  return "result" if tensor == 0 else f"operand {tensor - 1}"


def configurable_tensors(module: hlo_pb2.HloModuleProto, node_ids: Sequence[int]) -> list[ConfigurableTensors]:
  """The name, own layouts and change kinds of the instructions at `node_ids` (node i: the module's
  i-th instruction, computations in order, as featurize numbers them)."""
  instructions = [instruction for computation in module.computations for instruction in computation.instructions]
  by_id = {instruction.id: instruction for instruction in instructions}
  kinds = layout_changes.change_kinds(module)
  found = []
  for node in node_ids:
    instruction = instructions[node]
    tensors = ([instruction] + [by_id[o] for o in instruction.operand_ids])[:features.LAYOUT_MAX_TENSORS]
    found.append(ConfigurableTensors(instruction.name, tuple(layout_changes.own_layout(t.shape) for t in tensors),
                                     tuple(kinds.get(t.id, layout_changes.INTERNAL) for t in tensors)))
  return found


def describe_tile_config(config_feat: np.ndarray) -> dict:
  """What a tile config sets, from its (24,) features: the positive of the 6 output and kernel bounds."""
  return {"output_tile": [int(v) for v in config_feat[8:14] if v > 0],
          "kernel_tile": [int(v) for v in config_feat[0:6] if v > 0]}


def describe_layout_config(node_config_feat: np.ndarray, node_config_ids: np.ndarray,
                           configurable: Optional[Sequence[ConfigurableTensors]] = None) -> dict:
  """What a layout config sets, from its (nc, 18) features: the instructions one of whose tensors
  it sets to other minor-most dims than the module's own layout, with all the tensors it sets
  there and the kind of change each is ("kept" for a tensor it leaves at its own layout). `configurable`: per configurable node its name, own
  layouts and change kinds (configurable_tensors), or None where no module is known (then every
  node it sets anything on, of kind "unknown")."""
  layouts = {}
  for j, tensors in enumerate(node_config_feat.reshape(-1, features.LAYOUT_MAX_TENSORS, features.LAYOUT_MAX_DIMS)):
    known = configurable[j] if configurable is not None else None
    set_dims = [[int(d) for d in tensor if d >= 0] for tensor in tensors]
    moved = [bool(dims) and (known is None or t >= len(known.own_layouts)
                             or list(known.own_layouts[t][:len(dims)]) != dims) for t, dims in enumerate(set_dims)]
    if any(moved):
      name = known.name if known is not None else f"node {int(node_config_ids[j])}"
      layouts[name] = {tensor_role(t): {"dims": dims, "change": layout_changes.KEPT if not moved[t]
                                        else known.changes[t] if known is not None and t < len(known.changes)
                                        else layout_changes.UNKNOWN}
                       for t, dims in enumerate(set_dims) if dims}
  return {"layouts": layouts}


def describe(graph: graphs.Graph, config: int, configurable: Optional[Sequence[ConfigurableTensors]] = None) -> dict:
  """What config `config` of a graph held in memory sets (describe_tile_config, describe_layout_config)."""
  if isinstance(graph, graphs.TileGraph):
    return describe_tile_config(graph.config_feat[config])
  return describe_layout_config(graph.node_config_feat[config], graph.node_config_ids, configurable)


def summary(description: dict) -> str:
  """One line of what a described config sets: 'output tile [4, 8]; kernel tile [..]', or 'moves 2
  instructions: convolution.4 result [0, 1] operand 1 [2, 3] (entry parameter); ...', a tensor's
  kind of change said where a moved tensor is the entry's or a custom call's."""
  if "output_tile" in description:
    kernel = description["kernel_tile"]
    return f"output tile {description['output_tile']}" + (f"; kernel tile {kernel}" if kernel else "")
  layouts = description["layouts"]
  if not layouts:
    return "keeps the module's own layouts"
  shown = "; ".join(name + "".join(f" {role} {tensor['dims']}" + (
      f" ({tensor['change']})" if tensor["change"] in layout_changes.FIXED_BY_OTHERS else "")
                                   for role, tensor in tensors.items())
                    for name, tensors in list(layouts.items())[:_INSTRUCTIONS_SHOWN])
  more = f"; and {len(layouts) - _INSTRUCTIONS_SHOWN} more" if len(layouts) > _INSTRUCTIONS_SHOWN else ""
  return f"moves {len(layouts)} instruction{'s' if len(layouts) != 1 else ''}: {shown}{more}"
