"""The configurations XLA's autotuners would try for a program: candidate layouts and tile sizes.

One set of candidates serves the data generator (tpu_graphs/synth, which labels them with its
cost model) and users ranking their own programs (Ranker.rank_file, baselines/rank.py), so
what a model is trained on and what it is asked to rank are drawn alike.

* Layouts: each tensor (result, first two operands) of a configurable op is offered its default
  minor-to-major order and at most one alternative (`alternative_layouts`), so an op has 2 to 8
  candidates; a program's configs are combinations of its ops' candidates, sampled.
* Tile sizes: per output dimension the powers of two below its extent and the extent (the
  largest 5), and for a convolution its (input, output) feature tiles (the largest 4 each);
  combinations, sampled when there are more than MAX_TILE_CANDIDATES.

Draws come from splitmix64.SplitMix64(seed), which the C++ featurizer (native/hlo/candidates.cc)
draws alike: the same module and seed give the same candidates in both languages.

    program_candidates(module, 100)  -> LayoutGraph, config 0 the default, then sampled combinations
    kernel_candidates(kernel, 100)   -> TileGraph, one config per candidate tile size
"""

from __future__ import annotations

import itertools
import math
import os
from typing import Optional, Sequence, Union

import numpy as np
from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.data import graphs
from tpu_graphs.hlo import featurize, fusion_kernels, hlo_input, module_check
from tpu_graphs.hlo import features
from tpu_graphs.hlo import layout_changes
from tpu_graphs.hlo import splitmix64
from tpu_graphs.hlo import tuning_pb2
from tpu_graphs.hlo import work_limits

MXU_OPCODES = frozenset({"convolution", "dot"})
MAX_TILE_CANDIDATES = 2000
# Draws of `count` configs each before a sampled set of distinct layout configs stops growing.
_LAYOUT_DRAW_ROUNDS = 20


def default_layout(rank: int) -> tuple:
  """XLA's default minor-to-major order: descending, the last dimension minor-most."""
  return tuple(range(rank - 1, -1, -1))


def with_minor_most(order: Sequence[int], dim: int) -> tuple:
  """`order` with `dim` moved minor-most, the other dims keeping their relative order."""
  return (dim,) + tuple(d for d in order if d != dim)


def candidate_layouts(rank: int, alternative: Optional[Sequence[int]] = None) -> np.ndarray:
  """(k, rank) int64 minor-to-major orders the layout search offers one tensor: row 0 the default,
  then `alternative` when given and different from it (k = 1 or 2)."""
  orders = [default_layout(rank)]
  if alternative is not None and tuple(alternative) != orders[0]:
    orders.append(tuple(alternative))
  return np.asarray(orders, np.int64).reshape(len(orders), rank)


def preferred_minor_dims(instruction, by_id) -> list[Optional[int]]:
  """For matrix-unit ops: the dimension each tensor (result, lhs, rhs) wants minor-most."""
  if instruction.opcode == "convolution":
    n = instruction.convolution_dimension_numbers
    return [n.output_feature_dimension, n.input_feature_dimension, n.kernel_output_feature_dimension]
  if instruction.opcode == "dot":
    n = instruction.dot_dimension_numbers
    rhs_rank = len(by_id[instruction.operand_ids[1]].shape.dimensions) if len(instruction.operand_ids) > 1 else 0
    rhs_free = [d for d in range(rhs_rank) if d not in n.rhs_contracting_dimensions and d not in n.rhs_batch_dimensions]
    return [len(instruction.shape.dimensions) - 1, n.lhs_contracting_dimensions[0] if n.lhs_contracting_dimensions
            else None, rhs_free[-1] if rhs_free else None]
  return [None, None, None]


def alternative_layouts(instruction, tensors, by_id) -> list[Optional[tuple]]:
  """The one order beside the default that the layout search offers each of `tensors` (result,
  operands), or None.

  XLA's layout autotuner offers a few legal, sensible layouts per op, not every permutation, and
  the real sample's node_config_feat shows which, per op kind:
  * a convolution whose result is an activation (its batch dimension 0, major-most) keeps the
    result's default, output features minor-most: in the real unet3d those results never vary,
    while the weight-gradient convolutions' results (kernels, whose "batch" is the input
    features) take both orders of their two feature dims;
  * the other tensors of a convolution or dot are offered their feature / contracting dim
    minor-most, or where it is minor-most already, the two minor-most dims swapped;
  * a transpose's result and operand are offered the orders that make it a bitcast with the
    other at its default (the swap where that order is the default: an identity transpose);
  * any other tensor of rank >= 2 is offered its two minor-most dims swapped.
  So an op with up to three tensors has 2 to 8 candidates.
  """
  ranks = [len(t.shape.dimensions) for t in tensors]
  swapped = [with_minor_most(default_layout(rank), rank - 2) if rank >= 2 else None for rank in ranks]
  if instruction.opcode in MXU_OPCODES:
    dims = preferred_minor_dims(instruction, by_id)
    if instruction.opcode == "convolution" and instruction.convolution_dimension_numbers.output_batch_dimension == 0:
      swapped[0] = None
    return [swap if dim is None or dim == rank - 1 or not 0 <= dim < rank
            else with_minor_most(default_layout(rank), dim) for swap, dim, rank in zip(swapped, dims, ranks)]
  if instruction.opcode == "transpose" and len(tensors) == 2:
    permutation = list(instruction.dimensions)
    if sorted(permutation) != list(range(ranks[0])) or ranks[1] != ranks[0]:
      return swapped  # not a permutation of the result's dims: no bitcast to offer
    inverse = [permutation.index(d) for d in range(len(permutation))]
    default = default_layout(ranks[0])
    bitcasts = [tuple(inverse[d] for d in default), tuple(permutation[d] for d in default)]
    return [swap if bitcast == default else bitcast for swap, bitcast in zip(swapped, bitcasts)]
  return swapped


def fixed_layout(shape) -> np.ndarray:
  """(1, rank) int64: the one order of a tensor whose layout a config may not change: its own
  (layout_changes.own_layout), or the default where that is no order of its dims."""
  rank = len(shape.dimensions)
  own = layout_changes.own_layout(shape)
  return np.asarray([own if sorted(own) == list(range(rank)) else default_layout(rank)], np.int64).reshape(1, rank)


Random = Union[np.random.Generator, splitmix64.SplitMix64]


def uniform_choices(sizes: np.ndarray, count: int, rng: Random) -> np.ndarray:
  """(count, v) int64: for each of v layout variables with `sizes` (v,) choices, one drawn uniformly."""
  return (rng.random((count, len(sizes))) * sizes).astype(np.int64)


def sampled_layout_choices(sizes: np.ndarray, count: int, rng: Random) -> np.ndarray:
  """(c, v) int64 distinct configs, c <= count: row 0 every variable at its default (choice 0), then
  uniformly drawn combinations in the order drawn (all of them when there are at most `count`)."""
  sizes = np.asarray(sizes, np.int64)
  if math.prod(int(s) for s in sizes) <= count:
    every = list(itertools.product(*(range(int(s)) for s in sizes)))  # [()] for no variables: one config
    return np.asarray(every, np.int64).reshape(len(every), len(sizes))
  found = {tuple([0] * len(sizes)): None}
  for _ in range(_LAYOUT_DRAW_ROUNDS):
    if len(found) >= count:
      break
    for row in uniform_choices(sizes, count, rng):
      found.setdefault(tuple(int(v) for v in row), None)
      if len(found) == count:
        return np.asarray(list(found), np.int64)
  return np.asarray(list(found), np.int64)


def program_candidates(module: hlo_pb2.HloModuleProto, num_candidates: int, seed: int = 0,
                       graph_id: Optional[str] = None, collection: str = "layout:xla:default",
                       source: Optional[str] = None, configurable: Optional[Sequence[int]] = None,
                       limits: work_limits.WorkLimits = work_limits.WorkLimits(),
                       change_entry_layouts: bool = False) -> graphs.LayoutGraph:
  """An unlabelled layout graph of a whole module whose configs are candidate layouts.

  Configurable nodes are `configurable` (node indices, as a tuning data's config_index_to_node)
  where given, else its convolutions, dots and reshapes (featurize.CONFIGURABLE_OPCODES);
  each array tensor of rank >= 1 among a node's result and first two operands is offered
  `candidate_layouts`, its features.CONFIGURED_LAYOUT_DIMS minor-most dimensions written to the configs,
  except a tensor whose layout a change may not touch (layout_changes.may_change: an entry
  parameter's or result's unless `change_entry_layouts`, a constrained custom call's), which keeps
  its own (`fixed_layout`). Config 0 is every other tensor at its default; the others are
  distinct combinations drawn uniformly with `seed` (splitmix64), at most `num_candidates`
  configs in all.

  Raises:
    graphs.GraphFileError: a malformed module, or one with no configurable node.
    work_limits.WorkLimitError: config features beyond `limits`, before any is drawn.
  """
  if num_candidates < 1:
    raise ValueError(f"num_candidates must be positive, got {num_candidates}")
  source = source or f"HLO module {module.name!r}"
  nodes = featurize.module_features(module, source)
  by_id = {instruction.id: instruction for instruction in nodes.instructions}
  if configurable is None:
    node_ids = [i for i, instruction in enumerate(nodes.instructions)
                if instruction.opcode in featurize.CONFIGURABLE_OPCODES]
  else:
    node_ids = [int(i) for i in configurable]
    beyond = [i for i in node_ids if not 0 <= i < nodes.num_nodes]
    if beyond:
      raise graphs.GraphFileError(source, f"config_index_to_node holds {beyond[0]}, beyond the {nodes.num_nodes} nodes")
  kinds = layout_changes.change_kinds(module)
  slot_choices = []  # per configurable node: per slot a (k, rank) array or None
  for i in node_ids:
    instruction = nodes.instructions[i]
    tensors = ([instruction] + [by_id[o] for o in instruction.operand_ids])[:features.LAYOUT_MAX_TENSORS]
    slot_choices.append([
        None if not t.shape.dimensions or t.shape.tuple_shapes
        else candidate_layouts(len(t.shape.dimensions), alternative)
        if layout_changes.may_change(kinds.get(t.id, layout_changes.INTERNAL), change_entry_layouts)
        else fixed_layout(t.shape)
        for t, alternative in zip(tensors, alternative_layouts(instruction, tensors, by_id))])
  if not node_ids:
    raise graphs.GraphFileError(source, "has no convolution, dot or reshape: no layout to choose")
  variables = [choices for node in slot_choices for choices in node if choices is not None]
  work_limits.check_config_bytes(min(num_candidates, math.prod(len(v) for v in variables)),
                                 len(node_ids) * graphs.LAYOUT_CONFIG_FEATURE_WIDTH, limits, source)
  picked = sampled_layout_choices(np.asarray([len(v) for v in variables], np.int64), num_candidates,
                                  splitmix64.SplitMix64(seed))
  config_feat = np.full((picked.shape[0], len(node_ids), features.LAYOUT_MAX_TENSORS * features.LAYOUT_MAX_DIMS),
                        -1.0, np.float32)
  variable = 0
  for j, node in enumerate(slot_choices):
    for slot, choices in enumerate(node):
      if choices is None:
        continue
      orders = choices[picked[:, variable]][:, :features.CONFIGURED_LAYOUT_DIMS]
      start = slot * features.LAYOUT_MAX_DIMS
      config_feat[:, j, start:start + orders.shape[1]] = orders
      variable += 1
  arrays = dict(node_feat=nodes.node_feat, node_opcode=nodes.node_opcode, edge_index=nodes.edge_index,
                node_config_ids=np.asarray(node_ids, np.int64), node_config_feat=config_feat,
                config_runtime=np.zeros(picked.shape[0], np.int64), node_splits=nodes.node_splits)
  return graphs.validate_graph(source, graph_id or module.name, collection, featurize.UNLABELLED_SPLIT, arrays)


def tile_sizes(extent: int, keep: int) -> list[int]:
  """Tile sizes along one dimension: powers of two below `extent` and `extent`, the largest `keep`."""
  sizes = sorted({extent} | {2**p for p in range(max(extent.bit_length(), 1)) if 2**p < extent})
  return sizes[-keep:]


def tile_candidates(output_dims: Sequence[int], convolution_features: Optional[Sequence[int]],
                    rng: Random) -> list[tuple[tuple, tuple]]:
  """(output tile, kernel tile) pairs: one size per output dim, and for a convolution its
  (input, output) feature tile (else ()). All combinations, or MAX_TILE_CANDIDATES drawn from
  `rng` (distinct, in sorted order) when there are more."""
  axes = [tile_sizes(d, 5) for d in output_dims]
  if convolution_features:
    axes += [tile_sizes(f, 4) for f in convolution_features]
  total = math.prod(len(a) for a in axes)
  if total <= MAX_TILE_CANDIDATES:
    combos = list(itertools.product(*axes))
  else:
    picks = {tuple(int(rng.integers(len(a))) for a in axes) for _ in range(MAX_TILE_CANDIDATES)}
    combos = [tuple(a[i] for a, i in zip(axes, pick)) for pick in sorted(picks)]
  rank = len(output_dims)
  return [(combo[:rank], combo[rank:]) for combo in combos]


def kernel_extents(kernel: hlo_pb2.HloModuleProto) -> tuple[tuple, Optional[tuple]]:
  """What a kernel module's tile sizes divide: the dims of its (first) result, and for a fused
  convolution of the result's rank its (input, output) feature counts, else None. The kernel is
  well formed (module_check.check_module): its entry_computation_id names a computation."""
  by_id = {i.id: i for c in kernel.computations for i in c.instructions}
  entry = next(c for c in kernel.computations if c.id == kernel.entry_computation_id)
  root = by_id[entry.root_id]
  shape = root.shape.tuple_shapes[0] if root.shape.tuple_shapes else root.shape
  fused = [i for c in kernel.computations if c.id != entry.id for i in c.instructions]
  matrix = next((i for i in fused if i.opcode in MXU_OPCODES), None)
  convolution_features = None
  if (matrix is not None and matrix.opcode == "convolution" and len(matrix.shape.dimensions) == len(shape.dimensions)
      and len(matrix.operand_ids) > 1):
    numbers = matrix.convolution_dimension_numbers
    kernel_dims = by_id[matrix.operand_ids[1]].shape.dimensions
    dims = (numbers.kernel_input_feature_dimension, numbers.kernel_output_feature_dimension)
    if all(0 <= d < len(kernel_dims) for d in dims):
      convolution_features = tuple(int(kernel_dims[d]) for d in dims)
  return tuple(int(d) for d in shape.dimensions), convolution_features


def sampled_indices(n: int, count: int, rng: Random) -> list[int]:
  """`count` of range(n) drawn without replacement (a partial Fisher-Yates shuffle), sorted."""
  order = list(range(n))
  for i in range(count):
    j = i + rng.integers(n - i)
    order[i], order[j] = order[j], order[i]
  return sorted(order[:count])


def kernel_candidates(kernel: hlo_pb2.HloModuleProto, num_candidates: int, seed: int = 0,
                      collection: str = "tile:xla", source: Optional[str] = None,
                      limits: work_limits.WorkLimits = work_limits.WorkLimits()) -> graphs.TileGraph:
  """An unlabelled tile graph of one kernel module (fusion_kernels.kernel_modules) whose configs are its
  candidate tile sizes (`tile_candidates`), at most `num_candidates` of them drawn with `seed`
  (splitmix64)."""
  if num_candidates < 1:
    raise ValueError(f"num_candidates must be positive, got {num_candidates}")
  source = source or f"HLO kernel module {kernel.name!r}"
  nodes = featurize.module_features(kernel, source)
  rng = splitmix64.SplitMix64(seed)
  pairs = tile_candidates(*kernel_extents(kernel), rng)
  if len(pairs) > num_candidates:
    pairs = [pairs[i] for i in sampled_indices(len(pairs), num_candidates, rng)]
  work_limits.check_config_bytes(len(pairs), graphs.TILE_CONFIG_FEATURE_WIDTH, limits, source)
  config_feat = np.stack([features.tile_config_features(tuning_pb2.TileSizeConfig(
      output_bounds=output, kernel_bounds=kernel_tile)) for output, kernel_tile in pairs])
  arrays = dict(node_feat=nodes.node_feat, node_opcode=nodes.node_opcode, edge_index=nodes.edge_index,
                config_feat=config_feat, config_runtime=np.zeros(len(pairs), np.int64),
                config_runtime_normalizers=np.ones(len(pairs), np.int64))
  return graphs.validate_graph(source, kernel.name, collection, featurize.UNLABELLED_SPLIT, arrays)


def candidate_graphs(proto: hlo_input.HloProto, num_candidates: int, kernels: bool = False, seed: int = 0,
                     source: Optional[str] = None, limits: work_limits.WorkLimits = work_limits.WorkLimits(),
                     change_entry_layouts: bool = False) -> list[graphs.Graph]:
  """The candidate configs of a proto's module: its program's candidate layouts (the configurable
  nodes of a ModuleTuningData, measured or not, kept), or with `kernels` the candidate tile sizes
  of each fusion of an optimized module (of each kernel of a TuningData). `source` (a file) is what
  errors name; `change_entry_layouts`: candidates may change the entry computation's parameter and
  result layouts (the caller owns the entry computation layout).

  Raises:
    graphs.GraphFileError: a TuningData without `kernels`, or (`kernels`) a module without fusions.
    work_limits.WorkLimitError: more candidates than `limits` allow, before the module is featurized.
  """
  work_limits.check_candidate_count(num_candidates, limits)
  if isinstance(proto, tuning_pb2.TuningData):
    if not kernels:
      raise graphs.GraphFileError(source or "tile tuning data", "holds kernels' tuning data (TuningData): their "
                                  "candidates are tile sizes (--kernels)")
    return [kernel_candidates(m.module, num_candidates, seed, source=source and f"{source} (module {m.module.name!r})",
                              limits=limits) for m in proto.modules]
  tuned = isinstance(proto, tuning_pb2.ModuleTuningData)
  module = proto.module if tuned else proto
  if kernels:
    return [kernel_candidates(k, num_candidates, seed, source=source and f"{source} (fusion {k.name!r})", limits=limits)
            for k in fusion_kernels.kernel_modules(module, source=source)]
  return [program_candidates(module, num_candidates, seed, source=source,
                             configurable=list(proto.config_index_to_node) if tuned else None, limits=limits,
                             change_entry_layouts=change_entry_layouts)]


def candidate_graphs_from_file(path: Union[str, os.PathLike], num_candidates: int, kernels: bool = False,
                               seed: int = 0, limits: work_limits.WorkLimits = work_limits.WorkLimits(),
                               change_entry_layouts: bool = False) -> list[graphs.Graph]:
  """candidate_graphs of the proto in a .pb file (hlo_input.read_hlo_file), errors naming `path`."""
  work_limits.check_candidate_count(num_candidates, limits)
  return candidate_graphs(hlo_input.read_hlo_file(path, limits.max_module_bytes), num_candidates, kernels, seed,
                          str(path), limits, change_entry_layouts)
