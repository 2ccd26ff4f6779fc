"""What a TpuGraphs data directory holds: per collection and split, sizes of graphs and configs.

Used wherever data appears on disk (download, conversion, generation) to show at a glance what
arrived. Files are read with streamed config features, so a directory of multi-gigabyte layout
files is summarised without loading their config arrays; every file is still validated.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Optional, Sequence, Union

import numpy as np

from tpu_graphs.data import graphs
from tpu_graphs.data import npz

@dataclasses.dataclass(frozen=True)
class SplitStatistics:
  """Summary of the graphs of one collection and split.

  configurable_fraction_median is the median over graphs of nc / n (configurable nodes over
  nodes); None for tile collections, whose configs are graph-level.
  """

  collection: str
  split: Optional[str]
  graphs: int
  nodes_min: int
  nodes_median: float
  nodes_max: int
  edges_median: float
  edges_max: int
  configs_median: float
  configs_max: int
  configs_total: int
  configurable_fraction_median: Optional[float]
  bytes_total: int


def directory_statistics(root: Union[str, os.PathLike]) -> list[SplitStatistics]:
  """One row per (collection, split) for every .npz file below `root`, found recursively.

  Collection and split come from each file's path (.../layout/xla/default/train/x.npz), as in
  npz.read_graph. Rows are ordered by collection (tile first), then train, valid, test.

  Raises:
    GraphFileError: for the first file that is unreadable or invalid.
  """
  per_split: dict[tuple[str, Optional[str]], list[tuple[graphs.Graph, int]]] = {}
  for path in sorted(pathlib.Path(root).rglob("*.npz")):
    graph = npz.read_graph(path, stream_configs=True)
    per_split.setdefault((graph.collection, graph.split), []).append((graph, path.stat().st_size))
  rows = [_summarise(collection, split, entries) for (collection, split), entries in per_split.items()]
  return sorted(rows, key=_row_order)


def _row_order(row: SplitStatistics):
  collection_rank = graphs.COLLECTIONS.index(row.collection) if row.collection in graphs.COLLECTIONS \
      else len(graphs.COLLECTIONS)
  split_rank = graphs.SPLITS.index(row.split) if row.split in graphs.SPLITS else len(graphs.SPLITS)
  return collection_rank, row.collection, split_rank


def _summarise(collection: str, split: Optional[str],
               entries: list[tuple[graphs.Graph, int]]) -> SplitStatistics:
  nodes = np.array([graph.node_feat.shape[0] for graph, _ in entries])
  edges = np.array([graph.edge_index.shape[0] for graph, _ in entries])
  configs = np.array([graph.num_configs for graph, _ in entries])
  fraction = None
  if all(isinstance(graph, graphs.LayoutGraph) for graph, _ in entries):
    fraction = float(np.median([graph.node_config_ids.shape[0] / graph.node_feat.shape[0]
                                for graph, _ in entries]))
  return SplitStatistics(
      collection=collection, split=split, graphs=len(entries),
      nodes_min=int(nodes.min()), nodes_median=float(np.median(nodes)), nodes_max=int(nodes.max()),
      edges_median=float(np.median(edges)), edges_max=int(edges.max()),
      configs_median=float(np.median(configs)), configs_max=int(configs.max()),
      configs_total=int(configs.sum()), configurable_fraction_median=fraction,
      bytes_total=sum(size for _, size in entries))


_HEADER = ("collection", "split", "graphs", "nodes min/median/max", "edges median/max",
           "configs median/max", "configs total", "nc/n median", "size")


def format_table(rows: Sequence[SplitStatistics]) -> str:
  """The rows as a Markdown table (see markdown_table)."""
  return markdown_table(_HEADER, [(
      row.collection, row.split or "-", str(row.graphs),
      f"{row.nodes_min}/{_number(row.nodes_median)}/{row.nodes_max}",
      f"{_number(row.edges_median)}/{row.edges_max}",
      f"{_number(row.configs_median)}/{row.configs_max}",
      str(row.configs_total),
      "-" if row.configurable_fraction_median is None else f"{row.configurable_fraction_median:.1%}",
      format_bytes(row.bytes_total)) for row in rows])


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
  """A Markdown table with padded columns, so it also reads well in a terminal."""
  cells = [tuple(header)] + [tuple(row) for row in rows]
  widths = [max(len(line[column]) for line in cells) for column in range(len(header))]
  lines = ["| " + " | ".join(cell.ljust(width) for cell, width in zip(line, widths)) + " |"
           for line in cells]
  lines.insert(1, "|" + "|".join("-" * (width + 2) for width in widths) + "|")
  return "\n".join(lines)


def _number(value: float) -> str:
  return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def format_bytes(num_bytes: float) -> str:
  """'950 B', '12.3 MB', '1.2 GB': decimal units, as download sizes are usually quoted."""
  value, unit = float(num_bytes), "B"
  for larger in ("KB", "MB", "GB", "TB"):
    if value < 1000:
      break
    value, unit = value / 1000, larger
  return f"{value:.0f} B" if unit == "B" else f"{value:.1f} {unit}"
