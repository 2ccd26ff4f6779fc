"""A trained model as one native shared library with a C interface, as LLVM's MLGO release mode
embeds its policies: the static signatures (tile: static_shapes.py; layout: static_layout.py) of
the model's SavedModel compiled ahead of time by XLA, the weights frozen into the program, linked with
the XLA AOT runtime (and, for layout, the host-side pruning, native/layout_pruning.cc) and the C++
featurizer (native/hlo, for tpu_graphs_rank_module: a serialized module in, its best configs out) into

    <export>/native/libtpu_graphs_model.so   the C ABI of native/tpu_graphs_model.h; no TensorFlow
    <export>/native/tpu_graphs_model.h       runtime (ldd lists libprotobuf-lite, libstdc++, libm, libc)
    <export>/native/aot/                     what aot_compile_cpu wrote: one .h/.o per bucket
    <export>/native/buckets.json             the buckets compiled in, the CPU level, the weights compiled
                                             (saved_model.weights_fingerprint) and the runtime archives

    compile_model_library("out/tiles/export", "bazel-bin/native")   # any x86-64 CPU
    compile_model_library("out/tiles/export", "bazel-bin/native", cpu="x86-64-v3")

A run's rerun exports again (run_export.export_to_run_directory): native/ is kept where the weights
are those it was compiled from, and compiled again otherwise (compile_again_if_stale).

A training run's export (<run>/export) leaves the static signatures out, since tracing them costs
every run seconds: the library's work folder then gets the run's best model exported again with
them (saved_model.export_run, from the run's config.json and best weights), which is compiled and
removed. An export that holds them (saved_model.export(..., static_signatures=True)) is compiled as it is.

The runtime archive is the wheel's own runtime sources (tensorflow/xla_aot_runtime_src) built once
per CPU level by Bazel (`bazel build //native:all`). The CPU level (CPUS) is the oldest x86-64 the
library runs on: the model's code and the runtime's Eigen kernels use its instructions; x86-64-v3
(AVX2, FMA) scores faster than plain x86-64 (benchmarks/results/native.md). Compiling takes each
bucket's signature through `saved_model_cli aot_compile_cpu`'s own function with XLA_FLAGS (one
fresh TensorFlow process for all buckets), then g++: seconds to minutes, depending on the
model, its number of buckets and the machine's load.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Optional, Sequence, Union

from tpu_graphs.data import errors, storage
from tpu_graphs.export import saved_model, static_layout, static_shapes

NATIVE_SOURCES = pathlib.Path(__file__).resolve().parents[2] / "native"
LIBRARY_NAME = "libtpu_graphs_model.so"
# The featurizer and tpu_graphs_rank_module, built by Bazel beside the runtime archives (//native:featurizer_archive).
FEATURIZER_ARCHIVE = "libtpu_graphs_featurizer.a"
HEADER_NAME = "tpu_graphs_model.h"
NATIVE_DIR_NAME = "native"
# CPU level -> (LLVM CPU of the model's code, the runtime archive built for it in the Bazel output).
CPUS = {"x86-64": ("", "libxla_aot_runtime.a"), "x86-64-v3": ("haswell", "libxla_aot_runtime_x86_64_v3.a")}
_SIGNATURE = re.compile(r"static_tile_n(\d+)_e(\d+)_c(\d+)")
# Only the C interface leaves the library; the runtime's and the model's symbols stay inside, so
# a compiler that links its own XLA does not clash with them.
_EXPORTED_SYMBOLS = "{ global: tpu_graphs_*; local: *; };\n"
# XLA options of the compiled buckets. Fast math lets LLVM reorder float additions, so reductions
# vectorize (NaN, infinity, division and math functions stay exact to IEEE); every matrix product
# becomes XLA's own tiled LLVM IR, without Eigen's packing, which costs more than the arithmetic
# for matrices of a few dozen rows. Together faster calls (benchmarks/native.py measures them).
XLA_FLAGS = "--xla_cpu_enable_fast_math=true --xla_backend_extra_options=xla_force_enable_experimental_llvm_ir_gemm"


Bucket = Union[static_shapes.Bucket, static_layout.LayoutBucket]


def static_buckets(export_dir: Union[str, os.PathLike]) -> list[Bucket]:
  """The static signatures of a SavedModel (tile or layout), smallest first; [] where it has none."""
  from tensorflow.python.tools import saved_model_utils  # pylint: disable=g-import-not-at-top
  names = saved_model_utils.get_meta_graph_def(os.fspath(export_dir), "serve").signature_def
  buckets = [static_shapes.Bucket(*map(int, match.groups())) for match in map(_SIGNATURE.fullmatch, names) if match]
  buckets += [bucket for bucket in map(static_layout.LayoutBucket.from_signature_name, names) if bucket]
  return sorted(buckets, key=lambda bucket: (bucket.nodes, bucket.edges))


def _refuse_unprunable(model: str) -> errors.InputError:
  return errors.InputError(f"{model}: no static signatures (static_tile_n*_e*_c*, static_layout_h*_n*_e*_k*_c*): "
                           "only tile models and layout models that prune their graphs (prune_hops set) compile to "
                           "a native library; others are served through the C API (native/rank --mode=capi)")


def _is_layout(buckets: list[Bucket]) -> bool:
  return isinstance(buckets[0], static_layout.LayoutBucket)


def _class_name(bucket: Bucket) -> str:
  if isinstance(bucket, static_layout.LayoutBucket):
    return f"LayoutH{bucket.hops}N{bucket.nodes}E{bucket.edges}K{bucket.configurable}C{bucket.configs}"
  return f"TileN{bucket.nodes}E{bucket.edges}C{bucket.configs}"


def _compile_signatures_in_fresh_process(export_dir: str, aot_dir: pathlib.Path, target_cpu: str) -> None:
  """_compile_signatures of every bucket with XLA_FLAGS, in a fresh Python: XLA reads its flags
  once per process, so where this one has compiled before (a jit-compiled step, an earlier model)
  they would go unread, aot_compile_cpu's own single-threading flag included."""
  program = ("import sys; from tpu_graphs.export import native_library as n; "
             "d, a, c = sys.argv[1:]; n._compile_signatures(d, n.static_buckets(d), n.pathlib.Path(a), c)")
  environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, sys.path)),
                 "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {XLA_FLAGS}".strip()}
  result = subprocess.run([sys.executable, "-c", program, export_dir, str(aot_dir), target_cpu], env=environment,
                          capture_output=True, text=True, check=False)
  if result.returncode != 0:
    raise RuntimeError(f"compiling the static signatures of {export_dir} failed:\n{result.stderr[-4000:]}")


def _compile_signatures(export_dir: str, buckets: list[Bucket], aot_dir: pathlib.Path,
                        target_cpu: str) -> None:
  """One header and object per bucket, as `saved_model_cli aot_compile_cpu` writes them (frozen
  weights, single-threaded, for LLVM's `target_cpu`; "" is any x86-64)."""
  from tensorflow.python.tools import saved_model_aot_compile, saved_model_utils  # pylint: disable=g-import-not-at-top
  meta_graph = saved_model_utils.get_meta_graph_def(export_dir, "serve")
  for bucket in buckets:
    saved_model_aot_compile.aot_compile_cpu_meta_graph_def(
        checkpoint_path=os.path.join(export_dir, "variables", "variables"), meta_graph_def=meta_graph,
        output_prefix=str(aot_dir / _class_name(bucket)), signature_def_key=bucket.signature_name,
        cpp_class=f"tpu_graphs_native::{_class_name(bucket)}", target_triple="x86_64-pc-linux", target_cpu=target_cpu)


def _buckets_header(buckets: list[Bucket]) -> str:
  """What model_library.cc (tile) or layout_library.cc includes: X(class, sizes...) per bucket."""
  includes = "".join(f'#include "aot/{_class_name(bucket)}.h"\n' for bucket in buckets)
  entries = " ".join(f"X(tpu_graphs_native::{_class_name(b)}, {', '.join(map(str, dataclasses.astuple(b)))})"
                     for b in buckets)
  macro = "TPU_GRAPHS_FOR_EACH_LAYOUT_BUCKET" if _is_layout(buckets) else "TPU_GRAPHS_FOR_EACH_BUCKET"
  return f"// Written by tpu_graphs/export/native_library.py.\n{includes}#define {macro}(X) {entries}\n"


def _link(work: pathlib.Path, aot_dir: pathlib.Path, buckets: list[Bucket], runtime_archive: pathlib.Path,
          featurizer_archive: pathlib.Path, include_dir: pathlib.Path, cpu: str, output: pathlib.Path,
          compiler: Sequence[str] = ("g++",)) -> None:
  """Links the buckets' objects in `aot_dir` with the library's sources into `output`; `work` holds
  the scratch files. `compiler`: the command and flags of the compiler (its flags come after the
  library's own, so they win: -O1, -Wl,-z,undefs)."""
  (work / "buckets.h").write_text(_buckets_header(buckets))
  (work / "exported.map").write_text(_EXPORTED_SYMBOLS)
  objects = [str(aot_dir / f"{_class_name(bucket)}.o") for bucket in buckets]
  sources = [str(NATIVE_SOURCES / name) for name in (
      ("layout_library.cc", "layout_pruning.cc") if _is_layout(buckets) else ("model_library.cc",))]
  cpu_check = ["-DTPU_GRAPHS_REQUIRES_X86_64_V3"] if cpu == "x86-64-v3" else []  # model_library.cc: CpuCanRun
  command = [compiler[0], "-std=c++17", "-O2", "-fPIC", "-shared", "-D_GLIBCXX_USE_CXX11_ABI=1",
             '-DTPU_GRAPHS_BUCKETS_HEADER="buckets.h"', *cpu_check, f"-I{work}", f"-I{aot_dir.parent}",
             f"-I{NATIVE_SOURCES}", f"-I{include_dir}", "-o", str(output), *sources, *objects, str(featurizer_archive),
             str(runtime_archive), "-lprotobuf-lite", f"-Wl,--version-script={work / 'exported.map'}",
             "-Wl,--no-undefined", *compiler[1:]]
  result = subprocess.run(command, capture_output=True, text=True, check=False)
  if result.returncode != 0:
    missing = sorted(set(re.findall(r"undefined reference to `(__xla_cpu_runtime_\w+)", result.stderr)))
    hint = (f"\nthe model calls XLA runtime kernels the runtime archive leaves out: {', '.join(missing)}; add their "
            "source files to xla_aot_runtime in third_party/tensorflow_wheel.BUILD") if missing else ""
    raise RuntimeError(f"linking {LIBRARY_NAME} failed: {' '.join(command)}\n{result.stderr[-4000:]}{hint}")
  for scratch in ("buckets.h", "exported.map"):
    (work / scratch).unlink()


def compile_model_library(export_dir: Union[str, os.PathLike], runtime_dir: Union[str, os.PathLike],
                          cpu: str = "x86-64") -> pathlib.Path:
  """Writes <export_dir>/native/ (see the module docstring) for CPUs of level `cpu` and up, with
  the runtime archive of that level from `runtime_dir` (bazel-bin/native); returns the library's path.

  An export without static signatures must be a training run's (<run>/export): the run's model is
  exported again with them. Raises errors.InputError for a model that cannot have them (a layout
  model that does not prune, prune_hops None: its graphs are too large to pad) and
  run_directory.RunDirectoryError for an export without them outside a run directory."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if cpu not in CPUS:
    raise errors.InputError(f"unknown CPU level {cpu!r}; known: {', '.join(CPUS)}")
  target_cpu, archive_name = CPUS[cpu]
  export_dir, runtime_archive = os.fspath(export_dir), pathlib.Path(runtime_dir) / archive_name
  for archive in (runtime_archive, runtime_archive.parent / FEATURIZER_ARCHIVE):
    if not archive.is_file():
      raise errors.InputError(f"{archive}: not built; build it with `bazel build //native:all`")
  include_dir = pathlib.Path(tf.__file__).parent / "include"

  def write(path: str) -> None:
    work = pathlib.Path(path)
    (work / "aot").mkdir(parents=True)
    compiled = export_dir
    if not static_buckets(export_dir):  # a training run's export: its model again, with static signatures
      compiled = str(work / "static_export")
      saved_model.export_run(storage.parent(export_dir), compiled, static_signatures=True)
    buckets = static_buckets(compiled)
    if not buckets:
      raise _refuse_unprunable(export_dir)
    _compile_signatures_in_fresh_process(compiled, work / "aot", target_cpu)
    _link(work, work / "aot", buckets, runtime_archive, runtime_archive.parent / FEATURIZER_ARCHIVE, include_dir, cpu,
          work / LIBRARY_NAME)
    if compiled != export_dir:
      shutil.rmtree(compiled)
    shutil.copy(NATIVE_SOURCES / HEADER_NAME, work / HEADER_NAME)
    (work / "buckets.json").write_text(json.dumps({
        "library": LIBRARY_NAME, "header": HEADER_NAME, "tensorflow": tf.__version__, "cpu": cpu,
        "weights": saved_model.weights_fingerprint(export_dir), "runtime_dir": str(pathlib.Path(runtime_dir).resolve()),
        "kind": "layout" if _is_layout(buckets) else "tile",
        "buckets": [{"signature": b.signature_name, **dataclasses.asdict(b)} for b in buckets]}, indent=1) + "\n")

  native_dir = storage.join(export_dir, NATIVE_DIR_NAME)
  storage.atomic_directory(native_dir, write)
  return pathlib.Path(native_dir) / LIBRARY_NAME


def compile_again_if_stale(export_dir: Union[str, os.PathLike]) -> Optional[pathlib.Path]:
  """Where <export_dir>/native/ was compiled from other weights than export_dir holds now (a run
  exported again after training on; or a library that recorded none), compiles it again, for the
  CPU level and with the runtime archives it was compiled with; returns the new library's path,
  or None where there is no native/ or it is current. Raises as compile_model_library does (e.g.
  InputError where the runtime archives are gone: `bazel build //native:all`)."""
  listed = pathlib.Path(export_dir) / NATIVE_DIR_NAME / "buckets.json"
  if not listed.is_file():
    return None
  compiled = json.loads(listed.read_text())
  if compiled.get("weights") == saved_model.weights_fingerprint(export_dir):
    return None
  runtime_dir = compiled.get("runtime_dir", NATIVE_SOURCES.parent / "bazel-bin" / "native")
  return compile_model_library(export_dir, runtime_dir, compiled.get("cpu", "x86-64"))


def relink(native_dir: Union[str, os.PathLike], runtime_dir: Union[str, os.PathLike], output: Union[str, os.PathLike],
           compiler: Sequence[str], featurizer_archive: Union[str, os.PathLike, None] = None) -> pathlib.Path:
  """Links the model compiled in `native_dir` (what compile_model_library wrote: its aot/ objects
  and buckets.json) again into `output`, the same sources compiled by `compiler` (a command and
  its flags, e.g. ("g++", "-fsanitize=thread")) and linked with `featurizer_archive` (default the
  one in `runtime_dir`): the library instrumented by a sanitizer, for the fuzz targets
  (benchmarks/fuzz.py) and tests/test_native.py's ThreadSanitizer test. Returns `output`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  native_dir, output = pathlib.Path(native_dir), pathlib.Path(output)
  compiled = json.loads((native_dir / "buckets.json").read_text())
  bucket_class = static_layout.LayoutBucket if compiled["kind"] == "layout" else static_shapes.Bucket
  names = {field.name for field in dataclasses.fields(bucket_class)}
  buckets = [bucket_class(**{name: value for name, value in b.items() if name in names}) for b in compiled["buckets"]]
  runtime_archive = pathlib.Path(runtime_dir) / CPUS[compiled["cpu"]][1]
  output.parent.mkdir(parents=True, exist_ok=True)
  with tempfile.TemporaryDirectory() as work:
    _link(pathlib.Path(work), native_dir / "aot", buckets, runtime_archive,
          pathlib.Path(featurizer_archive or runtime_archive.parent / FEATURIZER_ARCHIVE),
          pathlib.Path(tf.__file__).parent / "include", compiled["cpu"], output, compiler)
  return output
