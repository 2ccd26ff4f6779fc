"""Prints what a TpuGraphs npz tree holds, then how its layout configs search the layout space.

  python baselines/stats.py --data_dir data/generated/npz
  python baselines/stats.py --data_dir ../shared/tpugraphs_sample/npz

The first table: graphs, nodes, edges, configs and nc/n per collection and split. The second, per
layout collection and split, medians over files of: distinct layouts a configurable node takes
and how often it takes its most common one (means over the file's nodes,
tpu_graphs/analysis/layout_search.py), configurable ops per group of ops the configs move in
lockstep (does the search set layouts per op or per group of alike ops?), how many such groups
there are beside how many the alike-op rule makes (one opcode, the same candidates, results
whose configured dims tile alike: layout_search.alike_op_groups), the runtime spread (slowest / fastest config), the Kendall tau
of runtime against the number of ops off their modal layout (is straying from the common layouts
slow in itself?), the largest single-op effect (the slowest over the fastest geometric mean
runtime of one op's layouts, the largest over ops: does one op dominate? median and, in
parentheses, the largest over files), and the within-program per-node-layout ridge tau (half of
a file's configs ranks the other half, tpu_graphs/analysis/ridge.py). Spread, taus and effects need
runtimes, so unlabelled (test) splits show '-'.
Every file is validated on the way (config features are streamed, not loaded).
"""

import pathlib
from typing import Optional

import numpy as np
from absl import flags

from baselines import program
from tpu_graphs.data import errors
from tpu_graphs.data import graphs
from tpu_graphs.analysis import layout_search, ridge
from tpu_graphs.data import npz
from tpu_graphs.data import statistics
from tpu_graphs.hlo import features
from tpu_graphs.train import metrics

_DATA_DIR = flags.DEFINE_string("data_dir", "data/generated/npz", "A TpuGraphs npz tree.")
_LAYOUT_SEARCH_HEADER = ("collection", "split", "graphs", "distinct layouts per node", "modal fraction",
                         "ops per search group", "search groups found / by the alike-op rule",
                         "runtime spread (max/min)", "tau of ops off their modal layout",
                         "largest single-op effect", "per-node layout ridge tau")


def layout_search_table(root: pathlib.Path, order: list[tuple[str, Optional[str]]]) -> str:
  """The layout-search table of every layout file below `root`, rows in `order` (collection, split)."""
  per_split = {}
  for path in sorted(root.rglob("*.npz")):
    graph = npz.read_graph(path, stream_configs=True)
    if isinstance(graph, graphs.LayoutGraph):
      found = layout_search.layout_search_statistics(graph)
      labelled = found.runtime_spread is not None
      off_modal_tau = metrics.kendall_tau(graph.runtimes(), found.off_modal_ops) if labelled else None
      tau = ridge.per_node_layout_ridge_tau(graph) if labelled else None
      nodes = graph.node_config_ids
      by_rule = layout_search.alike_op_groups(graph.node_config_feat, graph.node_opcode[nodes],
                                              graph.node_feat[nodes][:, features.SHAPE_COLUMNS])
      groups = (round(len(nodes) / found.ops_per_search_group), int(by_rule.max()) + 1)
      per_split.setdefault((graph.collection, graph.split), []).append(
          (found.distinct_layouts, found.modal_fraction, found.ops_per_search_group, groups, found.runtime_spread,
           off_modal_tau, found.largest_op_effect, tau))
  rows = []
  for key in (key for key in order if key in per_split):
    columns = list(zip(*per_split[key]))
    cells = [median(columns[0], "{:.1f}"), median(columns[1], "{:.2f}"), median(columns[2], "{:.1f}"),
             " / ".join(str(sum(column)) for column in zip(*columns[3])),
             median(columns[4], "{:.2f}x"), median(columns[5], "{:.2f}"), median_and_max(columns[6], "{:.2f}x"),
             median(columns[7], "{:.2f}")]
    rows.append((key[0], key[1] or "-", str(len(per_split[key])), *cells))
  return statistics.markdown_table(_LAYOUT_SEARCH_HEADER, rows)


def median(values, template: str) -> str:
  """The median of `values` formatted, or '-' when any is missing (an unlabelled file)."""
  return "-" if None in values else template.format(float(np.median(values)))


def median_and_max(values, template: str) -> str:
  """'median (max m)' of `values` formatted, or '-' when any is missing."""
  if None in values:
    return "-"
  return f"{template.format(float(np.median(values)))} (max {template.format(float(np.max(values)))})"


def main(argv):
  del argv
  root = pathlib.Path(_DATA_DIR.value)
  rows = statistics.directory_statistics(root)
  if not rows:
    raise errors.InputError(f"{root}: no .npz files found")
  print(statistics.format_table(rows))
  # Rows of graphs with configurable nodes (layout collections).
  order = [(row.collection, row.split) for row in rows if row.configurable_fraction_median is not None]
  if order:
    print()
    print(layout_search_table(root, order))


if __name__ == "__main__":
  program.run(main)
