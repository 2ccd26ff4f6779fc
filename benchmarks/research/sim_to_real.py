"""Generated against real: does a layout model trained only on generated programs rank real ones?

  python benchmarks/research/sim_to_real.py                       # xla default + random generated programs
  python benchmarks/research/sim_to_real.py --sources xla,nlp --experiment layout

The generated data (--data_dir, default the embedded tree) is only useful if what a model learns
from it holds on real measurements. Rankers, each scored on every labelled real layout file of
the sample (Kendall tau, top-1 and top-10 slowdown of the configs it ranks first):

* generated only: `baselines/layout_train.py --experiment <--experiment>` trained on the
  generated layout train programs of --sources (default and random search side by side) and
  selected on their valid programs; it ranks every config of every real file, whose runtimes it
  never sees (their copies in its test split hold zeros; they are scored here);
* real (first --across file): the same experiment trained on a config split of that real file
  (train half, selecting on its valid quarter); it ranks the split's test quarter and every
  config of the other real files (the cross-program row of benchmarks/real_layout.py);
* generated, then real: the generated-only run's best weights (--init_from) trained further on
  the real ranker's config split, scored as the real ranker: does pretraining on generated
  programs help, above all on the files it never trained on (the cross-program rows)?
* random: a seeded random order, what a ranker that learned nothing scores.

Two references read the real runtimes, to show what one op decides: per file, the op whose
layouts move the mean runtime most (layout_search.op_effects) has its configs' layouts ordered
by their true mean runtime, the rest of each config left to a seeded random order; once by the
op's layout values, once by the element orders they give (layout_search.element_orders: where a
size-1 dimension sits moves no element). What the first reaches and the second does not lies
between layouts that order every element the same: tiling and the compiler's choices, which a
cost model of bytes in order cannot teach.

Tau mixes every op's layouts in one number. A second table per real file says which mechanisms a
ranker has: per search group whose layouts measurably move the runtime (an additive fit,
layout_search.additive_effects), whether the ranker orders them as measured
(layout_search.order_agreement: +1 as measured, -1 reversed; with two distinct layouts, a random
order scores +1 or -1 by chance), and how much of its order comes from groups whose layouts
change nothing.

Writes the tables with the machine, date, command and commit to --out (and prints them). Each
ranker's scores are appended to a journal (out/benchmarks/<--out's name>.jsonl) as soon as they
are known, and a rerun after a kill trains only what is missing (delete it to measure anew).
"""

from __future__ import annotations

import pathlib
import sys
import tempfile
import time
from typing import Optional

import numpy as np
from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from benchmarks import benchmark_results
from tpu_graphs.analysis import layout_search
from tpu_graphs.data import config_split, graphs, locations, npz, predictions
from tpu_graphs.hlo import features
from tpu_graphs.train import metrics

_DATA_DIR = flags.DEFINE_string("data_dir", str(locations.EMBEDDED_NPZ.parent),
                                "A generated tree (baselines/generate.py): its npz/ is read.")
_SOURCES = flags.DEFINE_list("sources", ["xla"], "Generated layout sources to train on (xla, nlp).")
_EXPERIMENT = flags.DEFINE_string("experiment", "quickstart", "The experiment layout_train.py starts from.")
_ACROSS = flags.DEFINE_string("across", "unet3d", "The real file the real-trained ranker learns from.")
_SEED = flags.DEFINE_integer("seed", 0, "Training seed, config split seed and random ranking seed.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("sim_to_real")), "Markdown table to write.")
SEARCHES = ("default", "random")
GENERATED = "generated only"
RANDOM = "random"
DOMINANT_LAYOUTS = "reference: the dominant op's layouts in true order"
DOMINANT_ELEMENT_ORDERS = "reference: the dominant op's element orders in true order"


def link(source: pathlib.Path, target: pathlib.Path) -> None:
  target.parent.mkdir(parents=True, exist_ok=True)
  target.symlink_to(source.resolve())


def write_unlabelled(graph: graphs.LayoutGraph, path: pathlib.Path) -> None:
  """The graph with every config and zero runtimes: what a ranker may see of a file it ranks."""
  npz.write_graph(path, config_split.select_configs(graph, np.arange(graph.num_configs), "test", hide_runtimes=True))


def train_and_rank(data_root: pathlib.Path, run_dir: pathlib.Path,
                   init_from: Optional[pathlib.Path] = None) -> dict[str, np.ndarray]:
  """Trains layout_train.py on <data_root>/layout/xla/default (from the best weights of the run in
  `init_from`, if given); {test graph id: (c,) scores, 0 = predicted fastest}."""
  command = [sys.executable, str(locations.REPOSITORY / "baselines/layout_train.py"), "--source=xla",
             "--search=default", f"--experiment={_EXPERIMENT.value}", f"--data_root={data_root}",
             f"--out_dir={run_dir}", f"--seed={_SEED.value}"]
  if init_from:
    command.append(f"--init_from={init_from}")
  locations.run_with_tree(command, locations.REPOSITORY)
  test_dir = data_root / "layout" / "xla" / "default" / "test"
  sizes = {path.stem: npz.read_graph(path, stream_configs=True).num_configs for path in test_dir.glob("*.npz")}
  scores = {}
  for prediction in predictions.read_predictions(run_dir / "predictions.csv"):
    try:
      scores[prediction.graph_id] = prediction.positions(sizes[prediction.graph_id])
    except ValueError as error:
      raise ValueError(f"{run_dir / 'predictions.csv'}: {error}") from None
  return scores


def generated_tree(root: pathlib.Path, real: dict[str, graphs.LayoutGraph]) -> pathlib.Path:
  """An npz tree whose layout:xla:default train / valid splits hold the generated programs of
  --sources (both searches; files renamed <source>_<search>_<program>) and whose test split holds
  the real files, unlabelled."""
  generated = pathlib.Path(_DATA_DIR.value) / "npz" / "layout"
  collection = root / "layout" / "xla" / "default"
  for source in _SOURCES.value:
    for search in SEARCHES:
      for split in ("train", "valid"):
        for path in sorted((generated / source / search / split).glob("*.npz")):
          link(path, collection / split / f"{source}_{search}_{path.name}")
  if not any((collection / "train").glob("*.npz")) or not any((collection / "valid").glob("*.npz")):
    raise FileNotFoundError(f"{generated}: no generated layout train and valid files of sources {_SOURCES.value}")
  for graph_id, graph in real.items():
    write_unlabelled(graph, collection / "test" / f"{graph_id}.npz")
  return root


def real_tree(root: pathlib.Path, real: dict[str, graphs.LayoutGraph]) -> tuple[pathlib.Path, np.ndarray]:
  """An npz tree holding a config split of the --across file (its test quarter unlabelled) and
  every other real file unlabelled in the test split; and the test quarter's rows."""
  source = real[_ACROSS.value]
  rows = config_split.write_config_split(source, root, _SEED.value)
  test_dir = pathlib.Path(root, *source.collection.split(":"), "test")
  if source.collection != "layout:xla:default":
    raise ValueError(f"{_ACROSS.value}: the real-trained ranker trains on layout:xla:default, not {source.collection}")
  for graph_id, graph in real.items():
    if graph_id != _ACROSS.value:
      write_unlabelled(graph, test_dir / f"{graph_id}.npz")
  return root, rows["test"]


def tensor_shapes(graph: graphs.LayoutGraph, node: int) -> np.ndarray:
  """(3, 6) dimension sizes of a node's result and first two operands (zeros where absent)."""
  tensors = [node, *graph.edge_index[graph.edge_index[:, 0] == node, 1][:2]]  # rows are [consumer, producer]
  shapes = np.zeros((features.LAYOUT_MAX_TENSORS, features.LAYOUT_MAX_DIMS))
  shapes[:len(tensors)] = graph.node_feat[tensors][:, features.SHAPE_COLUMNS]
  return shapes


def dominant_op_orders(graph: graphs.LayoutGraph, rng: np.random.Generator) -> dict[str, np.ndarray]:
  """{reference: (c,) scores}: configs ordered by the true mean log runtime of the dominant op's
  layout (or element order) they take, ties in a random order."""
  categories, _ = layout_search.node_layout_categories(graph.node_config_feat)
  log_runtimes = np.log(graph.runtimes().astype(np.float64))
  dominant = int(np.argmax(layout_search.op_effects(categories, graph.runtimes())))
  groupings = {DOMINANT_LAYOUTS: categories[:, dominant], DOMINANT_ELEMENT_ORDERS: layout_search.element_orders(
      graph.node_config_feat[:, dominant, :], tensor_shapes(graph, int(graph.node_config_ids[dominant])))}
  orders = {}
  for name, groups in groupings.items():
    means = np.bincount(groups, weights=log_runtimes) / np.bincount(groups)
    ranked = np.lexsort((rng.permutation(graph.num_configs), means[groups]))
    orders[name] = np.empty(graph.num_configs)
    orders[name][ranked] = np.arange(graph.num_configs)
  return orders


def scored(graph: graphs.LayoutGraph, scores: np.ndarray, rows: Optional[np.ndarray] = None) -> dict:
  """Tau and top-k slowdowns of `scores` for `graph`'s configs `rows` (default all), and per search
  group with a measurable effect the order agreement (layout_search.order_agreement), keyed by the
  group's first configurable node."""
  rows = np.arange(graph.num_configs) if rows is None else rows
  runtimes = graph.runtimes()[rows]
  categories, _ = layout_search.node_layout_categories(graph.node_config_feat)
  agreement = layout_search.order_agreement(categories[rows], runtimes, scores)
  return {"tau": metrics.kendall_tau(runtimes, scores), "top1": metrics.top_k_slowdown(runtimes, scores, 1),
          "top10": metrics.top_k_slowdown(runtimes, scores, 10), "configs": int(runtimes.size),
          "groups": {str(int(graph.node_config_ids[column])): value
                     for column, value in agreement.by_group.items()},
          "unmeasured_share": agreement.unmeasured_share}


def agreement_table(real: dict[str, graphs.LayoutGraph], results: dict, rankers: list[str]) -> list[str]:
  """Per real file, per search group with a measurable effect: each ranker's order agreement."""
  lines = []
  for graph_id, graph in real.items():
    categories, _ = layout_search.node_layout_categories(graph.node_config_feat)
    fit = layout_search.additive_effects(categories, graph.runtimes())
    lines += ["", f"**{graph_id}**: per search group with a measurable effect (additive, "
              "`benchmarks/research/layout_effects.py`), the agreement of each ranker's order of its layouts with the "
              "measured one (+1 as measured, -1 reversed); last row, the share of the ranker's order that groups "
              "without a measurable effect explain.", "",
              "| search group (first op, ops, effect) | " + " | ".join(rankers) + " |",
              "|---|" + "---:|" * len(rankers)]
    for group in np.argsort(-fit.effects, kind="stable"):
      if fit.effects[group] - 1 < layout_search.MEASURABLE_EFFECT:
        continue
      members = np.flatnonzero(fit.group_of == group)
      node = str(int(graph.node_config_ids[members[0]]))
      cells = [results[r]["files"].get(graph_id, {}).get("groups", {}).get(node) for r in rankers]
      lines.append(f"| {node} ({len(members)} ops, {100 * (fit.effects[group] - 1):.2f}%) | "
                   + " | ".join("-" if c is None else f"{c:+.2f}" for c in cells) + " |")
    shares = [results[r]["files"].get(graph_id, {}).get("unmeasured_share") for r in rankers]
    lines.append("| groups without a measurable effect: share of the order | "
                 + " | ".join("-" if c is None else f"{c:.2f}" for c in shares) + " |")
  return lines


def main(argv):
  del argv
  real = {}
  for path in config_split.labelled_layout_files(locations.sample_path()):
    graph = npz.read_graph(path)
    real[graph.graph_id] = graph
  if not real:
    sys.exit(f"sim_to_real: no labelled real layout files in {locations.sample_dir()}")
  journal = benchmark_results.working_path(_OUT.value, ".jsonl")
  results = {r["ranker"]: r for r in benchmark_results.read_journal(journal)}
  real_ranker = f"real {_ACROSS.value}"
  pretrained_ranker = f"generated, then real {_ACROSS.value}"

  def record(result: dict) -> None:
    results[result["ranker"]] = result
    print(benchmark_results.append_to_journal(journal, result), flush=True)

  def real_scores(scores: dict[str, np.ndarray], test_rows: np.ndarray) -> dict[str, dict]:
    files = {graph_id: scored(graph, scores[graph_id])
             for graph_id, graph in real.items() if graph_id != _ACROSS.value}
    files[_ACROSS.value] = scored(real[_ACROSS.value], scores[_ACROSS.value], test_rows)
    return files

  with tempfile.TemporaryDirectory(prefix="sim_to_real_") as scratch:
    scratch = pathlib.Path(scratch)
    generated_run = scratch / "generated_run"
    pretraining = pretrained_ranker not in results and _ACROSS.value in real
    if GENERATED not in results or pretraining:
      start = time.perf_counter()
      scores = train_and_rank(generated_tree(scratch / "generated", real), generated_run)
      if GENERATED not in results:
        record({"ranker": GENERATED, "seconds": time.perf_counter() - start, "sources": _SOURCES.value,
                "files": {graph_id: scored(graph, scores[graph_id]) for graph_id, graph in real.items()}})
    if real_ranker not in results and _ACROSS.value in real:
      start = time.perf_counter()
      root, test_rows = real_tree(scratch / "real", real)
      files = real_scores(train_and_rank(root, scratch / "real_run"), test_rows)
      record({"ranker": real_ranker, "seconds": time.perf_counter() - start, "files": files})
    if pretraining:
      start = time.perf_counter()
      root, test_rows = real_tree(scratch / "pretrained", real)
      files = real_scores(train_and_rank(root, scratch / "pretrained_run", generated_run), test_rows)
      record({"ranker": pretrained_ranker, "seconds": time.perf_counter() - start, "files": files})
    if RANDOM not in results:
      rng = np.random.default_rng(_SEED.value)
      record({"ranker": RANDOM, "seconds": 0.0, "files": {
          graph_id: scored(graph, rng.permutation(graph.num_configs).astype(np.float64))
          for graph_id, graph in real.items()}})
    if DOMINANT_LAYOUTS not in results or DOMINANT_ELEMENT_ORDERS not in results:
      rng = np.random.default_rng(_SEED.value)
      orders = {graph_id: dominant_op_orders(graph, rng) for graph_id, graph in real.items()}
      for name in (DOMINANT_LAYOUTS, DOMINANT_ELEMENT_ORDERS):
        record({"ranker": name, "seconds": 0.0, "files": {
            graph_id: scored(graph, orders[graph_id][name]) for graph_id, graph in real.items()}})
  rankers = [name for name in (GENERATED, real_ranker, pretrained_ranker, RANDOM, DOMINANT_LAYOUTS,
                               DOMINANT_ELEMENT_ORDERS) if name in results]
  data_dir = pathlib.Path(_DATA_DIR.value).resolve()
  if data_dir.is_relative_to(locations.REPOSITORY):
    data_dir = data_dir.relative_to(locations.REPOSITORY)
  lines = [f"Experiment `{_EXPERIMENT.value}`, seed {_SEED.value}. {GENERATED}: trained on the generated layout "
           f"train programs of {', '.join(_SOURCES.value)} ({' and '.join(SEARCHES)} search) under {data_dir}, "
           f"selected on their valid programs, ranking every config of each real file. {real_ranker}: trained on a "
           f"config split of {_ACROSS.value} (train half, valid quarter), ranking its test quarter and every config "
           f"of the other files. {pretrained_ranker}: the same, starting from the {GENERATED} run's best weights. "
           "The references read the runtimes: configs ordered by the true mean runtime of the layout (or the element "
           "order, size-1 dimensions dropped) the file's dominant op takes, the rest in a random order. "
           "Per real file: Kendall tau / top-1 slowdown / top-10 slowdown (configs ranked).", "",
           "| ranker | " + " | ".join(f"{graph_id} ({graph.num_configs} configs, spread "
                                      f"{graph.runtimes().max() / graph.runtimes().min():.3f}x)" for graph_id, graph
                                      in real.items()) + " | seconds |",
           "|---|" + "---:|" * (len(real) + 1)]
  for ranker in rankers:
    cells = []
    for graph_id in real:
      found = results[ranker]["files"].get(graph_id)
      cells.append("-" if found is None else f"{found['tau']:.3f} / {found['top1']:.1%} / {found['top10']:.1%}"
                   + ("" if found["configs"] == real[graph_id].num_configs else f" ({found['configs']} configs)"))
    lines.append(f"| {ranker} | " + " | ".join(cells) + f" | {results[ranker]['seconds']:.0f} |")
  lines += agreement_table(real, results, rankers)
  benchmark_results.write("research/sim_to_real", "Ranking real layout configs after training on generated programs",
                          "\n".join(lines), pathlib.Path(_OUT.value))


if __name__ == "__main__":
  program.run(main)
