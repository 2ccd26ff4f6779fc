"""How a layout file's configs search the layout space, seen one configurable node at a time.

XLA's layout autotuner, which made the real layout collections, offers each configurable op a few
candidate layouts (the compiler's default and a handful of alternatives) and its 'default' search
stays near the default while its 'random' search draws among the candidates. Whether a dataset
(generated or real) searches that way shows in a few numbers per file:

* distinct layouts: how many different 18-value `node_config_feat` rows a configurable node takes
  over the file's configs (a row, all of the node's tensor layouts, is one layout choice);
* modal fraction: the share of configs in which a node takes its most common row;
* ops per search group: configurable nodes per group of nodes that the configs move in lockstep
  (in every config the same-numbered one of their layouts). The real searches decide layouts per
  group of alike ops, not per op, in every file of the sample. Which ops move together follows the
  alike-op rule (alike_op_groups: one opcode, the same candidates, results whose configured dims
  tile alike), within a group or two per file;
* runtime spread: the slowest config's runtime over the fastest's;
* ops off their modal layout, per config: with runtimes, whether straying from the common layouts
  is itself slow. In real files it says little (on the sample's two labelled programs); a
  generator whose runtimes grow with it gives models a shortcut that real programs do not offer;
* largest single-op effect: per configurable node, the ratio of the slowest to the fastest of its
  layouts' geometric mean runtimes (layouts taken by at least MIN_CONFIGS_PER_LAYOUT configs),
  the largest over nodes. In real unet3d one convolution's layouts move it several times over and
  no other node's much; in unet_3d.4x4.bf16 no node's much;
* additive effects: the same ratio per search group with every other group's layout held fixed,
  from a least-squares fit of log runtime as a sum of one term per group's layout
  (additive_effects). The single-op effect credits an op with what comes with its layouts: in
  unet3d the second largest is an op of almost no effect whose rarer layouts come with more of the
  dominant convolution's slow configs.

A file's distinct layouts and modal fraction are means over its configurable nodes. The figures of
the sample and of the generated data, side by side: docs/generated-data.md ("How it compares with
real files", from benchmarks/results/layout_search.md).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from tpu_graphs.data import graphs

# Rows (configs x nodes) sorted at a time by _distinct_layouts (some 50 bytes of work each).
_ROWS_PER_SORT = 1 << 22
_CHUNK_CONFIGS = 1000
MIN_CONFIGS_PER_LAYOUT = 10
# A search group whose layouts move the runtime by less than this share has no measurable effect.
MEASURABLE_EFFECT = 1e-4
_BITS_PER_VALUE = 6  # a config value is a dim in [0, 62] or -1, stored as value + 1
_VALUES_PER_KEY = 64 // _BITS_PER_VALUE


@dataclasses.dataclass(frozen=True)
class LayoutSearchStatistics:
  """One layout file's search, see the module docstring; runtime_spread is None when unlabelled."""

  distinct_layouts: float
  modal_fraction: float
  ops_per_search_group: float
  runtime_spread: Optional[float]
  off_modal_ops: np.ndarray  # (c,) int64 per config, configurable ops not in their modal layout
  largest_op_effect: Optional[float]  # see the module docstring; None when unlabelled


def node_layout_keys(node_config_feat) -> np.ndarray:
  """(c, nc, k) uint64: the rows of `node_config_feat` packed exactly, k = ceil(18 / 10) = 2.

  `node_config_feat` (c, nc, 18) may be an array or a streamed one (read in chunks), so a file's
  layouts are counted without holding its float features; equal rows give equal keys.

  Raises:
    ValueError: for a value outside [-1, 62], which is no dim of a layout.
  """
  chunks = (node_config_feat.iter_chunks(_CHUNK_CONFIGS) if hasattr(node_config_feat, "iter_chunks")
            else [np.asarray(node_config_feat)])
  keys = []
  for chunk in chunks:
    values = np.rint(chunk).astype(np.int64) + 1
    if values.size and (values.min() < 0 or values.max() >= 2**_BITS_PER_VALUE):
      raise ValueError(f"layout config values must be dims in [-1, {2**_BITS_PER_VALUE - 2}]; got "
                       f"{chunk.min()} to {chunk.max()}")
    shifts = (np.arange(values.shape[2]) % _VALUES_PER_KEY * _BITS_PER_VALUE).astype(np.uint64)
    shifted = values.astype(np.uint64) << shifts
    groups = np.arange(values.shape[2]) // _VALUES_PER_KEY
    keys.append(np.stack([np.bitwise_or.reduce(shifted[:, :, groups == g], axis=2)
                          for g in range(groups.max() + 1)], axis=2))
  return np.concatenate(keys, axis=0)


def _distinct_layouts(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Each configurable node's distinct rows of `keys` (c, nc, k), from node_layout_keys, found for
  many nodes in one sort (a sort per node was most of baselines/stats.py's time).

  Returns:
    categories: (c, nc) int64, the category of node j in config i: the rank of its row among the
      node's distinct rows, in sorted order.
    counts: (nc,) int64, the number of distinct rows node j takes.
    rows: (sum(counts), k) uint64, the distinct rows, node by node, each node's in sorted order.
  """
  num_configs, num_nodes, words = keys.shape
  nodes_per_sort = max(1, _ROWS_PER_SORT // max(num_configs, 1))
  categories = np.zeros((num_configs, num_nodes), np.int64)
  counts = np.zeros(num_nodes, np.int64)
  rows = []
  for first in range(0, num_nodes, nodes_per_sort):
    block = keys[:, first:first + nodes_per_sort]
    # Sorted by node, then by the row's words (np.lexsort: integer sorts, where np.unique(axis=0)
    # compares rows as bytes), so the distinct rows come node by node, each node's in order.
    node = np.broadcast_to(np.arange(block.shape[1]), block.shape[:2]).reshape(-1)
    flat = block.reshape(-1, words)
    order = np.lexsort([flat[:, w] for w in reversed(range(words))] + [node])
    in_order, node_in_order = flat[order], node[order]
    starts_row = np.ones(order.size, bool)
    starts_row[1:] = (node_in_order[1:] != node_in_order[:-1]) | np.any(in_order[1:] != in_order[:-1], axis=1)
    inverse = np.empty(order.size, np.int64)
    inverse[order] = np.cumsum(starts_row) - 1
    block_counts = np.bincount(node_in_order[starts_row], minlength=block.shape[1])
    starts = np.cumsum(block_counts) - block_counts
    categories[:, first:first + block.shape[1]] = inverse.reshape(block.shape[:2]) - starts[np.newaxis, :]
    counts[first:first + block.shape[1]] = block_counts
    rows.append(in_order[starts_row])
  return categories, counts, np.concatenate(rows) if rows else np.zeros((0, words), np.uint64)


def node_layout_categories(node_config_feat) -> tuple[np.ndarray, np.ndarray]:
  """Each configurable node's rows numbered as categories.

  Returns:
    categories: (c, nc) int64, the category of node j in config i, in [0, counts[j]).
    counts: (nc,) int64, the number of distinct rows (layouts) node j takes.
  """
  categories, counts, _ = _distinct_layouts(node_layout_keys(node_config_feat))
  return categories, counts


def search_groups(categories: np.ndarray) -> int:
  """How many groups of nodes the configs move in lockstep: nodes whose columns of `categories`
  (c, nc), from node_layout_categories, are equal count as one."""
  return int(np.unique(categories.T, axis=0).shape[0]) if categories.size else 0


def tiling_class(size: int) -> str:
  """How a dimension of `size` elements tiles in TPU memory (tiles of 8 rows by 128 lanes):
  'narrow' (under 8), 'aligned' (8 to 128, or a multiple of 128) or 'ragged' (above 128 and not a
  multiple of it)."""
  if size < 8:
    return "narrow"
  return "ragged" if size > 128 and size % 128 else "aligned"


def alike_op_groups(node_config_feat, opcodes: np.ndarray, result_shapes: np.ndarray) -> np.ndarray:
  """(nc,) int64 the search group of each configurable node under the alike-op rule: nodes share a
  group when they have one opcode, the same candidate layouts (the distinct rows their configs
  give them) and results whose configured dimensions have the same tiling_class. The real
  searches group their ops that way (baselines/stats.py compares the rule with the groups found).

  Args:
    node_config_feat: (c, nc, 18) the file's configs (an array or a streamed one).
    opcodes: (nc,) the nodes' opcodes.
    result_shapes: (nc, >= 6) the nodes' result dimension sizes, dimension d in column d.
  """
  _, counts, distinct = _distinct_layouts(node_layout_keys(node_config_feat))
  starts = np.cumsum(counts) - counts
  found, groups = {}, np.zeros(counts.size, np.int64)
  for node in range(counts.size):
    rows = distinct[starts[node]:starts[node] + counts[node]]
    # The result's layout is the first 6 values of a row, packed in the first key word.
    dims = {int(d) for i in range(6) for d in ((rows[:, 0] >> np.uint64(i * _BITS_PER_VALUE)) & np.uint64(63))} - {0}
    classes = tuple(tiling_class(int(result_shapes[node][d - 1])) for d in sorted(dims))
    groups[node] = found.setdefault((int(opcodes[node]), classes, rows.tobytes()), len(found))
  return groups


def off_modal(categories: np.ndarray) -> np.ndarray:
  """(c, nc) bool: whether a config puts a node off its most common category (of equally common
  ones, the lowest). A node's modal fraction is the share of configs where this is False.

  Args:
    categories: (c, nc) int64 from node_layout_categories.
  """
  modal = np.asarray([np.bincount(column).argmax() for column in categories.T], np.int64)
  return categories != modal[np.newaxis, :]


def op_effects(categories: np.ndarray, runtimes: np.ndarray) -> np.ndarray:
  """(nc,) per node, the spread (max - min) of mean log runtime across its layouts taken by at
  least MIN_CONFIGS_PER_LAYOUT configs (0 for a node with fewer than two such).

  Args:
    categories: (c, nc) int64 from node_layout_categories.
    runtimes: (c,) positive runtimes.
  """
  log_runtimes = np.log(np.asarray(runtimes, np.float64))
  effects = np.zeros(categories.shape[1])
  for node, column in enumerate(categories.T):
    counts = np.bincount(column)
    sums = np.bincount(column, weights=log_runtimes)
    means = sums[counts >= MIN_CONFIGS_PER_LAYOUT] / counts[counts >= MIN_CONFIGS_PER_LAYOUT]
    if means.size >= 2:
      effects[node] = means.max() - means.min()
  return effects


@dataclasses.dataclass(frozen=True)
class AdditiveFit:
  """Log runtime as a sum of one term per search group's layout, fit by least squares.

  group_of: (nc,) int64 the search group of each node (nodes the configs move in lockstep share
    one; numbered in order of their first node).
  terms: per group, (k,) the fitted log-runtime term of each of its k layouts (in the order of
    their categories).
  effects: (groups,) per group, the slowest over the fastest of its layouts' terms, as a runtime
    ratio (1.0: its layouts change nothing).
  residual: the standard deviation of log runtime that the sum leaves unexplained.
  """

  group_of: np.ndarray
  terms: tuple
  effects: np.ndarray
  residual: float


def _additive_terms(categories: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, tuple, np.ndarray]:
  """(group_of, terms, residuals) of `values` (c,) fit as a sum of one term per search group's
  layout by least squares: see AdditiveFit; residuals (c,) what the sum leaves of the centred values."""
  _, first, group_of = np.unique(categories.T, axis=0, return_index=True, return_inverse=True)
  renumbered = np.argsort(np.argsort(first))  # groups in order of their first node
  group_of = renumbered[group_of.reshape(-1)]
  blocks = [(categories[:, node, np.newaxis] == np.unique(categories[:, node])[np.newaxis, :]).astype(np.float64)
            for node in np.sort(first)]
  centred = np.asarray(values, np.float64) - np.mean(values)
  design = np.concatenate(blocks, axis=1) if blocks else np.zeros((len(centred), 0))
  weights = np.linalg.lstsq(design, centred, rcond=None)[0]
  bounds = np.cumsum([0] + [block.shape[1] for block in blocks])
  terms = tuple(weights[start:end] for start, end in zip(bounds[:-1], bounds[1:]))
  return group_of.astype(np.int64), terms, centred - design @ weights


def additive_effects(categories: np.ndarray, runtimes: np.ndarray) -> AdditiveFit:
  """What each search group's layouts do to the runtime with every other group's held fixed.

  op_effects compares a node's layouts over all configs, so a node whose layout happens to move
  with another node's slow one inherits part of that effect: in the real unet3d the layouts of a
  1x1x1 weight gradient seem to move the runtime by several percent, because its rarer layouts
  come with more of the configs that the dominant convolution slows. Fitting every group's layouts
  at once separates the two (there it moves the runtime by almost nothing); where the runtime is a
  sum of per-op costs, the residual is measurement noise.

  Args:
    categories: (c, nc) int64 from node_layout_categories.
    runtimes: (c,) positive runtimes.
  """
  group_of, terms, residuals = _additive_terms(categories, np.log(np.asarray(runtimes, np.float64)))
  return AdditiveFit(group_of, terms, np.asarray([np.exp(np.ptp(t)) for t in terms]), float(np.std(residuals)))


@dataclasses.dataclass(frozen=True)
class OrderAgreement:
  """How a ranking orders each search group's layouts against their measured additive effects.

  by_group: {the group's first node (a column of categories): over the pairs of its layouts whose
    measured terms differ by at least
    MEASURABLE_EFFECT (weighted by the configs that take them), the mean agreement (+1 / -1) of the
    order of the ranking's additive terms (fit on rank positions) with the measured one}, for groups
    with such pairs: +1 orders that group's layouts as measured, -1 in reverse.
  unmeasured_share: the share of the variance of the rank positions that the groups without a
    measurable effect explain: an order made of effects the measurements do not have.
  """

  by_group: dict
  unmeasured_share: float


def order_agreement(categories: np.ndarray, runtimes: np.ndarray, scores: np.ndarray) -> OrderAgreement:
  """Per search group, whether a ranking (`scores`, lower = predicted faster) orders its layouts as
  their measured additive effects (additive_effects) do. Kendall tau over all configs mixes the
  groups; this says which groups' mechanisms a ranker has, and how much of its order is spent on
  groups whose layouts change nothing."""
  measured = additive_effects(categories, runtimes)
  positions = np.argsort(np.argsort(np.asarray(scores), kind="stable")) / max(len(scores) - 1, 1)
  _, ranked, _ = _additive_terms(categories, positions)
  by_group, unmeasured = {}, np.zeros(len(positions))
  for group, (true, predicted) in enumerate(zip(measured.terms, ranked)):
    column = int(np.flatnonzero(measured.group_of == group)[0])
    layout_of = np.unique(categories[:, column], return_inverse=True)[1].reshape(-1)
    counts = np.bincount(layout_of).astype(np.float64)
    differ = np.abs(true[:, np.newaxis] - true[np.newaxis, :]) >= np.log1p(MEASURABLE_EFFECT)
    if differ.any():
      pairs = np.outer(counts, counts) * differ
      order = lambda terms: np.sign(terms[:, np.newaxis] - terms[np.newaxis, :])
      by_group[column] = float(np.sum(pairs * order(true) * order(predicted)) / np.sum(pairs))
    else:
      unmeasured += predicted[layout_of]
  return OrderAgreement(by_group, float(np.var(unmeasured) / max(np.var(positions), 1e-12)))


def largest_op_effect(categories: np.ndarray, runtimes: np.ndarray) -> float:
  """The largest over nodes of exp(op_effects): the slowest over the fastest geometric mean runtime
  of one node's layouts (1.0 when no node has two layouts of MIN_CONFIGS_PER_LAYOUT configs)."""
  return float(np.exp(op_effects(categories, runtimes).max(initial=0.0)))


def element_orders(rows: np.ndarray, shapes: np.ndarray) -> np.ndarray:
  """(c,) int64 category per config: the order a node's layouts put its tensors' elements in, as
  opposed to the layout values its config row sets.

  Where a size-1 dimension sits in a layout moves no element: two rows fall in one category when,
  per tensor, their set layout values agree once size-1 dimensions are dropped. (On a TPU they may
  still tile differently: (8, 128) tiles cover the two minor-most dimensions, size 1 or not.)

  Args:
    rows: (c, 18) the node's node_config_feat rows (output, input 0, input 1 orders; -1 unset).
    shapes: (3, 6) the output's and inputs' dimension sizes (zero-padded; zeros where absent).
  """
  shapes = np.asarray(shapes)
  rows = np.rint(np.asarray(rows)).astype(np.int64).reshape(len(rows), *shapes.shape)
  sizes = np.take_along_axis(shapes[np.newaxis], np.clip(rows, 0, shapes.shape[1] - 1), axis=2)
  kept = np.where((rows >= 0) & (sizes != 1), rows, -1)
  # Dropping a size-1 dimension moves the dimensions after it up one place.
  order = np.argsort(kept < 0, axis=2, kind="stable")
  _, categories = np.unique(np.take_along_axis(kept, order, axis=2).reshape(len(rows), -1), axis=0,
                            return_inverse=True)
  return categories.reshape(-1)


def layout_search_statistics(graph: graphs.LayoutGraph) -> LayoutSearchStatistics:
  """The file's distinct layouts and modal fraction (means over nodes), ops per search group,
  runtime spread, ops off their modal layout per config and largest single-op effect."""
  categories, counts = node_layout_categories(graph.node_config_feat)
  off = off_modal(categories)
  runtimes = graph.runtimes()
  labelled = runtimes.min() > 0
  return LayoutSearchStatistics(
      distinct_layouts=float(counts.mean()), modal_fraction=float((~off).mean(axis=0).mean()),
      ops_per_search_group=counts.size / max(search_groups(categories), 1),
      runtime_spread=float(runtimes.max() / runtimes.min()) if labelled else None,
      off_modal_ops=off.sum(axis=1),
      largest_op_effect=largest_op_effect(categories, runtimes) if labelled else None)
