"""A trained model as one native shared library with a C interface, as LLVM's MLGO release mode
embeds its policies: the static signatures (tile: tile_shapes.py; layout: layout_shapes.py) of
the model's SavedModel compiled ahead of time by XLA, the weights frozen into the program, linked with
the XLA AOT runtime (and, for layout, the host-side pruning, native/library/layout_pruning.cc) and the C++
featurizer (native/hlo, for tpu_graphs_rank_module: a serialized module in, its best configs out) into

    <export>/native/libtpu_graphs_model.so   the C ABI of native/library/tpu_graphs_model.h; no TensorFlow
    <export>/native/tpu_graphs_model.h       runtime (ldd lists libprotobuf-lite, libstdc++, libm, libc)
    <export>/native/aot/<level>/             what aot_compile_cpu wrote: one .h/.o per program
    <export>/native/buckets.json             the buckets and CPU levels compiled in, the weights compiled
                                             (saved_model.weights_fingerprint) and the runtime archives

    compile_model_library("out/tiles/export", "bazel-bin/native")   # every CPU level (CPUS)
    compile_model_library("out/tiles/export", "bazel-bin/native", cpus=["x86-64"])   # faster to compile

A run's rerun exports again (run_export.export_to_run_directory): native/ is kept where the weights
are those it was compiled from, and compiled again otherwise (compile_again_if_stale).

A training run's export (<run>/export) leaves the static signatures out, since tracing them costs
every run seconds: the library's work folder then gets the run's best model exported again with
them (saved_model.export_run, from the run's config.json and best weights), which is compiled and
removed. An export that holds them (saved_model.export(..., signatures.static_functions)) is compiled as it is.

The runtime archive is the wheel's own runtime sources (tensorflow/xla_aot_runtime_src) built by
Bazel (`bazel build //native:all`). The model's programs are compiled once per CPU level (CPUS),
and each call runs the newest level the CPU has (native/library/library_checks.h; TPU_GRAPHS_CPU_LEVEL
picks another): x86-64-v4 (AVX-512) scores several times as fast as plain x86-64
(benchmarks/results/native.md). Compiling takes each program's signature through
`saved_model_cli aot_compile_cpu`'s own steps with XLA_FLAGS (one fresh TensorFlow process per
level), then g++: seconds to minutes, depending on the model, its number of buckets and the
machine's load.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Callable, Optional, Sequence, Union

from tpu_graphs.data import errors, storage
from tpu_graphs.export import saved_model
from tpu_graphs.export.aot import layout_shapes, signatures, tile_shapes
from tpu_graphs.train import calibration

NATIVE_SOURCES = pathlib.Path(__file__).resolve().parents[3] / "native"
LIBRARY_NAME = "libtpu_graphs_model.so"
# The featurizer and tpu_graphs_rank_module, built by Bazel beside the runtime archive (//native:featurizer_archive).
FEATURIZER_ARCHIVE = "libtpu_graphs_featurizer.a"
RUNTIME_ARCHIVE = "libxla_aot_runtime.a"
HEADER_NAME = "tpu_graphs_model.h"
NATIVE_DIR_NAME = "native"
# CPU level -> (LLVM CPU, LLVM target features) of its copy of the model's code, oldest first. The
# library runs on any x86-64 and takes the newest level the CPU has (layout_library.cc,
# tile_library.cc). LLVM tunes x86-64-v4 code for 256-bit vectors (Intel's preference, whose
# cores lower their clock for 512-bit ones); without that preference the AVX-512 level vectorizes
# 512 bits wide, which made the default layout model's calls faster on the AVX-512 machine this
# project measures on (AMD Zen 5; benchmarks/native.py times each level).
CPUS = {"x86-64": ("", ""), "x86-64-v3": ("haswell", ""), "x86-64-v4": ("x86-64-v4", "-prefer-256-bit")}
# Only the C interface leaves the library; the runtime's and the model's symbols stay inside, so
# a compiler that links its own XLA does not clash with them.
_EXPORTED_SYMBOLS = "{ global: tpu_graphs_*; local: *; };\n"
# XLA options of the compiled buckets. Fast math lets LLVM reorder float additions, so reductions
# vectorize (NaN, infinity, division and math functions stay exact to IEEE); every matrix product
# becomes XLA's own tiled LLVM IR, without Eigen's packing, which costs more than the arithmetic
# for matrices of a few dozen rows. Together faster calls (benchmarks/native.py measures them).
XLA_FLAGS = ("--xla_cpu_enable_fast_math=true --xla_backend_extra_options=xla_force_enable_experimental_llvm_ir_gemm "
             "--xla_cpu_multi_thread_eigen=false")


# A bucket of either kind: each type says its programs' signatures and C++ classes, and what the
# library's buckets.h lists of it (header_macro, header_sizes, header_defines).
Bucket = Union[tile_shapes.TileBucket, layout_shapes.LayoutBucket]
BUCKET_TYPES = (tile_shapes.TileBucket, layout_shapes.LayoutBucket)


def _buckets_named(names) -> list[Bucket]:
  """The buckets whose signatures are among `names` (tile or layout), smallest first."""
  buckets = [bucket for bucket_type in BUCKET_TYPES for bucket in map(bucket_type.from_signature_name, names) if bucket]
  return sorted(buckets, key=lambda bucket: (bucket.nodes, bucket.edges))


def static_buckets(export_dir: Union[str, os.PathLike]) -> list[Bucket]:
  """The static signatures of a SavedModel (tile or layout), smallest first; [] where it has none."""
  from tensorflow.python.tools import saved_model_utils  # pylint: disable=g-import-not-at-top
  return _buckets_named(saved_model_utils.get_meta_graph_def(os.fspath(export_dir), "serve").signature_def)


def _refuse_unprunable(model: str) -> errors.InputError:
  return errors.InputError(f"{model}: no static signatures (static_tile[_kernel]_n*_e*_c*, static_layout_h*_n*_e*_k*_c*): "
                           "only tile models and layout models in two halves that prune their graphs (prune_hops "
                           "set, no segments) compile to a native library; others are served through the C API "
                           "(native/rank --mode=capi)")


def _is_layout(buckets: list[Bucket]) -> bool:
  return buckets[0].kind == "layout"


def _programs(buckets: list[Bucket]) -> list[tuple[str, str]]:
  """(signature, C++ class) of every compiled program of the buckets, each once."""
  return list(dict.fromkeys(program for bucket in buckets for program in bucket.programs()))


def _namespace(cpu: str) -> str:
  """The C++ namespace of a CPU level's classes, under tpu_graphs_native (x86_64_v3)."""
  return cpu.replace("-", "_")


def _compile_levels_in_fresh_processes(export_dir: str, aot_dir: pathlib.Path, cpus: list[str],
                                       compiled: Callable[[str], None]) -> None:
  """_compile_signatures of every bucket for each CPU level, with XLA_FLAGS, each level in a fresh
  Python (as many at once as there are cores): XLA reads its flags once per process, so where
  this one has compiled before (a jit-compiled step, an earlier model) they would go unread,
  aot_compile_cpu's own single-threading flag included. Calls `compiled(cpu)` as each level ends."""
  program = ("import sys; from tpu_graphs.export.aot import native_library as n; "
             "d, a, c = sys.argv[1:]; n._compile_signatures(d, n.static_buckets(d), n.pathlib.Path(a), c)")
  environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, sys.path)),
                 "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {XLA_FLAGS}".strip()}
  pending, running = list(cpus), []
  while pending or running:
    while pending and len(running) < max(1, os.cpu_count() or 1):
      cpu = pending.pop(0)
      running.append((cpu, subprocess.Popen([sys.executable, "-c", program, export_dir, str(aot_dir), cpu],
                                            env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                            text=True)))
    cpu, process = running.pop(0)
    _, stderr = process.communicate()
    if process.returncode != 0:
      for _, other in running:
        other.kill()
      raise RuntimeError(f"compiling the static signatures of {export_dir} for {cpu} failed:\n{stderr[-4000:]}")
    compiled(cpu)


def _node_name(tensor: str) -> str:
  return tensor.lstrip("^").split(":")[0]


def _function_references(attributes) -> list[str]:
  """The functions a node's attributes name (a call's `f`, a loop's `body`, ...)."""
  names = []
  for value in attributes.values():
    if value.HasField("func"):
      names.append(value.func.name)
    names += [function.name for function in value.list.func]
  return names


def _one_signature(meta_graph, signature: str):
  """A copy of a SavedModel's MetaGraphDef with one signature and what it needs: the calls of the
  other signatures, whatever depends on them, and the functions nobody calls any more are gone.

  aot_compile_cpu optimizes the whole graph with grappler before it freezes the signature's part,
  which for a layout model's 16 signatures costs about 30 s per signature (and grows with their
  number); on one signature's graph it takes a second or two."""
  pruned = copy.deepcopy(meta_graph)
  for other in [name for name in pruned.signature_def if name != signature]:
    del pruned.signature_def[other]
  nodes = {node.name: node for node in meta_graph.graph_def.node}
  wanted = [_node_name(tensor.name) for tensor in pruned.signature_def[signature].outputs.values()]
  saver = pruned.saver_def
  wanted += [_node_name(name) for name in (saver.restore_op_name, saver.save_tensor_name) if name]
  wanted += [_node_name(name) for collection in pruned.collection_def.values() for name in collection.node_list.value]
  needed = set()
  while wanted:
    name = wanted.pop()
    if name in nodes and name not in needed:
      needed.add(name)
      wanted += [_node_name(input_name) for input_name in nodes[name].input]
  # Calls nobody needs go, with every node downstream of one; variables and their reads stay.
  dropped = {name for name, node in nodes.items()
             if name not in needed and node.op in ("StatefulPartitionedCall", "PartitionedCall")}
  grew = True
  while grew:  # a GraphDef lists nodes in no particular order
    downstream = {node.name for node in meta_graph.graph_def.node if node.name not in dropped and any(
        _node_name(input_name) in dropped for input_name in node.input)}
    dropped |= downstream
    grew = bool(downstream)
  functions = {function.signature.name: function for function in meta_graph.graph_def.library.function}
  called = [name for node in meta_graph.graph_def.node if node.name not in dropped
            for name in _function_references(node.attr)]
  kept_functions = set()
  while called:
    name = called.pop()
    if name in functions and name not in kept_functions:
      kept_functions.add(name)
      for node in functions[name].node_def:
        called += _function_references(node.attr) + [node.op]
  del pruned.graph_def.node[:]
  pruned.graph_def.node.extend(node for node in meta_graph.graph_def.node if node.name not in dropped)
  del pruned.graph_def.library.function[:]
  pruned.graph_def.library.function.extend(function for function in meta_graph.graph_def.library.function
                                           if function.signature.name in kept_functions)
  return pruned


def _compile_signatures(export_dir: str, buckets: list[Bucket], aot_dir: pathlib.Path, cpu: str) -> None:
  """One header and object per program in aot_dir/<namespace>/, as `saved_model_cli aot_compile_cpu`
  writes them (frozen weights, single-threaded: XLA_FLAGS), for the LLVM CPU and features of level
  `cpu` (its function leaves the features out, so its two steps are taken here)."""
  from tensorflow.python import _pywrap_tfcompile  # pylint: disable=g-import-not-at-top
  from tensorflow.python.tools import saved_model_aot_compile, saved_model_utils  # pylint: disable=g-import-not-at-top
  meta_graph = saved_model_utils.get_meta_graph_def(export_dir, "serve")
  level_dir = aot_dir / _namespace(cpu)
  level_dir.mkdir(parents=True, exist_ok=True)
  target_cpu, target_features = CPUS[cpu]
  for signature, class_name in _programs(buckets):
    prefix = level_dir / class_name
    with tempfile.TemporaryDirectory() as frozen_dir:
      graph, config = saved_model_aot_compile.freeze_model(
          checkpoint_path=os.path.join(export_dir, "variables", "variables"),
          meta_graph_def=_one_signature(meta_graph, signature), output_prefix=frozen_dir,
          signature_def_key=signature, variables_to_feed=())
      _pywrap_tfcompile.Compile(
          graph=graph, config=config, target_triple="x86_64-pc-linux", target_cpu=target_cpu,
          target_features=target_features, entry_point=re.sub("[^0-9a-zA-Z]+", "_", f"__xla_{prefix}"),
          cpp_class=f"tpu_graphs_native::{_namespace(cpu)}::{class_name}", out_function_object=f"{prefix}.o",
          out_metadata_object=f"{prefix}_metadata.o", out_header=f"{prefix}.h", gen_name_to_index=True,
          gen_program_shape=False)


def _buckets_header(buckets: list[Bucket], cpus: list[str]) -> str:
  """What tile_library.cc or layout_library.cc includes: every level's class headers;
  TPU_GRAPHS_FOR_EACH_CPU_LEVEL(X) as X(namespace, level name) per level, oldest first; and
  TPU_GRAPHS_FOR_EACH_BUCKET(X, LEVEL) (tile: X(LEVEL::class, nodes, edges, configs)),
  TPU_GRAPHS_FOR_EACH_SPLIT_BUCKET(X, LEVEL) (X(LEVEL::kernel class, LEVEL::configs class,
  LEVEL::join class, nodes, edges, configs)) or TPU_GRAPHS_FOR_EACH_LAYOUT_BUCKET(X, LEVEL)
  (X(LEVEL::context class, LEVEL::rows class, LEVEL::chunk class, sizes...))."""
  includes = "".join(f'#include "aot/{_namespace(cpu)}/{class_name}.h"\n'
                     for cpu in cpus for _, class_name in _programs(buckets))
  levels = " ".join(f'X(tpu_graphs_native::{_namespace(cpu)}, "{cpu}")' for cpu in cpus)
  entries = " ".join(f"X({', '.join(f'LEVEL::{name}' for _, name in b.programs())}, "
                     f"{', '.join(map(str, b.header_sizes))})" for b in buckets)
  return (f"// Written by tpu_graphs/export/aot/native_library.py.\n{includes}{buckets[0].header_defines}"
          f"#define TPU_GRAPHS_FOR_EACH_CPU_LEVEL(X) {levels}\n#define {buckets[0].header_macro}(X, LEVEL) {entries}\n")


def gain_calibration_define(gain: Optional[calibration.Calibration]) -> str:
  """buckets.h's TPU_GRAPHS_GAIN_CALIBRATION: the model's calibration as the initializer of a
  GainCalibration (native/library/gain_calibration.h), its doubles exact (repr round-trips);
  fitted 0 for a model without one."""
  if gain is None:
    return "#define TPU_GRAPHS_GAIN_CALIBRATION {0, {}, {}, {}, {}}\n"
  if len(gain.half_widths) != calibration.NUM_BINS:
    raise ValueError(f"a calibration of {len(gain.half_widths)} bins; the library holds {calibration.NUM_BINS}")
  numbers = lambda values: ", ".join(map(repr, values))
  lists = ", ".join(f"{{{numbers(values)}}}" for values in (gain.knots, gain.knot_values, gain.bin_edges,
                                                            gain.half_widths))
  return f"#define TPU_GRAPHS_GAIN_CALIBRATION {{1, {lists}}}\n"


def library_sources(kind: str) -> list[pathlib.Path]:
  """The sources compiled into a `kind` ("tile" or "layout") model library: MODEL_LIBRARY_SOURCES
  of native/library/sources.bzl, the list Bazel's model_library_sources holds too."""
  listing = NATIVE_SOURCES / "library" / "sources.bzl"
  [sources] = [ast.literal_eval(statement.value) for statement in ast.parse(listing.read_text()).body
               if isinstance(statement, ast.Assign) and statement.targets[0].id == "MODEL_LIBRARY_SOURCES"]
  return [listing.parent / name for name in sources[kind]]


def link_command(work: pathlib.Path, aot_dir: pathlib.Path, buckets: list[Bucket], cpus: list[str],
                 runtime_archive: pathlib.Path, featurizer_archive: pathlib.Path, include_dir: pathlib.Path,
                 output: pathlib.Path, compiler: Sequence[str] = ("g++",)) -> list[str]:
  """The command that links the programs of every CPU level in `aot_dir` (aot/<level>/) with the
  library's sources into `output`, reading its scratch files (buckets.h, exported.map) from
  `work`. `compiler`: the command and flags of the compiler (its flags come after the library's
  own, so they win: -O1, -Wl,-z,undefs). Every system tool and library it names is one that
  scripts/system_packages.txt installs (tests/project/test_system_packages.py)."""
  objects = [str(aot_dir / _namespace(cpu) / f"{class_name}.o") for cpu in cpus for _, class_name in _programs(buckets)]
  sources = [str(source) for source in library_sources("layout" if _is_layout(buckets) else "tile")]
  return [compiler[0], "-std=c++17", "-O2", "-fPIC", "-shared", "-pthread", "-D_GLIBCXX_USE_CXX11_ABI=1",
          '-DTPU_GRAPHS_BUCKETS_HEADER="buckets.h"', f"-I{work}", f"-I{aot_dir.parent}", f"-I{NATIVE_SOURCES.parent}",
          f"-I{include_dir}", "-o", str(output), *sources, *objects, str(featurizer_archive),
          str(runtime_archive), "-lprotobuf-lite", f"-Wl,--version-script={work / 'exported.map'}",
          "-Wl,--no-undefined", *compiler[1:]]


def _link(work: pathlib.Path, aot_dir: pathlib.Path, buckets: list[Bucket], cpus: list[str],
          runtime_archive: pathlib.Path, featurizer_archive: pathlib.Path, include_dir: pathlib.Path,
          output: pathlib.Path, compiler: Sequence[str] = ("g++",),
          gain: Optional[calibration.Calibration] = None) -> None:
  """Runs link_command (same arguments) with its scratch files written to `work`; `gain`: the
  model's calibration, compiled in as constants."""
  (work / "buckets.h").write_text(_buckets_header(buckets, cpus) + gain_calibration_define(gain))
  (work / "exported.map").write_text(_EXPORTED_SYMBOLS)
  command = link_command(work, aot_dir, buckets, cpus, runtime_archive, featurizer_archive, include_dir, output,
                         compiler)
  result = subprocess.run(command, capture_output=True, text=True, check=False)
  if result.returncode != 0:
    missing = sorted(set(re.findall(r"undefined reference to `(__xla_cpu_runtime_\w+)", result.stderr)))
    hint = (f"\nthe model calls XLA runtime kernels the runtime archive leaves out: {', '.join(missing)}; add their "
            "source files to xla_aot_runtime in third_party/tensorflow_wheel.BUILD") if missing else ""
    raise RuntimeError(f"linking {LIBRARY_NAME} failed: {' '.join(command)}\n{result.stderr[-4000:]}{hint}")
  for scratch in ("buckets.h", "exported.map"):
    (work / scratch).unlink()


def compile_model_library(export_dir: Union[str, os.PathLike], runtime_dir: Union[str, os.PathLike],
                          cpus: Sequence[str] = tuple(CPUS),
                          progress: Callable[[int, int, str], None] = lambda done, total, what: None) -> pathlib.Path:
  """Writes <export_dir>/native/ (see the module docstring) with the model compiled for each CPU
  level of `cpus` (default all; fewer compile faster, e.g. one in tests), linked with the runtime
  archive from `runtime_dir` (bazel-bin/native); returns the library's path. The library runs on
  CPUs of the oldest level compiled and up. `progress(done, total, what)` hears of each step (the
  export again, each level's compilation, the link), which take minutes in all for a layout model.

  An export without static signatures must be a training run's (<run>/export): the run's model is
  exported again with them. Raises errors.InputError for a model that cannot have them (a layout
  model that does not prune, prune_hops None: its graphs are too large to pad) and
  run_directory.RunDirectoryError for an export without them outside a run directory."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  unknown = [cpu for cpu in cpus if cpu not in CPUS]
  if unknown or not cpus:
    raise errors.InputError(f"unknown CPU levels {unknown or list(cpus)!r}; known: {', '.join(CPUS)}")
  cpus = [cpu for cpu in CPUS if cpu in cpus]  # oldest first
  export_dir, runtime_archive = os.fspath(export_dir), pathlib.Path(runtime_dir) / RUNTIME_ARCHIVE
  for archive in (runtime_archive, runtime_archive.parent / FEATURIZER_ARCHIVE):
    if not archive.is_file():
      raise errors.InputError(f"{archive}: not built; build it with `bazel build //native:all`")
  include_dir = pathlib.Path(tf.__file__).parent / "include"

  def write(path: str) -> None:
    work = pathlib.Path(path)
    (work / "aot").mkdir(parents=True)
    compiled = export_dir
    steps = len(cpus) + 2  # the export again (where needed), each level, the link
    if not static_buckets(export_dir):  # a training run's export: its model again, with static signatures
      progress(0, steps, "export with static signatures")
      compiled = str(work / "static_export")
      saved_model.export_run(storage.parent(export_dir), compiled, signatures.static_functions)
    buckets = static_buckets(compiled)
    if not buckets:
      raise _refuse_unprunable(export_dir)
    levels_done = []
    progress(1, steps, f"tfcompile {len(buckets)} bucket(s), {len(cpus)} CPU level(s)")

    def level_compiled(cpu: str) -> None:
      levels_done.append(cpu)
      progress(1 + len(levels_done), steps, "link" if len(levels_done) == len(cpus) else f"compiled for {cpu}")

    _compile_levels_in_fresh_processes(compiled, work / "aot", cpus, level_compiled)
    gain = calibration.read(export_dir)
    _link(work, work / "aot", buckets, cpus, runtime_archive, runtime_archive.parent / FEATURIZER_ARCHIVE,
          include_dir, work / LIBRARY_NAME, gain=gain)
    progress(steps, steps, "linked")
    if compiled != export_dir:
      shutil.rmtree(compiled)
    shutil.copy(NATIVE_SOURCES / "library" / HEADER_NAME, work / HEADER_NAME)
    (work / "buckets.json").write_text(json.dumps({
        "library": LIBRARY_NAME, "header": HEADER_NAME, "tensorflow": tf.__version__, "cpus": cpus,
        "weights": saved_model.weights_fingerprint(export_dir), "runtime_dir": str(pathlib.Path(runtime_dir).resolve()),
        "kind": buckets[0].kind, "calibration": calibration.as_json(gain)["calibration"],
        "buckets": [{"signature": b.signature_name, **dataclasses.asdict(b)} for b in buckets]}, indent=1) + "\n")

  native_dir = storage.join(export_dir, NATIVE_DIR_NAME)
  storage.atomic_directory(native_dir, write)
  return pathlib.Path(native_dir) / LIBRARY_NAME


def compile_again_if_stale(export_dir: Union[str, os.PathLike]) -> Optional[pathlib.Path]:
  """Where <export_dir>/native/ was compiled from other weights than export_dir holds now (a run
  exported again after training on; or a library that recorded none), compiles it again, for the
  CPU levels and with the runtime archives it was compiled with; returns the new library's path,
  or None where there is no native/ or it is current. Raises as compile_model_library does (e.g.
  InputError where the runtime archives are gone: `bazel build //native:all`)."""
  listed = pathlib.Path(export_dir) / NATIVE_DIR_NAME / "buckets.json"
  if not listed.is_file():
    return None
  compiled = json.loads(listed.read_text())
  if compiled.get("weights") == saved_model.weights_fingerprint(export_dir):
    return None
  runtime_dir = compiled.get("runtime_dir", NATIVE_SOURCES.parent / "bazel-bin" / "native")
  return compile_model_library(export_dir, runtime_dir, compiled.get("cpus", tuple(CPUS)))


def relink(native_dir: Union[str, os.PathLike], runtime_dir: Union[str, os.PathLike], output: Union[str, os.PathLike],
           compiler: Sequence[str], featurizer_archive: Union[str, os.PathLike, None] = None) -> pathlib.Path:
  """Links the model compiled in `native_dir` (what compile_model_library wrote: its aot/ objects
  and buckets.json) again into `output`, the same sources compiled by `compiler` (a command and
  its flags, e.g. ("g++", "-fsanitize=thread")) and linked with `featurizer_archive` (default the
  one in `runtime_dir`): the library instrumented by a sanitizer, for the fuzz targets
  (benchmarks/fuzz.py) and tests/native/test_native.py's ThreadSanitizer test. Returns `output`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  native_dir, output = pathlib.Path(native_dir), pathlib.Path(output)
  compiled = json.loads((native_dir / "buckets.json").read_text())
  buckets = _buckets_named([b["signature"] for b in compiled["buckets"]])
  runtime_archive = pathlib.Path(runtime_dir) / RUNTIME_ARCHIVE
  output.parent.mkdir(parents=True, exist_ok=True)
  with tempfile.TemporaryDirectory() as work:
    _link(pathlib.Path(work), native_dir / "aot", buckets, compiled["cpus"], runtime_archive,
          pathlib.Path(featurizer_archive or runtime_archive.parent / FEATURIZER_ARCHIVE),
          pathlib.Path(tf.__file__).parent / "include", output, compiler,
          gain=calibration.Calibration.from_json(compiled["calibration"]) if compiled.get("calibration") else None)
  return output
