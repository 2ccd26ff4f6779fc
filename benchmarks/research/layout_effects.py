"""What each op's layouts do to a layout file's runtime, seen two ways.

  python benchmarks/research/layout_effects.py [--files a.npz,b.npz] [--top 8] [--out benchmarks/results/layout_effects.md]

Per search group of each labelled layout file (default: every labelled layout file of the real
sample; a group is the configurable ops the configs move in lockstep), the slowest over the
fastest of its layouts two ways: marginal, the geometric mean runtime of the configs that take
each layout (what baselines/stats.py's largest single-op effect maximises), and additive, each
layout's term when log runtime is fit as a sum of one term per group's layout
(layout_search.additive_effects). The marginal view credits a group with the effects of whatever
other groups' layouts come with its own; the additive one does not, and its residual says how
far runtime is from a sum of per-op costs. A generator's cost model should be judged against the
additive column. The real sample is read from ../shared/tpugraphs_sample (or $TPUGRAPHS_SAMPLE_DIR).
"""

import pathlib

import numpy as np
from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from benchmarks import benchmark_results
from tpu_graphs.data import config_split
from tpu_graphs.data import errors
from tpu_graphs.data import graphs
from tpu_graphs.analysis import layout_search
from tpu_graphs.data import locations
from tpu_graphs.data import npz
from tpu_graphs.hlo import features
from tpu_graphs.hlo import opcodes

_FILES = flags.DEFINE_list("files", None, "Labelled layout npz files (default: the real sample's).")
_TOP = flags.DEFINE_integer("top", 8, "Groups per file, the largest additive effects first.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("layout_effects")), "Markdown table to write.")
program.require_at_least(1, _TOP)


def group_rows(graph: graphs.LayoutGraph, top: int) -> tuple[list[dict], float]:
  """The `top` search groups of `graph` with the largest additive effects, and the fit's residual."""
  categories, _ = layout_search.node_layout_categories(graph.node_config_feat)
  runtimes = graph.runtimes()
  fit = layout_search.additive_effects(categories, runtimes)
  marginal = np.exp(layout_search.op_effects(categories, runtimes))
  rows = []
  for group in np.argsort(-fit.effects, kind="stable")[:top]:
    members = np.flatnonzero(fit.group_of == group)
    node = int(graph.node_config_ids[members[0]])
    shape = graph.node_feat[node, features.SHAPE_COLUMNS].astype(np.int64)
    layouts = np.unique(categories[:, members[0]])
    fastest = layouts[np.argmin(fit.terms[group])]
    row = graph.node_config_feat[np.argmax(categories[:, members[0]] == fastest), members[0]]
    measurable = fit.effects[group] - 1 >= layout_search.MEASURABLE_EFFECT
    rows.append({"fastest": fastest_layout(row) if measurable else "(no effect)", "node": node,
                 "opcode": opcodes.OPCODE_NAMES.get(int(graph.node_opcode[node]), "?"),
                 "shape": "x".join(str(d) for d in shape[shape > 0]) or "scalar", "ops": len(members),
                 "layouts": len(layouts), "marginal": float(marginal[members[0]]),
                 "additive": float(fit.effects[group])})
  return rows, fit.residual


def fastest_layout(row: np.ndarray) -> str:
  """A config row's layouts as 'result; operand 0; operand 1', each its two minor-most dims set."""
  tensors = np.rint(np.asarray(row)).astype(np.int64).reshape(features.LAYOUT_MAX_TENSORS, features.LAYOUT_MAX_DIMS)
  return "; ".join(",".join(str(d) for d in tensor[:features.CONFIGURED_LAYOUT_DIMS] if d >= 0) or "-"
                   for tensor in tensors)


def percent(ratio: float) -> str:
  return f"{100 * (ratio - 1):.2f}%"


def plot(per_file: list[tuple[str, list[dict]]], path: pathlib.Path) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  figure, axes = plt.subplots(1, len(per_file), figsize=(5 * len(per_file), 3.6), squeeze=False)
  for axis, (name, rows) in zip(axes[0], per_file):
    positions = np.arange(len(rows))
    for offset, key in ((-0.2, "marginal"), (0.2, "additive")):
      axis.bar(positions + offset, [max(100 * (row[key] - 1), 1e-3) for row in rows], 0.4, label=key)
    axis.set_yscale("log")
    axis.set_xticks(positions, [f"{row['node']}\n{row['ops']} op(s)" for row in rows], fontsize=7)
    axis.set_title(name, fontsize=9)
    axis.set_ylabel("slowest / fastest layout - 1 (%)")
  axes[0][0].legend(fontsize=7)
  figure.tight_layout()
  figure.savefig(path, dpi=110)


def main(argv):
  del argv
  if _FILES.value:
    paths = [pathlib.Path(f) for f in _FILES.value]
  else:
    sample = locations.sample_path("npz")
    if not sample.is_dir():
      raise errors.InputError(locations.missing_sample(sample))
    paths = config_split.labelled_layout_files(sample)
  lines, per_file = [], []
  for path in paths:
    graph = npz.read_graph(path)
    if not isinstance(graph, graphs.LayoutGraph) or graph.runtimes().min() <= 0:
      raise errors.InputError(f"{path}: not a labelled layout file (a layout graph whose configs all have runtimes)")
    rows, residual = group_rows(graph, _TOP.value)
    per_file.append((graph.graph_id, rows))
    lines += [f"**{graph.graph_id}** ({graph.collection}, {graph.num_configs} configs, "
              f"{len(graph.node_config_ids)} configurable ops): log runtime left unexplained by the sum, "
              f"standard deviation {residual:.5f}.", "",
              "| search group (first op) | opcode | result shape | ops | layouts | marginal effect | additive effect "
              "| fastest layout (minor-most dims: result; operands) |",
              "|---|---|---|---:|---:|---:|---:|---|"]
    lines += [f"| {row['node']} | {row['opcode']} | {row['shape']} | {row['ops']} | {row['layouts']} | "
              f"{percent(row['marginal'])} | {percent(row['additive'])} | {row['fastest']} |" for row in rows]
    lines.append("")
  out = pathlib.Path(_OUT.value)
  plot(per_file, benchmark_results.working_path(out, ".png"))
  benchmark_results.write(
      "research/layout_effects", "What each op group's layouts do to real layout runtimes",
      "Per search group (the ops the configs move in lockstep), the slowest over the fastest of its layouts, "
      "minus 1: marginal, comparing the configs that take each layout; additive, each layout's term in a "
      "least-squares sum of one term per group's layout (the largest first).\n\n" + "\n".join(lines) + "\n", out)


if __name__ == "__main__":
  program.run(main)
