"""Static-shape layout scoring signatures a compiler can compile ahead of time (XLA AOT): the buckets.

The tile counterpart is tile_shapes.py. A layout model prunes each graph to its configurable
ops and their `prune_hops`-hop neighbourhood (layout_preprocessing.prune_to_configurable) before it
scores configs, and what pruning keeps depends on the graph, which XLA cannot compile. So the
host prunes (native/library/layout_pruning.cc, exactly as the SavedModel's graph does) and sends the
pruned graph in a *bucket*: its arrays padded to the bucket's rows. A layout model is two halves
(layout_model.context_and_scores), and so is each bucket, two signatures, beside one signature
for all buckets of the states of config rows:

    context: the graph (below) -> context (N, units) float32, the op states no config changes;
    rows:    node_config_feat (R, 18) float32 config rows (one config's layout values on one op),
             node_feat (R, 140) float32 and node_opcode (R,) uint8 of each row's op -> row_states
             (R, config units) float32 (layout_model.ConfigScorer.row_states), R = ROWS_PER_CALL;
    chunk:   the graph but its opcodes, op_slot (N,) int32 (each op's configurable slot, K: none),
             node_config_feat (C, K, 18) float32, row_states (C, K, config units) float32 (the
             rows signature's state of each config's row on each slot), context (N, units),
             num_configurable, num_configs () int32 -> scores (C,) float32 (the first num_configs
             meaningful).

Configs repeat a few rows per op (5 to 8 distinct per op in the sample's graphs, against 1,965
and 1,000 configs), so the host runs the rows signature once per distinct row and hands each
chunk their states: the chunk then computes only what depends on a whole config (layout changes
along edges, message passing), not the states of rows it has seen before.

The graph: node_feat (N, 140) float32, node_opcode (N,) uint8, edge_index (E, 2) int64 rows
[consumer, producer], num_nodes, num_edges () int32, and for each direction of `feeds`
(`producers`: each op's edges from its producers, which it hears; `consumers`: its edges to its
consumers) the op's edges as a *neighbour table*, the form of a graph XLA's CPU code pools
fastest. XLA's CPU backend has no scatter: it rewrites each into a loop with one trip per row,
so a segment sum over E edges is E dependent trips; a few gathers of whole rows, added, are one
vectorized loop. The tables (`neighbour_tables`, and native/library/neighbour_tables.cc on the host):

    <direction> (N, S) int32: each op's first S = NEIGHBOUR_SLOTS edges, in edge order (E: none);
    <direction>_degrees (N,) int32: how many edges each op has (for means);
    <direction>_hubs (H, E) float32: for up to H = HUB_ROWS ops with more than S edges (hubs),
        1 at each of their other edges (a matrix product sums them);
    <direction>_hub_of (N,) int32: each op's hub row (H: none).

Pruned to their configurable ops (prune_hops 0), the sample's graphs have at most 5 edges per op and
direction; their 1- and 2-hop neighbourhoods that fit a bucket have at most 3 hubs per
direction. A graph with more hubs than H in a direction is refused (TPU_GRAPHS_TOO_LARGE).

Ids are those of the pruned graph. Rows past the counts may hold anything: the programs mask
filler ops, and the tables never name them. The signatures check nothing: the caller checks ids,
counts and finiteness (native/library/layout_library.cc does, as saved_model.checked_arrays would).
Configs are scored independently (GraphNorm normalizes each config on its own), so a caller sends
C at a time and fills the last call with copies of the last config.

Buckets follow the sizes of pruned layout graphs. Whole graphs have up to ~44k ops (TpuGraphs);
the sample's five distinct layout graphs (490 to 21,918 ops) pruned by prune_to_configurable keep
  prune_hops 0 (the default): their 38 to 848 configurable ops, with 0.9 to 1.3 edges per op and at
      most 5 neighbours per op;
  prune_hops 1: 118 to 2,850 ops, 133 to 51,209 edges (the nlp graph's data flow among kept ops is
      dense: 220 ops have over 200 neighbours);
  prune_hops 2: 218 to 5,103 ops, 281 to 11,132 edges, up to 439 neighbours.
Every padded row goes through the model (XLA's code computes what the shapes say), so a call
costs its bucket's size, not the graph's: the buckets double from 64 ops (the sample's 38 to 62
at prune_hops 0 fill the first; nlp's 848 fills 83% of the 1,024-op one) to 4,096, with two edges per
op and as many configurable ops as ops but at most 2,048. A chunk holds N x C op states per
layer; C shrinks as N grows so that they stay within a core's cache (N C = 2,048 rows).
A graph whose pruned size exceeds the largest bucket is refused (TPU_GRAPHS_TOO_LARGE) rather than
cut, since scoring part of a graph would rank its configs wrongly without saying so; it is scored
through the C API, or a larger bucket is added to LAYOUT_SIZES and the model re-exported.
"""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar, Optional

import numpy as np
import tensorflow as tf

from tpu_graphs.data import graphs

NEIGHBOUR_SLOTS = 8
HUB_ROWS = 4
DIRECTIONS = ("producers", "consumers")
ROWS_PER_CALL = 256
_SIGNATURE = re.compile(r"static_layout_h(\d+)_n(\d+)_e(\d+)_k(\d+)_c(\d+)")


@dataclasses.dataclass(frozen=True)
class LayoutBucket:
  """Padded sizes of one bucket's two static signatures: N pruned ops, E pruned edges, K
  configurable ops, C configs per chunk; for graphs pruned with `prune_hops`."""
  prune_hops: int
  nodes: int
  edges: int
  configurable: int
  configs: int
  kind: ClassVar[str] = "layout"

  @property
  def signature_name(self) -> str:
    """The chunk signature's name (which names the whole bucket)."""
    return f"static_layout_h{self.prune_hops}_n{self.nodes}_e{self.edges}_k{self.configurable}_c{self.configs}"

  @property
  def context_signature_name(self) -> str:
    return f"static_layout_context_h{self.prune_hops}_n{self.nodes}_e{self.edges}"

  @property
  def rows_signature_name(self) -> str:
    """The rows signature's name, the same for every bucket of a model."""
    return f"static_layout_rows_h{self.prune_hops}"

  @classmethod
  def from_signature_name(cls, name: str) -> Optional["LayoutBucket"]:
    """The bucket a chunk signature's name describes, or None for another signature."""
    match = _SIGNATURE.fullmatch(name)
    return cls(*map(int, match.groups())) if match else None

  def programs(self) -> list[tuple[str, str]]:
    """(signature, C++ class) of each program the bucket calls in a native library: its context,
    the rows program (every bucket's the same) and its chunk."""
    graph = f"H{self.prune_hops}N{self.nodes}E{self.edges}"
    return [(self.context_signature_name, f"LayoutContext{graph}"),
            (self.rows_signature_name, f"LayoutRowsH{self.prune_hops}"),
            (self.signature_name, f"LayoutChunk{graph}K{self.configurable}C{self.configs}")]

  header_macro: ClassVar[str] = "TPU_GRAPHS_FOR_EACH_LAYOUT_BUCKET"  # buckets.h's list (native/layout_library.cc)

  @property
  def header_sizes(self) -> tuple[int, ...]:
    """The sizes each entry of header_macro gives after its classes."""
    return dataclasses.astuple(self)

  # Constants buckets.h defines for the library's code.
  header_defines: ClassVar[str] = (f"#define TPU_GRAPHS_NEIGHBOUR_SLOTS {NEIGHBOUR_SLOTS}\n"
                                   f"#define TPU_GRAPHS_HUB_ROWS {HUB_ROWS}\n"
                                   f"#define TPU_GRAPHS_ROWS_PER_CALL {ROWS_PER_CALL}\n")


# (pruned ops, pruned edges, configurable ops, configs per chunk), smallest first (see the module docstring).
LAYOUT_SIZES = tuple((nodes, 2 * nodes, min(nodes, 2048), max(1, min(32, 2048 // nodes)))
                     for nodes in (64, 128, 256, 512, 1024, 2048, 4096))
def layout_buckets(prune_hops: int) -> tuple[LayoutBucket, ...]:
  """The buckets of a model pruning with `prune_hops`, smallest first."""
  return tuple(LayoutBucket(prune_hops, *sizes) for sizes in LAYOUT_SIZES)


def _table_specs(bucket: LayoutBucket) -> tuple[tf.TensorSpec, ...]:
  return tuple(spec for direction in DIRECTIONS for spec in (
      tf.TensorSpec([bucket.nodes, NEIGHBOUR_SLOTS], tf.int32, direction),
      tf.TensorSpec([bucket.nodes], tf.int32, f"{direction}_degrees"),
      tf.TensorSpec([HUB_ROWS, bucket.edges], tf.float32, f"{direction}_hubs"),
      tf.TensorSpec([bucket.nodes], tf.int32, f"{direction}_hub_of")))


def context_input_specs(bucket: LayoutBucket) -> tuple[tf.TensorSpec, ...]:
  """The context signature's inputs, in argument order."""
  return (tf.TensorSpec([bucket.nodes, graphs.NODE_FEATURE_WIDTH], tf.float32, "node_feat"),
          tf.TensorSpec([bucket.nodes], tf.uint8, "node_opcode"),
          tf.TensorSpec([bucket.edges, 2], tf.int64, "edge_index"),
          *_table_specs(bucket),
          tf.TensorSpec([], tf.int32, "num_nodes"),
          tf.TensorSpec([], tf.int32, "num_edges"))


def rows_input_specs() -> tuple[tf.TensorSpec, ...]:
  """The rows signature's inputs, in argument order."""
  return (tf.TensorSpec([ROWS_PER_CALL, graphs.LAYOUT_CONFIG_FEATURE_WIDTH], tf.float32, "node_config_feat"),
          tf.TensorSpec([ROWS_PER_CALL, graphs.NODE_FEATURE_WIDTH], tf.float32, "node_feat"),
          tf.TensorSpec([ROWS_PER_CALL], tf.uint8, "node_opcode"))


def chunk_input_specs(bucket: LayoutBucket, context_units: int, config_units: int) -> tuple[tf.TensorSpec, ...]:
  """The chunk signature's inputs, in argument order; the context is (N, context_units), the row
  states (C, K, config_units)."""
  return (*(spec for spec in context_input_specs(bucket) if spec.name != "node_opcode"),
          tf.TensorSpec([bucket.nodes], tf.int32, "op_slot"),
          tf.TensorSpec([bucket.configs, bucket.configurable, graphs.LAYOUT_CONFIG_FEATURE_WIDTH], tf.float32,
                        "node_config_feat"),
          tf.TensorSpec([bucket.configs, bucket.configurable, config_units], tf.float32, "row_states"),
          tf.TensorSpec([bucket.nodes, context_units], tf.float32, "context"),
          tf.TensorSpec([], tf.int32, "num_configurable"),
          tf.TensorSpec([], tf.int32, "num_configs"))


def neighbour_tables(bucket: LayoutBucket, edge_index: np.ndarray) -> dict[str, np.ndarray]:
  """The neighbour tables (the module docstring) of a graph's (e, 2) edge_index [consumer,
  producer], for the bucket it fits: each op's edges in edge order, the first NEIGHBOUR_SLOTS in
  its row, the rest in its hub row. ValueError for more than HUB_ROWS hubs in a direction. The
  host's twin is native/library/neighbour_tables.cc.
  """
  tables = {}
  for direction, ends in zip(DIRECTIONS, (edge_index[:, 0], edge_index[:, 1])):  # the edges' op in each
    table = np.full([bucket.nodes, NEIGHBOUR_SLOTS], bucket.edges, np.int32)
    hubs = np.zeros([HUB_ROWS, bucket.edges], np.float32)
    hub_of = np.full([bucket.nodes], HUB_ROWS, np.int32)
    degrees = np.bincount(ends, minlength=bucket.nodes).astype(np.int32)
    for op in np.flatnonzero(degrees):
      edges = np.flatnonzero(ends == op)
      table[op, :min(len(edges), NEIGHBOUR_SLOTS)] = edges[:NEIGHBOUR_SLOTS]
      if len(edges) > NEIGHBOUR_SLOTS:
        hub = int(np.sum(hub_of < HUB_ROWS))
        if hub == HUB_ROWS:
          raise ValueError(f"over {HUB_ROWS} ops have more than {NEIGHBOUR_SLOTS} {direction}")
        hubs[hub, edges[NEIGHBOUR_SLOTS:]] = 1.0
        hub_of[op] = hub
    tables.update({direction: table, f"{direction}_degrees": degrees, f"{direction}_hubs": hubs,
                   f"{direction}_hub_of": hub_of})
  return tables
