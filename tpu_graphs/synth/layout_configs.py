"""The configs of generated layout files: which nodes are configurable, the compiler's own layouts,
and the default and random searches that draw configs over them, as the real collections' are.

A config is (num_variables,) int64 indices into each layout variable's candidate layouts
(layout_cost_model.LayoutCostModel.variables); a configurable node's candidates are the
combinations of its tensors' candidates, numbered in mixed radix.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from tpu_graphs.hlo import candidates
from tpu_graphs.hlo import featurize
from tpu_graphs.synth import hardware
from tpu_graphs.synth import layout_cost_model

CONFIGURABLE_OPCODES = frozenset({"convolution", "dot", "reshape"})
# Configurable reshapes per configurable matrix op: the real files have 0.06 (unet3d, the nlp test
# graph) to 0.65 (the xla test graph), 0.17 in unet_3d.4x4.bf16.
RESHAPE_SHARE = 0.15
# The default search (layout_choices): the share of configurable nodes a config keeps at the
# compiler's layout is drawn per config from U(0, DEFAULT_SEARCH_KEPT_MAX), and of the others this
# share take a random candidate, the rest the as-written layout; so a node takes its most common
# layout about as often as in the real default collections (docs/generated-data.md, "How it compares
# with real files").
DEFAULT_SEARCH_KEPT_MAX = 0.4
DEFAULT_SEARCH_EXPLORED = 0.3
# How far off (a share of the program's runtime) the compiler's estimate of a layout is.
COMPILER_ESTIMATE_ERROR = 0.003
_ESTIMATE_TIE = 1e-5


def configurable_nodes(nodes: featurize.ModuleFeatures, costed: np.ndarray, rng: np.random.Generator) -> np.ndarray:
  """The nodes configs set layouts for, ascending: as in the real files (unet3d: 53
  convolutions and 3 reshapes; the nlp test graph: 800 dots and 48 reshapes), every executed
  convolution and dot with an array result of rank >= 2, and beside them a random subset of the
  reshapes, RESHAPE_SHARE as many as the matrix ops (at least one)."""
  eligible = [i for i, inst in enumerate(nodes.instructions)
              if inst.opcode in CONFIGURABLE_OPCODES and costed[i] and hardware.is_array(inst.shape)
              and len(inst.shape.dimensions) >= 2]
  is_matrix = [nodes.instructions[i].opcode in candidates.MXU_OPCODES for i in eligible]
  matrix = [i for i, chosen in zip(eligible, is_matrix) if chosen]
  others = np.asarray([i for i, chosen in zip(eligible, is_matrix) if not chosen], np.int64)
  count = min(len(others), max(1, round(RESHAPE_SHARE * len(matrix))))
  return np.sort(np.concatenate([np.asarray(matrix, np.int64), rng.choice(others, size=count, replace=False)]))


def _set_combinations(choices: np.ndarray, variables: np.ndarray, sizes: np.ndarray, combinations: np.ndarray) -> None:
  """Writes candidate `combinations` (c,) of one node (mixed radix) into its `variables` of `choices` (c, v)."""
  combination = combinations.copy()
  for variable in variables[variables >= 0]:
    choices[:, variable] = combination % sizes[variable]
    combination //= sizes[variable]


def compiler_layouts(model: layout_cost_model.LayoutCostModel, rng: np.random.Generator) -> np.ndarray:
  """(nc,) int64 the compiler's own layout of each configurable node (a candidate in mixed radix):
  the one its analytical model expects to be fastest with every other node at the default.

  Its estimates are off by COMPILER_ESTIMATE_ERROR of the program's runtime, so it gets the
  layouts that matter right and the rest by chance; where estimates tie it picks the later
  candidate (an alternative over the as-written order, as XLA's TPU layout assignment, which
  puts real unet3d's activations batch-minor in its first config, does)."""
  sizes = np.asarray([len(v.choices) for v in model.variables], np.int64)
  default = model.runtimes(np.zeros((1, len(sizes)), np.int64))[0]
  chosen = np.zeros(len(model.node_variables), np.int64)
  for node, variables in enumerate(model.node_variables):
    count = int(np.prod(sizes[variables[variables >= 0]]))
    alone = np.zeros((count, len(sizes)), np.int64)  # the node at each candidate, the rest at the default
    _set_combinations(alone, variables, sizes, np.arange(count))
    estimates = model.runtimes(alone) / default
    estimates = estimates + COMPILER_ESTIMATE_ERROR * rng.standard_normal(count)
    chosen[node] = np.flatnonzero(estimates <= estimates.min() + _ESTIMATE_TIE)[-1]
  return chosen


def layout_choices(model: layout_cost_model.LayoutCostModel, search: str, count: int, rng: np.random.Generator,
                   first: bool, compiler: Optional[np.ndarray] = None) -> np.ndarray:
  """`count` configs: (count, num_variables) int64 indices into each variable's candidate layouts.

  A configurable node's candidates are the combinations of its tensors' candidate layouts (2 to 8,
  candidates.candidate_layouts). 'random' draws every node's layout uniformly from its
  candidates. 'default' searches as the real default collections' configs do (the `first` config
  of a file is the compiler's own, `compiler` from compiler_layouts, and is among the fastest,
  while the search's most common layout per op is the as-written one): each config keeps a share
  of the nodes, drawn per config from U(0, DEFAULT_SEARCH_KEPT_MAX), at the compiler's layout;
  of the rest, DEFAULT_SEARCH_EXPLORED take a uniformly drawn candidate and the others the
  as-written default (choice 0). So an op off its most common layout is as often at the
  compiler's (usually faster) choice as at a random one, and straying is not slow as such.
  """
  sizes = np.asarray([len(v.choices) for v in model.variables], np.int64)
  if search == "random":
    return candidates.uniform_choices(sizes, count, rng)
  if compiler is None:
    raise ValueError("the default search needs the compiler's layouts (compiler_layouts)")
  choices = np.zeros((count, len(sizes)), np.int64)
  kept_share = rng.random(count) * DEFAULT_SEARCH_KEPT_MAX
  if first:
    kept_share[0] = 1.0
  for node, variables in enumerate(model.node_variables):
    combinations = int(np.prod(sizes[variables[variables >= 0]]))
    kept = rng.random(count) < kept_share
    explored = rng.random(count) < DEFAULT_SEARCH_EXPLORED
    drawn = (rng.random(count) * combinations).astype(np.int64)
    _set_combinations(choices, variables, sizes, np.where(kept, compiler[node], np.where(explored, drawn, 0)))
  return choices
