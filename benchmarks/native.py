"""What calling the model costs from Python, through TensorFlow's C API and as an AOT-compiled library.

  bazel build //native:rank //native:xla_aot_runtime
  python benchmarks/native.py [--out benchmarks/results/native.md]

* tile: the first 100 configs of the real sample's median-size kernel with at least 100 configs
  (15 ops; the sample's tile kernels have 18 ops at the median), one call scoring all 100;
* layout: every config (1,965) of the real unet_3d.4x4.bf16 graph (3,163 ops), one call (the
  Ranker's default of 2,048 configs per call), pruning inside the SavedModel; no AOT row: pruning
  keeps a data-dependent number of ops, which XLA cannot compile ahead of time.

Per call: the median over --calls (tile) or --layout_calls calls after a first, warm-up call. Each
way runs in a fresh process (the Python SavedModel: this script with --measure; the others:
bazel-bin/native/rank --repeat), whose peak RSS (wait4) is its own. Models are untrained, of the
baselines' default size (64 units, 3 layers; benchmarks/serve.export_untrained): cost does not
depend on the weights.
"""

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from absl import flags

from tpu_graphs import programs  # first: it quiets TensorFlow, which must happen before TensorFlow loads

import serve
from tpu_graphs import benchmark_results
from tpu_graphs.data import locations

TILE_GRAPH = "npz/tile/xla/test/0a8a2b247d7a20b9dcab1daf50066a4d.npz"  # 15 ops, 807 configs
LAYOUT_GRAPH = "npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz"
TILE_CONFIGS = 100
RANK = locations.REPOSITORY / "bazel-bin" / "native" / "rank"
RUNTIME = locations.REPOSITORY / "bazel-bin" / "native" / "libxla_aot_runtime.a"

_CALLS = flags.DEFINE_integer("calls", 300, "Tile calls timed per way.")
_LAYOUT_CALLS = flags.DEFINE_integer("layout_calls", 5, "Layout calls timed per way.")
_MEASURE = flags.DEFINE_string("measure", None, "Internal: time the Python SavedModel --model on this npz file.")
_MODEL = flags.DEFINE_string("model", None, "Internal: the SavedModel of --measure.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("native")), "Markdown table to write.")


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


def _run(command: list) -> tuple[str, float]:
  """(stdout, peak RSS in MB) of a fresh process, whose own rusage wait4 returns."""
  with tempfile.TemporaryFile("w+") as errors:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
    stdout = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.stdout.close()
    if os.waitstatus_to_exitcode(status):
      errors.seek(0)
      raise RuntimeError(f"{' '.join(map(str, command))} failed:\n{errors.read()[-2000:]}")
  return stdout, usage.ru_maxrss / 1024


def measure(way: str, model: pathlib.Path, path: pathlib.Path, calls: int) -> dict:
  if way == "python":
    stdout, peak = _run([sys.executable, __file__, f"--measure={path}", f"--model={model}", f"--calls={calls}"])
    return {"seconds": json.loads(stdout.strip().splitlines()[-1]), "peak_mb": peak}
  stdout, peak = _run([str(RANK), f"--mode={way}", f"--model={model}", f"--input={path}", f"--repeat={calls}"])
  return {"seconds": float(stdout.split("median call: ")[1].split()[0]), "peak_mb": peak}


def main(argv):
  del argv
  if _MEASURE.value:
    print(json.dumps(python_median_call(_MODEL.value, _MEASURE.value, _CALLS.value)))
    return
  import numpy as np
  from tpu_graphs.export import native_library
  for built in (RANK, RUNTIME):
    if not built.exists():
      raise SystemExit(f"{built} is missing: bazel build //native:rank //native:xla_aot_runtime")
  with tempfile.TemporaryDirectory() as temporary:
    temporary = pathlib.Path(temporary)
    tile_file = temporary / "tile" / "xla" / "test" / "kernel.npz"  # the first 100 configs of TILE_GRAPH
    tile_file.parent.mkdir(parents=True)
    arrays = dict(np.load(locations.sample_path(TILE_GRAPH)))
    np.savez(tile_file, **{name: value[:TILE_CONFIGS] if name.startswith("config") else value
                           for name, value in arrays.items()})
    layout_file = locations.sample_path(LAYOUT_GRAPH)
    tile_model = serve.export_untrained("tile:xla", temporary, prune_hops=0)
    layout_model = serve.export_untrained("layout:xla:default", temporary, prune_hops=0)
    start = time.perf_counter()
    library = native_library.compile_model_library(tile_model, RUNTIME)
    compile_seconds = time.perf_counter() - start
    tile = {way: measure(way, tile_model, tile_file, _CALLS.value) for way in ("python", "capi", "aot")}
    layout = {way: measure(way, layout_model, layout_file, _LAYOUT_CALLS.value) for way in ("python", "capi")}
    sizes = {"library": library.stat().st_size, "rank": RANK.stat().st_size,
             "tensorflow": sum((locations.REPOSITORY / ".venv" / "tensorflow" / name).stat().st_size
                               for name in ("libtensorflow_cc.so.2", "libtensorflow_framework.so.2"))}
  names = {"python": "Python SavedModel (`tf.saved_model.load`, plain signature)",
           "capi": "C API (`rank --mode=capi`: TF_SessionRun)", "aot": "AOT library (`rank --mode=aot`)"}
  base = tile["python"]["seconds"]
  rows = ["| way | tile: per call (100 configs) | tile: vs Python | tile: peak RSS | layout: per call (1,965 configs) "
          "| layout: peak RSS |", "|---|---:|---:|---:|---:|---:|"]
  for way, name in names.items():
    layout_cells = (f"{layout[way]['seconds']:.3f} s | {layout[way]['peak_mb']:,.0f} MB" if way in layout
                    else "not compiled (pruning is data-dependent) | -")
    rows.append(f"| {name} | {tile[way]['seconds'] * 1e6:,.0f} µs | {base / tile[way]['seconds']:,.1f}× | "
                f"{tile[way]['peak_mb']:,.0f} MB | {layout_cells} |")
  rows += ["", "| size | bytes |", "|---|---:|",
           f"| model library (`export/native/libtpu_graphs_model.so`: 3 buckets, weights, XLA AOT runtime) | "
           f"{sizes['library']:,} |",
           f"| `//native:rank` binary | {sizes['rank']:,} |",
           f"| TensorFlow libraries the C API mode loads (libtensorflow_cc.so.2 + libtensorflow_framework.so.2) | "
           f"{sizes['tensorflow']:,} |",
           "", f"Compiling the model library (`compile_model_library`: 3 buckets through aot_compile_cpu, then g++): "
           f"{compile_seconds:.0f} s."]
  benchmark_results.write(
      "native", f"Calling the model without Python: the real tile kernel {TILE_GRAPH.split('/')[-1]} (15 ops, first "
      f"{TILE_CONFIGS} configs, median of {_CALLS.value} calls) and the real unet_3d.4x4.bf16 layout graph (median of "
      f"{_LAYOUT_CALLS.value} calls), untrained models of the default size, each way in a fresh process",
      "\n".join(rows), _OUT.value)


if __name__ == "__main__":
  programs.run(main)
