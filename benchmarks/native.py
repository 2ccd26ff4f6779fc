"""What calling the model costs from Python, through TensorFlow's C API and as an AOT-compiled library.

  bazel build //native:all
  python benchmarks/native.py [--kinds tile,layout,module]   # writes benchmarks/results/native{,_layout,_module}.md

* tile (native.md): the first 100 configs of the real sample's median-size kernel with at least
  100 configs (15 ops; the sample's tile kernels have 18 ops at the median), one call scoring all
  100 (the library's kernel half and configs' half on two threads; also one thread,
  TPU_GRAPHS_NUM_THREADS=1);
* layout (native_layout.md): every config (1,965) of the real unet_3d.4x4.bf16 graph (3,163 ops,
  62 configurable) and the first 1,000 of the real 21,918-op nlp test graph (848 configurable),
  one call each; the SavedModel prunes the graph inside its graph, the AOT library on the host
  (native/library/layout_pruning.cc) before its compiled bucket's context and chunk programs (one thread
  per core over the chunks; also one thread, TPU_GRAPHS_NUM_THREADS=1). Beside this tree's model,
  today's: the layout model of --previous_commit exported from that commit's tree (git archive),
  through its Python SavedModel. Per config: the multiply-adds of the chunk program's dense
  layers on its padded bucket (twice as FLOPs), and the share of the machine's float32 peak
  (machine_peak_flops) that the library's calls reach.

* module (native_module.md): a module's bytes to its best configs, the question a compiler asks:
  the real sample's layout tuning data (unet_3d, its runs ignored) and a transformer block XLA
  dumped itself (tpu_graphs/hlo/xla_dumps.py), each with 100 candidate layouts for a layout model,
  and the transformer block's fusions with 50 candidate tile sizes each for a tile model; the
  featurizing (bytes to graphs with their candidate configs) and the whole call (featurizing,
  scoring, the top 5 and what each sets) of the Python path (featurize.py, candidates.py, the
  SavedModel through the Ranker) against the compiled library's tpu_graphs_rank_module
  (native/hlo; //native:rank --hlo --repeat), median of --module_calls calls after a first.

Per call: the median over --calls (tile) or --layout_calls calls after a first, warm-up call. Each
way runs in a fresh process (the Python SavedModel: this script with --measure; the others:
bazel-bin/native/tools/rank --repeat), whose peak RSS (VmHWM) is its own. Models are untrained
(benchmarks/untrained.py; cost does not depend on the weights): tile models of the
baselines' default size (64 units, 3 layers) and of `--experiment smallest` (16 units, 1 layer),
a layout model of the default size pruning to configurable ops (prune_hops 0, the default).
"""

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from benchmarks import benchmark_results
from benchmarks import untrained
from tpu_graphs.data import locations
from tpu_graphs.export.aot import tile_shapes
from tpu_graphs.train import experiments

TILE_GRAPH = "npz/tile/xla/test/0a8a2b247d7a20b9dcab1daf50066a4d.npz"  # 15 ops, 807 configs
LAYOUT_GRAPH = "npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz"
TILE_CONFIGS = 100
RANK = locations.REPOSITORY / "bazel-bin" / "native" / "tools" / "rank"
RUNTIME_DIR = locations.REPOSITORY / "bazel-bin" / "native"
# Tile models measured: experiment -> its model's size.
TILE_MODELS = {"quickstart": "default size (64 units, 3 layers)", "smallest": "`--experiment smallest` (16 units, 1 layer)"}
WAYS = {"python": "Python SavedModel (plain signature)", "capi": "C API (`rank --mode=capi`)",
        "x86-64": "AOT library, its x86-64 code (`TPU_GRAPHS_CPU_LEVEL=x86-64`)",
        "x86-64-v3": "AOT library, its x86-64-v3 code, AVX2 (`TPU_GRAPHS_CPU_LEVEL=x86-64-v3`)",
        "x86-64-v4": "AOT library, its x86-64-v4 code, AVX-512 (`rank --mode=aot`: the CPU's newest)"}
# The tile library's calls on their caller's thread alone, without the helper thread that computes
# the configs' half beside the kernel's (native/library/library_threads.h).
ONE_THREAD = {"name": "AOT library, the CPU's newest code, one thread (`TPU_GRAPHS_NUM_THREADS=1`)",
              "environment": {"TPU_GRAPHS_NUM_THREADS": "1"}}
NLP_GRAPH = "npz/layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz"
NLP_CONFIGS = 1000

_CALLS = flags.DEFINE_integer("calls", 300, "Tile calls timed per way.")
_LAYOUT_CALLS = flags.DEFINE_integer("layout_calls", 5, "Layout calls timed per way.")
_MODULE_CALLS = flags.DEFINE_integer("module_calls", 10, "Module calls (featurize, whole call) timed per way.")
_MEASURE = flags.DEFINE_string("measure", None, "Internal: time the Python SavedModel --model on this npz file.")
_MEASURE_MODULE = flags.DEFINE_string("measure_module", None, "Internal: time the Python path from this module's bytes "
                                      "to --model's best configs (with --kernels: of its fusions).")
_KERNELS = flags.DEFINE_bool("kernels", False, "Internal: --measure_module ranks tile configs of fusions.")
_MODEL = flags.DEFINE_string("model", None, "Internal: the SavedModel of --measure and --measure_module.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("native")), "Markdown table of tile models.")
_LAYOUT_OUT = flags.DEFINE_string("layout_out", str(benchmark_results.default_path("native_layout")),
                                  "Markdown table of layout models.")
_MODULE_OUT = flags.DEFINE_string("module_out", str(benchmark_results.default_path("native_module")),
                                  "Markdown table of module calls.")
_PREVIOUS_COMMIT = flags.DEFINE_string("previous_commit", "6aa916c",
                                       "Commit whose layout model is today's, measured beside this tree's (main "
                                       "when issue 51 was taken up).")
_KINDS = flags.DEFINE_list("kinds", ["tile", "layout", "module"], "What is measured (tile, layout, module), each "
                           "written to its table.")
MODULE_CANDIDATES = {"layout": 100, "tile": 50}
TOP = 5


def python_median_call(model: str, path: str, calls: int) -> float:
  """Median seconds of the plain signature on every config of the file, as a Python caller calls it."""
  import numpy as np
  import tensorflow as tf
  arrays = dict(np.load(path))
  names = ("node_feat", "node_opcode", "edge_index", "config_feat", "node_config_ids", "node_config_feat")
  inputs = {name: tf.constant(arrays[name]) for name in names if name in arrays}
  serve_fn = tf.saved_model.load(model).signatures["serving_default"]
  first = serve_fn(**inputs)["scores"].numpy()
  seconds = []
  for _ in range(calls):
    start = time.perf_counter()
    scores = serve_fn(**inputs)["scores"].numpy()
    seconds.append(time.perf_counter() - start)
    if not np.array_equal(scores, first):
      raise RuntimeError("two calls on the same file scored differently")
  return float(np.median(seconds))


def python_module_call(model: str, path: str, kernels: bool, calls: int) -> dict:
  """Median seconds of the Python path from a module's bytes to the best configs: featurizing (the
  graphs and their candidates) and the whole call (featurizing, scoring with the SavedModel, the
  best TOP and what each sets)."""
  import numpy as np
  from tpu_graphs.data import graphs
  from tpu_graphs.export import ranker
  from tpu_graphs.hlo import candidates, descriptions, hlo_input, tuning_pb2
  data = pathlib.Path(path).read_bytes()
  model_ranker = ranker.Ranker(model)
  count = MODULE_CANDIDATES["tile" if kernels else "layout"]

  def featurized():
    proto = hlo_input.parse_hlo_proto(data, path)
    return proto, candidates.candidate_graphs(proto, count, kernels, 0, path)

  def whole_call():
    proto, found = featurized()
    module = proto.module if isinstance(proto, tuning_pb2.ModuleTuningData) else proto
    best = []
    for graph in found:
      tensors = descriptions.configurable_tensors(module, graph.node_config_ids) if isinstance(
          graph, graphs.LayoutGraph) else None
      best.append([(index, descriptions.describe(graph, index, tensors))
                   for index, _ in model_ranker.rank(graph).best(TOP)])
    return best

  def median(call) -> float:
    first = call()
    seconds = []
    for _ in range(calls):
      start = time.perf_counter()
      result = call()
      seconds.append(time.perf_counter() - start)
      if call is whole_call and result != first:
        raise RuntimeError("two calls on the same module ranked differently")
    return float(np.median(seconds))
  return {"featurize_s": median(featurized), "call_s": median(whole_call), "peak_mb": peak_rss_mb()}


def peak_rss_mb() -> float:
  """This process's peak resident set (VmHWM, which starts afresh at exec, unlike the rusage of a
  forked child, which starts from its parent's)."""
  for line in pathlib.Path("/proc/self/status").read_text().splitlines():
    if line.startswith("VmHWM:"):
      return int(line.split()[1]) / 1024
  raise RuntimeError("no VmHWM in /proc/self/status")


def _run(command: list, environment=None) -> str:
  completed = subprocess.run(command, capture_output=True, text=True, check=False,
                             env={**os.environ, **(environment or {})})
  if completed.returncode:
    raise RuntimeError(f"{' '.join(map(str, command))} failed:\n{completed.stderr[-2000:]}")
  return completed.stdout


def measure(way: str, model: pathlib.Path, path: pathlib.Path, calls: int, environment=None) -> dict:
  """{"seconds": median per call, "peak_mb": peak RSS} of one way, in a fresh process; `environment`
  adds variables (the library's TPU_GRAPHS_CPU_LEVEL, TPU_GRAPHS_NUM_THREADS)."""
  if way == "python":
    stdout = _run([sys.executable, __file__, f"--measure={path}", f"--model={model}", f"--calls={calls}"])
    return json.loads(stdout.strip().splitlines()[-1])
  stdout = _run([str(RANK), f"--mode={way}", f"--model={model}", f"--input={path}", f"--repeat={calls}"],
                environment)
  return {"seconds": float(stdout.split("median call: ")[1].split()[0]),
          "peak_mb": int(stdout.split("peak RSS: ")[1].split()[0]) / 1024}


def measure_tile(temporary: pathlib.Path) -> None:
  """Measures tile models every way and writes --out."""
  import numpy as np
  from tpu_graphs.export.aot import native_library
  tile_file = temporary / "npz" / "tile" / "xla" / "test" / "kernel.npz"  # the first 100 configs of TILE_GRAPH
  tile_file.parent.mkdir(parents=True)
  arrays = dict(np.load(locations.sample_path(TILE_GRAPH)))
  np.savez(tile_file, **{name: value[:TILE_CONFIGS] if name.startswith("config") else value
                         for name, value in arrays.items()})
  tile = {}
  for experiment, size in TILE_MODELS.items():
    model = untrained.export_untrained("tile:xla", temporary / experiment, experiment=experiment,
                                         static_signatures=True)
    tile[size] = {way: measure(way, model, tile_file, _CALLS.value) for way in ("python", "capi")}
    start = time.perf_counter()
    library = native_library.compile_model_library(model, RUNTIME_DIR)
    tile[size]["library"] = {"compile_s": time.perf_counter() - start, "library_bytes": library.stat().st_size}
    for cpu in native_library.CPUS:
      tile[size][cpu] = measure("aot", model, tile_file, _CALLS.value, {"TPU_GRAPHS_CPU_LEVEL": cpu})
    tile[size]["one_thread"] = measure("aot", model, tile_file, _CALLS.value, ONE_THREAD["environment"])
  tensorflow_bytes = sum((locations.REPOSITORY / ".venv" / "tensorflow" / name).stat().st_size
                         for name in ("libtensorflow_cc.so.2", "libtensorflow_framework.so.2"))
  rows = ["| tile model | way | per call (100 configs) | vs Python | peak RSS |", "|---|---|---:|---:|---:|"]
  for size, measured in tile.items():
    for way, name in {**WAYS, "one_thread": ONE_THREAD["name"]}.items():
      rows.append(f"| {size} | {name} | {measured[way]['seconds'] * 1e6:,.0f} µs | "
                  f"{measured['python']['seconds'] / measured[way]['seconds']:,.1f}× | {measured[way]['peak_mb']:,.0f} MB |")
  rows += ["", "| size | bytes |", "|---|---:|"]
  rows += [f"| tile model library, {size}, {', '.join(native_library.CPUS)} ({len(tile_shapes.TILE_BUCKETS)} "
           f"buckets each, weights, XLA AOT runtime; compiled in {measured['library']['compile_s']:.0f} s) | "
           f"{measured['library']['library_bytes']:,} |" for size, measured in tile.items()]
  rows += [f"| `//native:rank` binary | {RANK.stat().st_size:,} |",
           f"| TensorFlow libraries the C API loads (libtensorflow_cc.so.2, libtensorflow_framework.so.2) | "
           f"{tensorflow_bytes:,} |"]
  benchmark_results.write(
      "native", f"Calling a tile model without Python: the real tile kernel {TILE_GRAPH.split('/')[-1]} (15 ops, "
      f"first {TILE_CONFIGS} configs; median of {_CALLS.value} calls), untrained models, each way in a fresh process",
      "\n".join(rows), _OUT.value)


def machine_peak_flops() -> float:
  """The machine's float32 peak FLOP/s: cores x nominal clock (/proc/cpuinfo) x FLOPs per cycle of
  two fused multiply-add units of the widest vectors the CPU has (AVX-512: 2 x 16 lanes x 2; AVX2
  and FMA: 2 x 8 x 2; else SSE's 2 x 4 without fusing)."""
  info = pathlib.Path("/proc/cpuinfo").read_text()
  flags_line = next(line for line in info.splitlines() if line.startswith("flags")).split()
  megahertz = float(next(line for line in info.splitlines() if line.startswith("cpu MHz")).split(":")[1])
  per_cycle = 64 if "avx512f" in flags_line else 32 if "fma" in flags_line else 8
  return len(os.sched_getaffinity(0)) * megahertz * 1e6 * per_cycle


def chunk_flops_per_config(bucket) -> float:
  """FLOPs per config of a layout bucket's chunk program for the default recipe's model: twice the
  multiply-adds of the per-config half's dense layers on every padded op row (the context's
  projection once per chunk of bucket.configs). The row layer is the rows program's, run once per
  distinct config row (a few per op), not per config."""
  import tensorflow as tf
  from tpu_graphs.export import saved_model
  scorer = experiments.experiment("layout", "layout:xla:default").model.model_builder(experiments.DataDerived())(
      saved_model.model_input_spec("layout"))
  config_scorer = scorer.get_layer("config_scorer")
  multiply_adds = 0.0
  for dense in config_scorer.submodules:
    if isinstance(dense, tf.keras.layers.Dense) and dense is not config_scorer._row:  # pylint: disable=protected-access
      rows = bucket.nodes / bucket.configs if dense is config_scorer._context else bucket.nodes  # pylint: disable=protected-access
      multiply_adds += rows * dense.kernel.shape[0] * dense.kernel.shape[1]
  return 2.0 * multiply_adds


def layout_graph_file(temporary: pathlib.Path, relative: str, configs) -> pathlib.Path:
  """The sample's layout file with its first `configs` configs (None: all), where //native:rank
  reads its collection from the path."""
  import numpy as np
  path = temporary / "graphs" / pathlib.PurePosixPath(relative).relative_to("npz")
  path.parent.mkdir(parents=True, exist_ok=True)
  arrays = dict(np.load(locations.sample_path(relative)))
  np.savez(path, **{name: value[:configs] if name in ("node_config_feat", "config_runtime") else value
                    for name, value in arrays.items()})
  return path


def export_previous_layout_model(temporary: pathlib.Path) -> pathlib.Path:
  """Today's layout model (--previous_commit's), untrained at its default size pruning to
  configurable ops, exported by that commit's own code."""
  tree = locations.checkout(_PREVIOUS_COMMIT.value, temporary / "previous_tree")
  locations.run_with_tree([sys.executable, "-c", f"import sys; {untrained.IMPORT_IN_ANY_TREE}; "
                           "untrained.export_untrained('layout:xla:default', sys.argv[1], prune_hops=0)",
                           str(temporary / "previous")], tree, cwd=tree)
  return temporary / "previous" / "layout"


def measure_layout(temporary: pathlib.Path) -> None:
  """Measures the layout models every way on both graphs and writes --layout_out."""
  from tpu_graphs.export.aot import native_library
  model = untrained.export_untrained("layout:xla:default", temporary / "layout", prune_hops=0,
                                     static_signatures=True)
  previous = export_previous_layout_model(temporary)
  start = time.perf_counter()
  library = native_library.compile_model_library(model, RUNTIME_DIR)
  compile_s, library_bytes = time.perf_counter() - start, library.stat().st_size
  graphs = {"unet_3d.4x4.bf16 (3,163 ops, 62 configurable; all 1,965 configs; 64-op bucket)":
            (layout_graph_file(temporary, LAYOUT_GRAPH, None), 1965, 64),
            f"nlp test graph (21,918 ops, 848 configurable; first {NLP_CONFIGS:,} configs; 1,024-op bucket)":
            (layout_graph_file(temporary, NLP_GRAPH, NLP_CONFIGS), NLP_CONFIGS, 1024)}
  peak = machine_peak_flops()
  buckets = {b.nodes: b for b in native_library.static_buckets(model)}
  ways = {f"today's model ({_PREVIOUS_COMMIT.value}): Python SavedModel (plain signature)": ("python", previous, {}),
          "this model: " + WAYS["python"]: ("python", model, {}), "this model: " + WAYS["capi"]: ("capi", model, {}),
          **{"this model: " + WAYS[cpu]: ("aot", model, {"TPU_GRAPHS_CPU_LEVEL": cpu}) for cpu in native_library.CPUS},
          "this model: " + ONE_THREAD["name"]: ("aot", model, ONE_THREAD["environment"])}
  rows = [f"| graph | way | per call | per config | vs today's Python | GFLOP/s (share of {peak / 1e9:,.0f}) "
          "| peak RSS |", "|---|---|---:|---:|---:|---:|---:|"]
  for graph_name, (path, configs, nodes) in graphs.items():
    flops = chunk_flops_per_config(buckets[nodes])
    measured = {name: measure(way, export, path, _LAYOUT_CALLS.value, environment)
                for name, (way, export, environment) in ways.items()}
    today = next(iter(measured.values()))["seconds"]
    for name, m in measured.items():
      achieved = f"{flops * configs / m['seconds'] / 1e9:,.1f} ({flops * configs / m['seconds'] / peak:.1%})" if (
          ways[name][0] == "aot") else ""
      rows.append(f"| {graph_name} | {name} | {m['seconds'] * 1e3:,.1f} ms | {m['seconds'] / configs * 1e6:,.1f} µs | "
                  f"{today / m['seconds']:,.1f}× | {achieved} | {m['peak_mb']:,.0f} MB |")
    rows.append(f"| {graph_name} | FLOPs per config of the chunk program | | {flops / 1e6:,.2f} M | | | |")
  rows += ["", "| size | bytes |", "|---|---:|",
           f"| layout model library, {', '.join(native_library.CPUS)} ({len(buckets)} buckets of a context and a "
           f"chunk program each, a rows program, weights, host-side pruning, XLA AOT runtime; compiled in "
           f"{compile_s:.0f} s) | "
           f"{library_bytes:,} |"]
  benchmark_results.write(
      "native", "Calling a layout model without Python: real layout graphs, untrained models of the default "
      f"recipe's size (this tree's: {experiments.LayoutSettings().size()}; today's: 64 units, 3 layers), pruned "
      f"to configurable ops, median of {_LAYOUT_CALLS.value} calls after a first, each way in a fresh process",
      "\n".join(rows), _LAYOUT_OUT.value)


def measure_module_way(way: str, model: pathlib.Path, path: pathlib.Path, kernels: bool) -> dict:
  """{"featurize_s", "call_s", "peak_mb"} of one way (python, aot) on one module, in a fresh process."""
  if way == "python":
    stdout = _run([sys.executable, __file__, f"--measure_module={path}", f"--model={model}",
                   f"--kernels={kernels}", f"--module_calls={_MODULE_CALLS.value}"])
    return json.loads(stdout.strip().splitlines()[-1])
  count = MODULE_CANDIDATES["tile" if kernels else "layout"]
  stdout = _run([str(RANK), "--mode=aot", f"--model={model}", f"--hlo={path}", f"--num_candidates={count}",
                 f"--top={TOP}", f"--repeat={_MODULE_CALLS.value}", *(["--kernels"] if kernels else [])])
  return {"featurize_s": float(stdout.split("median featurize: ")[1].split()[0]),
          "call_s": float(stdout.split("median call: ")[1].split()[0]),
          "peak_mb": int(stdout.split("peak RSS: ")[1].split()[0]) / 1024}


def measure_module(temporary: pathlib.Path) -> None:
  """Measures module calls both ways and writes --module_out."""
  from tpu_graphs.export.aot import native_library
  from tpu_graphs.hlo import featurize, hlo_input, xla_dumps
  dump = xla_dumps.dump_programs(["transformer_block"], temporary / "dumps")["transformer_block"]
  layout_proto = locations.sample_path("pb/official_testdata/module_tuning_data_layout.pb")
  cpu = "x86-64-v4"
  models = {"layout": untrained.export_untrained("layout:xla:default", temporary / "module_layout", prune_hops=0,
                                                 static_signatures=True),
            "tile": untrained.export_untrained("tile:xla", temporary / "module_tile", static_signatures=True)}
  for model in models.values():
    native_library.compile_model_library(model, RUNTIME_DIR, [cpu])
  inputs = [("the real unet_3d.4x4.bf16 layout tuning data (`module_tuning_data_layout.pb`, runs ignored)",
             layout_proto, "layout", False),
            ("a transformer block XLA dumped (`*.before_optimizations.hlo.pb`)", dump.before_optimizations,
             "layout", False),
            ("its fusions (`*.cpu_after_optimizations.hlo.pb`, `--kernels`)", dump.after_optimizations, "tile", True)]
  rows = ["| module | graphs (ops, configs each) | model | way | featurize | whole call (bytes to top 5) | vs Python "
          "| peak RSS |", "|---|---|---|---|---:|---:|---:|---:|"]
  for name, path, kind, kernels in inputs:
    proto = hlo_input.read_hlo_file(path)
    found = featurize.graphs_of_proto(proto, kernels)
    sizes = (f"{found[0].node_feat.shape[0]:,} ops, {len(found[0].node_config_ids)} configurable, "
             f"{MODULE_CANDIDATES[kind]} candidates" if kind == "layout" else
             f"{len(found)} fusions of {min(g.node_feat.shape[0] for g in found)}-"
             f"{max(g.node_feat.shape[0] for g in found)} ops, up to {MODULE_CANDIDATES[kind]} candidates")
    measured = {way: measure_module_way(way, models[kind], path, kernels) for way in ("python", "aot")}
    model_name = f"{kind}, default size (64 units, 3 layers)" + ("; pruned to configurable ops" if kind == "layout"
                                                                   else "")
    for way, label in (("python", "Python (featurize.py, candidates.py, SavedModel)"),
                       ("aot", f"`tpu_graphs_rank_module`, library for {cpu}")):
      m = measured[way]
      rows.append(f"| {name} | {sizes} | {model_name} | {label} | {m['featurize_s'] * 1e3:,.1f} ms | "
                  f"{m['call_s'] * 1e3:,.1f} ms | {measured['python']['call_s'] / m['call_s']:,.1f}× | "
                  f"{m['peak_mb']:,.0f} MB |")
  benchmark_results.write(
      "native", f"A module's bytes to its best configs, in Python and through a compiled model library's one C call: "
      f"featurizing (the graphs and their candidate configs) and the whole call, median of {_MODULE_CALLS.value} "
      "calls after a first, untrained models, each way in a fresh process", "\n".join(rows), _MODULE_OUT.value)


def main(argv):
  del argv
  if _MEASURE_MODULE.value:
    print(json.dumps(python_module_call(_MODEL.value, _MEASURE_MODULE.value, _KERNELS.value, _MODULE_CALLS.value)))
    return
  if _MEASURE.value:
    seconds = python_median_call(_MODEL.value, _MEASURE.value, _CALLS.value)
    print(json.dumps({"seconds": seconds, "peak_mb": peak_rss_mb()}))
    return
  from tpu_graphs.export.aot import native_library
  unknown = set(_KINDS.value) - {"tile", "layout", "module"}
  if unknown:
    raise SystemExit(f"--kinds: unknown {sorted(unknown)}; known: tile, layout, module")
  for built in (RANK, RUNTIME_DIR / native_library.FEATURIZER_ARCHIVE, RUNTIME_DIR / native_library.RUNTIME_ARCHIVE):
    if not built.exists():
      raise SystemExit(f"{built} is missing: bazel build //native:all")
  with tempfile.TemporaryDirectory() as temporary:
    if "tile" in _KINDS.value:
      measure_tile(pathlib.Path(temporary))
    if "layout" in _KINDS.value:
      measure_layout(pathlib.Path(temporary))
    if "module" in _KINDS.value:
      measure_module(pathlib.Path(temporary))


if __name__ == "__main__":
  program.run(main)
