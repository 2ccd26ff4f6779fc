"""Prints what serving costs through the exported SavedModel: latency, peak RSS, kernels/s.

  python benchmarks/serve.py [--layout_model out/layout/export] [--tile_model out/tiles/export]

* layout: the first --configs (1,000) configs of the real 21,918-node nlp default test graph,
  scored with tpu_graphs.export.Ranker (chunks of --configs_per_call): load time, the first call
  (graph optimization included) and a warm repeat, and the peak RSS of the whole process;
* tile: every config of every kernel under the embedded generated tile:xla tree and the real tile
  sample: kernels/s and configs/s, warm.

Each measurement runs in its own fresh process, so its peak RSS is its own. Without a --*_model
an untrained model of the baselines' default size is exported first: latency and memory do not
depend on the weights.
"""

import dataclasses
import json
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from tpu_graphs.data import locations

NLP_TEST_GRAPH = locations.SAMPLE_NPZ / "layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz"
SMALL_LAYOUT_GRAPH = locations.SAMPLE_NPZ / "layout/xla/default/test/cd708819d3f5103afd6460b15e74eaf3.npz"

_LAYOUT_MODEL = flags.DEFINE_string("layout_model", None, "A layout serving SavedModel; default: export an untrained one.")
_TILE_MODEL = flags.DEFINE_string("tile_model", None, "A tile serving SavedModel; default: export an untrained one.")
_CONFIGS = flags.DEFINE_integer("configs", 1000, "Layout configs to score.")
_CONFIGS_PER_CALL = flags.DEFINE_integer("configs_per_call", None, "Configs per model call; default the Ranker's.")
_PRUNE_HOPS = flags.DEFINE_integer("prune_hops", 0, "For the untrained layout model: neighbourhood kept around configurable ops.")
_MEASURE = flags.DEFINE_enum("measure", None, ["layout", "tile"], "Internal: run one measurement in this process.")
_MODEL = flags.DEFINE_string("model", None, "Internal: the model of --measure.")


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
  start = time.perf_counter()
  warm = scorer.score(graph)
  warm_seconds = time.perf_counter() - start
  if not np.array_equal(first, warm):
    raise RuntimeError("two calls on the same graph scored differently")
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


# Per collection measured: a graph to build the model's input spec from.
EXAMPLE_GRAPHS = {"tile:xla": locations.SAMPLE_NPZ / "tile/xla/test/0a3585c3e686065389227fa374175e48.npz",
                  "layout:xla:default": SMALL_LAYOUT_GRAPH}


def export_untrained(collection: str, directory: pathlib.Path, prune_hops: int) -> pathlib.Path:
  """An untrained model of the training programs' default size (64 units, 3 layers), exported for serving."""
  import tensorflow as tf
  from tpu_graphs.data import graphs, npz, records
  from tpu_graphs.export import saved_model
  from tpu_graphs.train import experiments
  kind = graphs.collection_kind(collection)
  structure, chunks = records.graph_records(npz.read_graph(EXAMPLE_GRAPHS[collection]), configs_per_chunk=4)
  example = records.join(kind, records.parse(kind, tf.constant(structure)),
                         records.parse(kind, tf.constant(next(iter(chunks)))))
  spec = example.with_indices_dtype(tf.int32).spec.relax(num_components=True, num_nodes=True, num_edges=True)
  # Untrained: no training statistics to normalize with.
  overrides = {"tile:xla": {}, "layout:xla:default": {"normalize": False, "prune_hops": prune_hops}}[collection]
  experiment = experiments.experiment("quickstart", collection).overridden(model=overrides)
  saved_model.export(experiment.model.model_builder(train_npz_dir=None)(spec), kind, directory / kind,
                     experiment.task().structure_transform)
  return directory / kind


def _measured(kind: str, model: pathlib.Path, extra: list) -> dict:
  completed = subprocess.run([sys.executable, __file__, f"--measure={kind}", f"--model={model}", *extra],
                             check=True, capture_output=True, text=True)
  return json.loads(completed.stdout.strip().splitlines()[-1])


def main(argv):
  del argv
  measurements = {
      "layout": lambda: measure_layout(_MODEL.value, NLP_TEST_GRAPH, _CONFIGS.value, _CONFIGS_PER_CALL.value),
      "tile": lambda: measure_tile(_MODEL.value, [locations.EMBEDDED_NPZ / "tile", locations.SAMPLE_NPZ / "tile"])}
  if _MEASURE.value:
    print(json.dumps(measurements[_MEASURE.value]()))
    return
  if not (NLP_TEST_GRAPH).exists():
    sys.exit(f"benchmark: {NLP_TEST_GRAPH} not found; the real TpuGraphs sample is needed")
  with tempfile.TemporaryDirectory() as temporary:
    layout = pathlib.Path(_LAYOUT_MODEL.value or
                          export_untrained("layout:xla:default", pathlib.Path(temporary), _PRUNE_HOPS.value))
    tile = pathlib.Path(_TILE_MODEL.value or export_untrained("tile:xla", pathlib.Path(temporary), _PRUNE_HOPS.value))
    extra = [f"--configs={_CONFIGS.value}"] + ([f"--configs_per_call={_CONFIGS_PER_CALL.value}"]
                                                if _CONFIGS_PER_CALL.value else [])
    result = {"layout": _measured("layout", layout, extra), "tile": _measured("tile", tile, [])}
  layout, tile = result["layout"], result["tile"]
  print(f"layout: {layout['configs']} configs of the {layout['nodes']:,}-node nlp test graph "
        f"({layout['configurable']} configurable ops), {layout['configs_per_call']} per call: "
        f"load {layout['load_s']:.2f} s, first call {layout['first_call_s']:.2f} s, warm {layout['warm_call_s']:.2f} s, "
        f"peak RSS {layout['peak_rss_mb']:.0f} MB ({layout['peak_rss_after_load_mb']:.0f} MB after loading)")
  print(f"tile: {tile['kernels']} kernels, {tile['configs']:,} configs in {tile['seconds']:.2f} s: "
        f"{tile['kernels_per_s']:.1f} kernels/s, {tile['configs_per_s']:,.0f} configs/s, peak RSS {tile['peak_rss_mb']:.0f} MB")
  print(json.dumps(result, indent=1))


if __name__ == "__main__":
  app.run(main)
