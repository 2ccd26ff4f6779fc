"""What serving costs through the exported SavedModel: latency, peak RSS, kernels/s.

  python benchmarks/serve.py [--layout_model out/layout/export] [--tile_model out/tiles/export] \
      [--out benchmarks/results/serve.md]

* layout: the first --configs (1,000) configs of the real 21,918-node nlp default test graph,
  scored with tpu_graphs.export.Ranker (chunks of --configs_per_call): load time, the first call
  (graph optimization included), the median of WARM_CALLS warm repeats, and the peak RSS of the
  whole process; without
  --layout_model, also today's layout model (--previous_commit's, exported by that commit's own
  code from a git archive of it) the same way, and how much faster the warm call is now;
* tile: every config of every kernel under the embedded generated tile:xla tree and the real tile
  sample: kernels/s and configs/s, warm.

Each measurement runs in its own fresh process, so its peak RSS is its own. Without a --*_model
an untrained model of the baselines' default size is exported first: latency and memory do not
depend on the weights. The real sample is found as the tests find it ($TPUGRAPHS_SAMPLE_DIR, else
../shared/tpugraphs_sample); the table goes to --out (benchmarks/benchmark_results.py).
"""

import dataclasses
import json
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from benchmarks import benchmark_results
from benchmarks import untrained
from tpu_graphs.data import locations
from tpu_graphs.train import experiments

# Inside the sample folder (locations.sample_dir()).
NLP_TEST_GRAPH = "npz/layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz"
# Warm layout calls measured, their median reported: one call alone moved by 10% between runs.
WARM_CALLS = 5

_LAYOUT_MODEL = flags.DEFINE_string("layout_model", None, "A layout serving SavedModel; default: export an untrained one.")
_TILE_MODEL = flags.DEFINE_string("tile_model", None, "A tile serving SavedModel; default: export an untrained one.")
_CONFIGS = flags.DEFINE_integer("configs", 1000, "Layout configs to score.")
_CONFIGS_PER_CALL = flags.DEFINE_integer("configs_per_call", None, "Configs per model call; default the Ranker's.")
_PRUNE_HOPS = flags.DEFINE_integer("prune_hops", 0, "For the untrained layout model: neighbourhood kept around configurable ops.")
_MEASURE = flags.DEFINE_enum("measure", None, ["layout", "tile"], "Internal: run one measurement in this process.")
_MODEL = flags.DEFINE_string("model", None, "Internal: the model of --measure.")
_PREVIOUS_COMMIT = flags.DEFINE_string("previous_commit", "6aa916c",
                                       "Commit whose untrained layout model is today's, measured beside this tree's "
                                       "(main when issue 51 was taken up); '' = skip.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("serve")), "Markdown table to write.")


def _peak_rss_mb() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_layout(model: str, graph_path: pathlib.Path, configs: int, configs_per_call) -> dict:
  import numpy as np
  from tpu_graphs.data import npz
  from tpu_graphs.export import ranker
  graph = npz.read_graph(graph_path)
  graph = dataclasses.replace(graph, node_config_feat=graph.node_config_feat[:configs],
                              config_runtime=graph.config_runtime[:configs])
  start = time.perf_counter()
  scorer = ranker.Ranker(model, configs_per_call or ranker.DEFAULT_CONFIGS_PER_CALL)
  loaded, rss_loaded = time.perf_counter() - start, _peak_rss_mb()
  start = time.perf_counter()
  first = scorer.score(graph)
  first_seconds = time.perf_counter() - start
  warm_seconds = []
  for _ in range(WARM_CALLS):
    start = time.perf_counter()
    warm = scorer.score(graph)
    warm_seconds.append(time.perf_counter() - start)
    if not np.array_equal(first, warm):
      raise RuntimeError("two calls on the same graph scored differently")
  warm_seconds = float(np.median(warm_seconds))
  return {"nodes": int(graph.node_feat.shape[0]), "configurable": int(graph.node_config_ids.shape[0]),
          "configs": int(first.shape[0]), "configs_per_call": scorer.configs_per_call, "load_s": loaded,
          "first_call_s": first_seconds, "warm_call_s": warm_seconds, "peak_rss_after_load_mb": rss_loaded,
          "peak_rss_mb": _peak_rss_mb()}


def measure_tile(model: str, roots: list) -> dict:
  from tpu_graphs.data import npz
  from tpu_graphs.export import ranker
  kernels = [npz.read_graph(path) for root in roots for path in sorted(pathlib.Path(root).rglob("*.npz"))]
  scorer = ranker.Ranker(model)
  for graph in kernels[:20]:  # warm-up: the first calls optimize the graph
    scorer.score(graph)
  start = time.perf_counter()
  configs = sum(scorer.score(graph).shape[0] for graph in kernels)
  seconds = time.perf_counter() - start
  return {"kernels": len(kernels), "configs": configs, "seconds": seconds, "kernels_per_s": len(kernels) / seconds,
          "configs_per_s": configs / seconds, "peak_rss_mb": _peak_rss_mb()}


def _measured(kind: str, model: pathlib.Path, extra: list) -> dict:
  completed = subprocess.run([sys.executable, __file__, f"--measure={kind}", f"--model={model}", *extra],
                             check=True, capture_output=True, text=True)
  return json.loads(completed.stdout.strip().splitlines()[-1])


def main(argv):
  del argv
  if _MEASURE.value == "layout":
    print(json.dumps(measure_layout(_MODEL.value, locations.sample_path(NLP_TEST_GRAPH), _CONFIGS.value,
                                    _CONFIGS_PER_CALL.value)))
    return
  if _MEASURE.value == "tile":
    print(json.dumps(measure_tile(_MODEL.value, [locations.EMBEDDED_NPZ / "tile", locations.sample_path("npz/tile")])))
    return
  locations.sample_path(NLP_TEST_GRAPH)
  with tempfile.TemporaryDirectory() as temporary:
    layout = pathlib.Path(_LAYOUT_MODEL.value or
                          untrained.export_untrained("layout:xla:default", temporary, prune_hops=_PRUNE_HOPS.value))
    tile = pathlib.Path(_TILE_MODEL.value or untrained.export_untrained("tile:xla", temporary))
    extra = [f"--configs={_CONFIGS.value}"] + ([f"--configs_per_call={_CONFIGS_PER_CALL.value}"]
                                                if _CONFIGS_PER_CALL.value else [])
    previous = None
    if _PREVIOUS_COMMIT.value and not _LAYOUT_MODEL.value:
      tree = locations.checkout(_PREVIOUS_COMMIT.value, pathlib.Path(temporary) / "previous_tree")
      locations.run_with_tree([sys.executable, "-c", f"import sys; {untrained.IMPORT_IN_ANY_TREE}; "
                               "untrained.export_untrained('layout:xla:default', sys.argv[1], prune_hops=int(sys.argv[2]))",
                               str(pathlib.Path(temporary) / "previous"), str(_PRUNE_HOPS.value)], tree, cwd=tree)
      previous = _measured("layout", pathlib.Path(temporary) / "previous" / "layout", extra)
    layout, tile = _measured("layout", layout, extra), _measured("tile", tile, [])
  models = "the given SavedModels" if _LAYOUT_MODEL.value or _TILE_MODEL.value else \
      ("untrained models of the default size (tile: 64 units, 3 layers; layout: "
       f"{experiments.LayoutSettings().size()}, pruned to {_PRUNE_HOPS.value} hops)")
  table = [
      "| measure | value |", "|---|---:|",
      f"| layout: the nlp test graph's ops / configurable ops / configs scored | {layout['nodes']:,} / "
      f"{layout['configurable']:,} / {layout['configs']:,} |",
      f"| layout: configs per SavedModel call (Ranker) | {layout['configs_per_call']:,} |",
      f"| layout: load the SavedModel | {layout['load_s']:.2f} s |",
      f"| layout: first call (graph optimization included) | {layout['first_call_s']:.2f} s |",
      f"| layout: warm call (median of {WARM_CALLS}) | {layout['warm_call_s']:.2f} s |",
      f"| layout: peak RSS of the process (after loading) | {layout['peak_rss_mb']:,.0f} MB "
      f"({layout['peak_rss_after_load_mb']:,.0f} MB) |",
      *([f"| layout, today's model ({_PREVIOUS_COMMIT.value}): first call / warm call (median of {WARM_CALLS}) | "
         f"{previous['first_call_s']:.2f} s / {previous['warm_call_s']:.2f} s |",
         f"| layout, today's model ({_PREVIOUS_COMMIT.value}): peak RSS of the process | "
         f"{previous['peak_rss_mb']:,.0f} MB |",
         f"| layout: warm call, today's model over this one | {previous['warm_call_s'] / layout['warm_call_s']:.1f}× |"]
        if previous else []),
      f"| tile: kernels / configs scored (embedded generated tile:xla and the real tile sample) | "
      f"{tile['kernels']:,} / {tile['configs']:,} |",
      f"| tile: warm kernels/s | {tile['kernels_per_s']:,.0f} |",
      f"| tile: warm configs/s | {tile['configs_per_s']:,.0f} |",
      f"| tile: peak RSS of the process | {tile['peak_rss_mb']:,.0f} MB |"]
  benchmark_results.write("serve", f"Serving through the exported SavedModel, {models}, each measure in a fresh "
                          "process", "\n".join(table), _OUT.value)


if __name__ == "__main__":
  program.run(main)
