"""The generator's labels against a TPU's: its cost model priced on a real program.

  python benchmarks/research/cost_model_real.py [--out benchmarks/results/cost_model_real.md]

The generated layout data teaches whatever its cost model (tpu_graphs/synth/layout_cost_model.py) says.
Where the real sample holds a program's HLO (a raw ModuleTuningData proto under pb/) beside its
labelled npz file, the cost model can be built on that very program and asked to price the
file's measured configs: its Kendall tau and top-K slowdown against the measurements say how far
the labels' mechanisms hold on a TPU, apart from anything a ranker learns. Per search group whose
layouts measurably move the runtime (layout_search.additive_effects), the measured and the
modelled additive effect and whether the model orders the group's layouts as measured
(layout_search.order_agreement); per group without a measured effect, what the model charges
for nothing.

Protos and npz files are paired by their graphs (same opcodes and edges). Layouts a real config
sets that the model does not offer are priced at the default and counted per opcode: the
candidate sets themselves are a mechanism the generator can get wrong. The sample is read from ../shared/tpugraphs_sample (or
$TPUGRAPHS_SAMPLE_DIR).
"""

from __future__ import annotations

import pathlib

import numpy as np
from absl import flags
from google.protobuf import message as protobuf_message

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from benchmarks import benchmark_results
from tpu_graphs.analysis import layout_search
from tpu_graphs.data import config_split, errors, graphs, locations, npz
from tpu_graphs.hlo import features, featurize, opcodes, tuning_pb2
from tpu_graphs.synth import generate, layout_cost_model
from tpu_graphs.train import metrics

_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("cost_model_real")), "Markdown table to write.")


def paired_programs(sample: pathlib.Path) -> list[tuple[pathlib.Path, tuning_pb2.ModuleTuningData, graphs.LayoutGraph]]:
  """(proto path, its tuning data, the labelled layout file with the same graph) for every layout
  ModuleTuningData proto of the sample that has such a file."""
  labelled = [npz.read_graph(path) for path in config_split.labelled_layout_files(sample / "npz")]
  pairs = []
  for path in sorted((sample / "pb").rglob("*.pb")):
    tuning = tuning_pb2.ModuleTuningData()
    try:
      tuning.ParseFromString(path.read_bytes())
    except protobuf_message.DecodeError:  # not a ModuleTuningData (a tile TuningData may parse, and is skipped below)
      continue
    if not tuning.config_index_to_node or not tuning.module.computations:
      continue
    module = featurize.module_features(tuning.module, str(path))
    for graph in labelled:
      if (np.array_equal(graph.node_opcode, module.node_opcode) and np.array_equal(graph.edge_index, module.edge_index)
          and np.array_equal(graph.node_config_ids, np.asarray(tuning.config_index_to_node))):
        pairs.append((path, tuning, graph))
  return pairs


def priced(tuning: tuning_pb2.ModuleTuningData, graph: graphs.LayoutGraph) -> tuple[np.ndarray, dict[str, float]]:
  """(c,) noiseless cost-model runtimes of the file's configs, and per opcode of the configurable
  ops, the share of their configured tensor layouts the model does not offer."""
  module = featurize.module_features(tuning.module)
  model = layout_cost_model.LayoutCostModel(module.instructions, layout_cost_model.costed_nodes(tuning.module),
                                            graph.node_config_ids)
  choices, offered = model.choices_of(graph.node_config_feat)
  opcode_of = np.asarray([module.instructions[v.node].opcode for v in model.variables])
  return model.runtimes(choices), {opcode: float(1 - offered[:, opcode_of == opcode].mean())
                                   for opcode in sorted(set(opcode_of))}


def group_rows(graph: graphs.LayoutGraph, modelled: np.ndarray) -> list[dict]:
  """Per search group, the measured and modelled additive effects (slowest over fastest layout),
  the model's order agreement where the measurements have an effect; largest measured first."""
  categories, _ = layout_search.node_layout_categories(graph.node_config_feat)
  measured_fit = layout_search.additive_effects(categories, graph.runtimes())
  modelled_fit = layout_search.additive_effects(categories, modelled)
  agreement = layout_search.order_agreement(categories, graph.runtimes(), modelled).by_group
  rows = []
  for group in np.argsort(-measured_fit.effects, kind="stable"):
    members = np.flatnonzero(measured_fit.group_of == group)
    node = int(graph.node_config_ids[members[0]])
    shape = graph.node_feat[node, features.SHAPE_COLUMNS].astype(np.int64)
    rows.append({"node": node, "opcode": opcodes.OPCODE_NAMES.get(int(graph.node_opcode[node]), "?"),
                 "shape": "x".join(str(d) for d in shape[shape > 0]) or "scalar", "ops": len(members),
                 "measured": float(measured_fit.effects[group]),
                 "modelled": float(modelled_fit.effects[modelled_fit.group_of[members[0]]]),
                 "agreement": agreement.get(int(members[0]))})
  return rows


def percent(ratio: float) -> str:
  return f"{100 * (ratio - 1):.2f}%"


def agreement_text(agreement) -> str:
  return "-" if agreement is None else f"{agreement:+.2f}"


def plot(per_file: list[tuple[str, np.ndarray, np.ndarray]], path: pathlib.Path) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  figure, axes = plt.subplots(1, len(per_file), figsize=(4.5 * len(per_file), 4), squeeze=False)
  for axis, (name, measured, modelled) in zip(axes[0], per_file):
    axis.scatter(100 * (measured / measured.min() - 1), 100 * (modelled / modelled.min() - 1), s=4, alpha=0.4)
    axis.set_xlabel("measured: over the fastest config (%)")
    axis.set_ylabel("cost model: over its fastest config (%)")
    axis.set_title(name, fontsize=9)
  figure.tight_layout()
  figure.savefig(path, dpi=110)


def main(argv):
  del argv
  sample = locations.sample_path()
  pairs = paired_programs(sample)
  if not pairs:
    raise errors.InputError(f"{sample}: no layout ModuleTuningData proto whose graph is a labelled layout file")
  summary = ["| program (proto) | configs | configured layouts the model does not offer | Kendall tau | top-1 slowdown | top-10 slowdown "
             "| measured spread | modelled spread |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
  details, per_file = [], []
  for path, tuning, graph in pairs:
    measured = graph.runtimes().astype(np.float64)
    modelled, not_offered = priced(tuning, graph)
    per_file.append((graph.graph_id, measured, modelled))
    summary.append(
        f"| {graph.graph_id} ({path.relative_to(sample)}) | {graph.num_configs} "
        f"| {', '.join(f'{opcode} {100 * share:.0f}%' for opcode, share in not_offered.items())} "
        f"| {metrics.kendall_tau(measured, modelled):.3f} | {metrics.top_k_slowdown(measured, modelled, 1):.4f} "
        f"| {metrics.top_k_slowdown(measured, modelled, 10):.4f} | {percent(measured.max() / measured.min())} "
        f"| {percent(modelled.max() / modelled.min())} |")
    details += ["", f"**{graph.graph_id}**, per search group (the ops its configs move in lockstep), the slowest "
                "over the fastest of its layouts as an additive term, measured and modelled; agreement: +1 the "
                "model orders the group's measurably different layouts as measured, -1 in reverse.", "",
                "| search group (first op) | opcode | result shape | ops | measured effect | modelled effect "
                "| agreement |", "|---|---|---|---:|---:|---:|---:|"]
    details += [f"| {row['node']} | {row['opcode']} | {row['shape']} | {row['ops']} | {percent(row['measured'])} | "
                f"{percent(row['modelled'])} | {agreement_text(row['agreement'])} |"
                for row in group_rows(graph, modelled)]
  out = pathlib.Path(_OUT.value)
  plot(per_file, benchmark_results.working_path(out, ".png"))
  benchmark_results.write(
      "research/cost_model_real", "The generator's cost model priced on real programs",
      f"The cost model of generator version {generate.GENERATOR_VERSION}, built on each real program's HLO, ranks "
      "that program's measured configs (slowdowns: best measured runtime among the model's top K over the "
      "best, minus 1).\n\n" + "\n".join(summary + details) + "\n", out)


if __name__ == "__main__":
  program.run(main)
