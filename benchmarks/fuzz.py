"""Fuzzes the native code a compiler links or a user's files reach (native/fuzz/, docs/development.md).

  scripts/fuzz [--minutes N] [TARGET ...]    # builds, then fuzzes each target in turn
  python benchmarks/fuzz.py --minutes 30      # the campaign: every target; writes benchmarks/results/fuzz.md
  python benchmarks/fuzz.py --minutes 30 --parallel 5   # the same, every target at once

Targets (native/fuzz/<target>_fuzzer.cc, libFuzzer, clang with AddressSanitizer and
UndefinedBehaviorSanitizer):

* npz: a whole .npz file's bytes through the reader of //native:rank (native/npz/npz.h);
* layout_pruning: graphs through the host-side pruning of layout libraries (native/library/layout_pruning.h),
  checked against its definition;
* featurizer: module bytes through the C++ featurizer and the C ranking of tpu_graphs_rank_module
  (native/hlo, native/library/rank_module.cc), with a stand-in score function;
* module_writer: module bytes and a candidate index through tpu_graphs_apply_layout_config (the module
  written back, native/hlo/module_writer.cc), each module written read back as its candidate;
* tile_library, layout_library: tpu_graphs_score_tile / tpu_graphs_score_layout and
  tpu_graphs_rank_module of compiled model libraries (small untrained models,
  benchmarks/untrained.py, compiled by aot/native_library.py and linked again instrumented).

Each target runs for --minutes or --runs executions, whichever comes first, under `nice -n 19`,
with libFuzzer's memory limits (--rss_limit_mb, --malloc_limit_mb) and a per-input --timeout; a
crash, a leak, an out-of-memory, a timeout or a sanitizer report is a finding. Its input is kept
in native/fuzz/regressions/<target>/, which every later run replays first and Bazel replays in
scripts/test (//native/fuzz:*_regressions, tests/native/test_native.py for the library targets). Seeds are
written at run time from the real sample ($TPUGRAPHS_SAMPLE_DIR, docs/real-data.md), the embedded
generated files and XLA's own dumps of a few Keras programs (tpu_graphs/hlo/xla_dumps.py); the
corpus grows in out/fuzz/corpus/<target>/ from run to run.

Prints per target the executions, coverage (edges, features), corpus and findings; a run of every
target writes them to --out. Exits 1 if anything was found.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import io
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import time

from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

import numpy as np

from benchmarks import benchmark_results
from tpu_graphs.data import locations

NATIVE = locations.REPOSITORY / "native"
FUZZ_SOURCES = NATIVE / "fuzz"
REGRESSIONS = FUZZ_SOURCES / "regressions"
BAZEL_NATIVE = locations.REPOSITORY / "bazel-bin" / "native"
WORK = locations.REPOSITORY / "out" / "fuzz"
CLANG = "clang++"
# Code under test: coverage for libFuzzer, AddressSanitizer, UndefinedBehaviorSanitizer (every
# report fatal).
INSTRUMENTED = ["-g", "-O1", "-fno-omit-frame-pointer", "-fsanitize=fuzzer-no-link,address,undefined",
                "-fno-sanitize-recover=all"]
# The fuzzer binaries; -rdynamic exports libFuzzer's coverage callbacks to an instrumented model library.
FUZZER = ["-g", "-O1", "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all", "-rdynamic"]
# The small untrained models the library targets link (benchmarks/untrained.py).
MODELS = {"tile": ("tile:xla", {"units": 8, "layers": 1}),
          "layout": ("layout:xla:default", {"units": 8, "layers": 1, "prune_hops": 1})}
# What the compiled models depend on: a change recompiles them.
MODEL_SOURCES = ("tpu_graphs/export/*.py", "tpu_graphs/models/*.py", "tpu_graphs/train/experiments.py")
FINDING_PREFIXES = ("crash-", "leak-", "timeout-", "oom-")


@dataclasses.dataclass(frozen=True)
class Target:
  """A fuzz target: what it fuzzes, the instrumented sources it links besides
  native/fuzz/<name>_fuzzer.cc (repository paths; "featurizer": native/hlo, its protos and
  native/library/rank_module.cc), the model library it links (a MODELS key) and the longest input
  libFuzzer makes."""
  name: str
  fuzzes: str
  sources: tuple[str, ...] = ()
  library: str | None = None
  max_len: int = 1 << 16


TARGETS = {target.name: target for target in (
    Target("npz", "a whole .npz file (native/npz/npz.h)",
           sources=("native/npz/npz.cc", "native/npz/npz_writer.cc", "native/fuzz/npz_mutator.cc"), max_len=1 << 18),
    Target("layout_pruning", "graphs through PruneLayout (native/library/layout_pruning.h), against its definition",
           sources=("native/library/layout_pruning.cc",), max_len=1 << 16),
    Target("featurizer", "module bytes through the C++ featurizer and the C ranking (native/hlo, "
           "native/library/rank_module.cc)",
           sources=("featurizer",), max_len=1 << 19),
    Target("module_writer", "module bytes and a candidate index through tpu_graphs_apply_layout_config "
           "(native/hlo/module_writer.cc), read back as the candidate", sources=("featurizer",), max_len=1 << 19),
    Target("tile_library", "tpu_graphs_score_tile and tpu_graphs_rank_module of a compiled tile model",
           library="tile", max_len=1 << 19),
    Target("layout_library", "tpu_graphs_score_layout and tpu_graphs_rank_module of a compiled layout model",
           library="layout", max_len=1 << 20),
)}

_MINUTES = flags.DEFINE_float("minutes", 5, "Minutes per target (the campaign: 30).")
_RUNS = flags.DEFINE_integer("runs", 1_000_000, "Executions per target at most: a target stops at --minutes or "
                             "--runs, whichever comes first.")
_PARALLEL = flags.DEFINE_integer("parallel", 1, "Targets fuzzed at once (each for --minutes): on a 2-core machine "
                                 "--parallel 5 runs the 30-minute campaign in 30 minutes, each target with less CPU.")
_TIMEOUT = flags.DEFINE_integer("timeout", 30, "Seconds one input may take before it is a finding.")
_RSS_LIMIT_MB = flags.DEFINE_integer("rss_limit_mb", 2560, "libFuzzer's -rss_limit_mb: more resident memory is a finding.")
_MALLOC_LIMIT_MB = flags.DEFINE_integer("malloc_limit_mb", 1024, "libFuzzer's -malloc_limit_mb: a larger single "
                                        "allocation is a finding.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("fuzz")), "Where a run of every target writes "
                           "its figures.")
program.require_at_least(1, _RUNS, _PARALLEL, _TIMEOUT, _RSS_LIMIT_MB, _MALLOC_LIMIT_MB)


# --- seeds: inputs in each target's layout (native/fuzz/*_fuzzer.cc, fuzz_input.h) from real files

def _sample_files(pattern: str) -> list[pathlib.Path]:
  return sorted(locations.sample_dir().glob(pattern)) + sorted(locations.EMBEDDED_NPZ.glob(pattern))


def _arrays(path: pathlib.Path) -> dict[str, np.ndarray]:
  with np.load(path) as arrays:
    return {name: np.ascontiguousarray(arrays[name]) for name in arrays.files}


def _little_endian(array: np.ndarray, dtype: str) -> bytes:
  return np.ascontiguousarray(array, dtype=dtype).tobytes()


def _module_seeds() -> list[bytes]:
  """Modules as a compiler holds them: XLA's own dumps (HloProto) of a CNN, an RNN and a
  transformer block before and after optimization (tpu_graphs/hlo/xla_dumps.py, dumped once into
  out/fuzz/dumps/); the sample's TuningData and each of its kernels as a bare HloModuleProto; its
  layout ModuleTuningData with its first 3 runs."""
  from tpu_graphs.hlo import hlo_input, tuning_pb2, xla_dumps  # pylint: disable=g-import-not-at-top
  dumps_dir = WORK / "dumps"
  if not list(dumps_dir.glob("*.hlo.pb")):
    dumps_dir.mkdir(parents=True, exist_ok=True)
    xla_dumps.dump_programs(list(xla_dumps.PROGRAMS), dumps_dir)
  seeds = [path.read_bytes() for path in sorted(dumps_dir.glob("*_forward_*.hlo.pb"))]
  for path in sorted(locations.sample_dir().glob("pb/**/*.pb")):
    proto = hlo_input.parse_hlo_proto(path.read_bytes(), str(path))
    if isinstance(proto, tuning_pb2.TuningData):
      seeds += [path.read_bytes(), *(kernel.module.SerializeToString() for kernel in proto.modules)]
    elif isinstance(proto, tuning_pb2.ModuleTuningData):
      del proto.runs[3:]
      seeds.append(proto.SerializeToString())
    else:
      seeds.append(path.read_bytes())
  return seeds


def _rank_module_seeds(entry: bytes) -> list[bytes]:
  """library_calls.h's RankModule layout: num_candidates, seed, top_k, the module."""
  return [entry + struct.pack("<BQB", candidates, 0, 5) + module for module in _module_seeds() for candidates in (0, 8)
          if len(module) < (1 << 19) - 16]


def _npz_seeds(configs: int = 8) -> list[bytes]:
  """Each sample file with its first `configs` configs, stored (np.savez) and deflated (savez_compressed)."""
  seeds = []
  for path in _sample_files("**/*.npz"):
    arrays = {name: array[:configs] if name.startswith("config_") or name == "node_config_feat" else array
              for name, array in _arrays(path).items()}
    for save in (np.savez, np.savez_compressed):
      written = io.BytesIO()
      save(written, **arrays)
      seeds.append(written.getvalue())
  return [seed for seed in seeds if len(seed) <= TARGETS["npz"].max_len]


def _pruning_seeds() -> list[bytes]:
  seeds = []
  for path in _sample_files("**/layout/**/*.npz"):
    arrays = _arrays(path)
    nodes, edges, ids = len(arrays["node_opcode"]), arrays["edge_index"], arrays["node_config_ids"]
    if nodes > 2048 or len(edges) > 8192:
      continue
    for hops in (0, 1, 2):
      seeds.append(struct.pack("<HHHBH", nodes - 1, len(edges), len(ids) - 1, hops, 65535) +
                   _little_endian(edges, "<u2") + _little_endian(ids, "<u2"))
  return seeds


def _tile_seeds(configs: int = 32) -> list[bytes]:
  seeds = []
  for path in _sample_files("**/tile/**/*.npz"):
    arrays = _arrays(path)
    feat, edges, config_feat = arrays["node_feat"], arrays["edge_index"], arrays["config_feat"][:configs]
    seeds.append(struct.pack("<BBBqqq", 0, 0, 7, len(feat), len(edges), len(config_feat)) +
                 _little_endian(feat, "<f4") + _little_endian(arrays["node_opcode"], "u1") +
                 _little_endian(edges, "<i8") + _little_endian(config_feat, "<f4"))
  return seeds + _rank_module_seeds(b"\x01")


def _layout_seeds(configs: int = 4) -> list[bytes]:
  seeds = []
  for path in _sample_files("**/layout/**/*.npz"):
    arrays = _arrays(path)
    feat, edges, ids = arrays["node_feat"], arrays["edge_index"], arrays["node_config_ids"]
    config_feat = arrays["node_config_feat"][:configs]
    if len(feat) > 8192 or len(feat[0]) != 140:  # the derived files of the sample drop features
      continue
    seeds.append(struct.pack("<BBBqqqq", 0, 0, 7, len(feat), len(edges), len(ids), len(config_feat)) +
                 _little_endian(feat, "<f4") + _little_endian(arrays["node_opcode"], "u1") +
                 _little_endian(edges, "<i8") + _little_endian(ids, "<i8") + _little_endian(config_feat, "<f4"))
  return [seed for seed in seeds if len(seed) <= TARGETS["layout_library"].max_len] + _rank_module_seeds(b"\x01")


def _featurizer_seeds() -> list[bytes]:
  return [struct.pack("<BBQB", kind, candidates, 0, 5) + module
          for module in _module_seeds() for kind in (0, 1) for candidates in (0, 8)
          if len(module) < TARGETS["featurizer"].max_len - 16]


def _module_writer_seeds() -> list[bytes]:
  """module_writer_fuzzer.cc's layout: options, num_candidates, seed, config, the module."""
  return [struct.pack("<BBQB", 0, 8, 0, config) + module for module in _module_seeds() for config in (0, 5)
          if len(module) < TARGETS["module_writer"].max_len - 16]


SEEDS = {"npz": _npz_seeds, "layout_pruning": _pruning_seeds, "featurizer": _featurizer_seeds,
         "module_writer": _module_writer_seeds,
         "tile_library": _tile_seeds, "layout_library": _layout_seeds}


def write_seeds(target: str) -> pathlib.Path:
  """out/fuzz/seeds/<target>/, written afresh; an empty folder where the sample is absent."""
  folder = WORK / "seeds" / target
  shutil.rmtree(folder, ignore_errors=True)
  folder.mkdir(parents=True)
  for seed in SEEDS[target]():
    (folder / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
  return folder


# --- building: instrumented objects, model libraries linked again instrumented, fuzzer binaries

def _run(command: list, what: str) -> None:
  result = subprocess.run([str(part) for part in command], capture_output=True, text=True, check=False)
  if result.returncode != 0:
    sys.exit(f"fuzz: {what} failed: {' '.join(map(str, command))}\n{result.stderr[-4000:]}")


def _stale(output: pathlib.Path, dependencies: pathlib.Path) -> bool:
  """Whether `output` is missing or older than a file its compiler's dependency list names."""
  if not output.exists() or not dependencies.exists():
    return True
  built = output.stat().st_mtime
  names = dependencies.read_text().replace("\\\n", " ").split(":", 1)[1].split()
  return any(not pathlib.Path(name).exists() or pathlib.Path(name).stat().st_mtime > built for name in names)


def _object(source: pathlib.Path, flags_: list[str]) -> pathlib.Path:
  """`source` compiled instrumented into out/fuzz/build/obj/ (again only where it or a header changed)."""
  output = WORK / "build" / "obj" / pathlib.Path(os.path.relpath(source, locations.REPOSITORY)).with_suffix(".o")
  dependencies = output.with_suffix(".d")
  if _stale(output, dependencies):
    output.parent.mkdir(parents=True, exist_ok=True)
    _run([CLANG, "-std=c++17", "-fPIC", *INSTRUMENTED, *flags_, "-MMD", "-MF", dependencies, "-c", source, "-o",
          output], f"compiling {source}")
  return output


def _include_flags() -> list[str]:
  return [f"-I{locations.REPOSITORY}", f"-I{BAZEL_NATIVE / 'hlo' / 'protos'}"]


def _featurizer_objects() -> list[pathlib.Path]:
  """The featurizer, tpu_graphs_rank_module and the generated proto classes, instrumented."""
  generated = sorted((BAZEL_NATIVE / "hlo").glob("**/*.pb.cc"))
  if not generated:
    sys.exit(f"fuzz: {BAZEL_NATIVE / 'hlo'} holds no generated protos; run bazel build //native:all")
  sources = [*sorted((NATIVE / "hlo").glob("*.cc")), NATIVE / "library" / "rank_module.cc"]
  return [_object(source, _include_flags()) for source in sources] + [
      _object(source, [*_include_flags(), "-w"]) for source in generated]


def _sources_digest() -> str:
  digest = hashlib.sha256()
  for pattern in MODEL_SOURCES:
    for path in sorted(locations.REPOSITORY.glob(pattern)):
      digest.update(path.read_bytes())
  return digest.hexdigest()


def _compiled_model(kind: str) -> pathlib.Path:
  """out/fuzz/models/<kind>/native/: the untrained model compiled by native_library (again only
  where its Python sources changed)."""
  from benchmarks import untrained  # pylint: disable=g-import-not-at-top
  from tpu_graphs.export.aot import native_library  # pylint: disable=g-import-not-at-top
  folder = WORK / "models" / kind
  stamp, digest = folder / "sources.sha256", _sources_digest()
  if not (stamp.exists() and stamp.read_text() == digest):
    print(f"fuzz: compiling an untrained {kind} model (minutes)", flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    collection, settings = MODELS[kind]
    export_dir = untrained.export_untrained(collection, folder, static_signatures=True, **settings)
    native_library.compile_model_library(export_dir, BAZEL_NATIVE)
    stamp.write_text(digest)
  return folder / kind / "native"


def _instrumented_library(kind: str) -> pathlib.Path:
  """The model's library linked again from its compiled buckets with the library's sources and the
  featurizer instrumented: out/fuzz/build/<kind>/libtpu_graphs_model.so."""
  from tpu_graphs.export.aot import native_library  # pylint: disable=g-import-not-at-top
  archive = WORK / "build" / "libtpu_graphs_featurizer.a"
  archive.unlink(missing_ok=True)
  _run(["ar", "rcs", archive, *_featurizer_objects()], "archiving the instrumented featurizer")
  output = WORK / "build" / kind / native_library.LIBRARY_NAME
  # Sanitizer and coverage symbols come from the fuzzer binary that loads the library.
  native_library.relink(_compiled_model(kind), BAZEL_NATIVE, output, [CLANG, *INSTRUMENTED, "-Wl,-z,undefs"],
                        archive)
  return output


def build(target: Target) -> pathlib.Path:
  """out/fuzz/build/<target>: the fuzzer binary."""
  objects, links = [], ["-lz", "-lprotobuf-lite"]
  for source in target.sources:
    objects += _featurizer_objects() if source == "featurizer" else [_object(locations.REPOSITORY / source, _include_flags())]
  if target.library:
    library = _instrumented_library(target.library)
    links += [f"-L{library.parent}", "-ltpu_graphs_model", f"-Wl,-rpath,{library.parent}"]
  binary = WORK / "build" / target.name
  fuzzer_source = FUZZ_SOURCES / f"{target.name}_fuzzer.cc"
  _run([CLANG, "-std=c++17", *FUZZER, *_include_flags(), fuzzer_source, *objects, "-o", binary, *links],
       f"building {binary.name}")
  return binary


# --- running

@dataclasses.dataclass
class Result:
  target: str
  seconds: float
  executions: int
  edges: int
  features: int
  corpus: int
  findings: list[str]


def _stat(log: str, name: str) -> int:
  found = re.findall(rf"^stat::{name}:\s+(\d+)", log, flags=re.MULTILINE)
  return int(found[-1]) if found else 0


def _coverage(log: str) -> tuple[int, int, int]:
  """(edges, features, corpus units) of libFuzzer's last status line."""
  found = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)", log)
  return tuple(map(int, found[-1])) if found else (0, 0, 0)


def fuzz(target: Target, binary: pathlib.Path, minutes: float) -> Result:
  """Runs `binary` on its corpus, seeds and regressions; keeps what it finds in REGRESSIONS/<target>."""
  corpus, findings_dir = WORK / "corpus" / target.name, WORK / "findings" / target.name
  regressions = REGRESSIONS / target.name
  for folder in (corpus, findings_dir, regressions):
    folder.mkdir(parents=True, exist_ok=True)
  before = set(os.listdir(findings_dir))
  log_path = WORK / "logs" / f"{target.name}.log"
  log_path.parent.mkdir(parents=True, exist_ok=True)
  command = ["nice", "-n", "19", binary, f"-max_total_time={max(1, round(minutes * 60))}", f"-runs={_RUNS.value}",
             f"-timeout={_TIMEOUT.value}", f"-rss_limit_mb={_RSS_LIMIT_MB.value}",
             f"-malloc_limit_mb={_MALLOC_LIMIT_MB.value}", f"-max_len={target.max_len}", "-print_final_stats=1",
             "-report_slow_units=1000000", f"-artifact_prefix={findings_dir}/", corpus, write_seeds(target.name),
             regressions]
  print(f"fuzz: {target.name} ({target.fuzzes}) for {minutes:g} min or {_RUNS.value:,} executions; log {log_path}",
        flush=True)
  started = time.monotonic()
  with open(log_path, "w") as log:
    subprocess.run([str(part) for part in command], stdout=log, stderr=subprocess.STDOUT, check=False,
                   env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1", "UBSAN_OPTIONS": "print_stacktrace=1"})
  seconds = time.monotonic() - started
  text = log_path.read_text(errors="replace")
  found = []
  for name in sorted(set(os.listdir(findings_dir)) - before):
    if name.startswith(FINDING_PREFIXES):
      shutil.copy(findings_dir / name, regressions / name)
      found.append(name)
  if not found and re.search(r"^==\d+==ERROR|^SUMMARY: |deadly signal", text, flags=re.MULTILINE):
    found.append("a report without an input (see the log)")
  edges, features, units = _coverage(text)
  return Result(target.name, seconds, _stat(text, "number_of_executed_units"), edges, features, units,
                found)


def table(results: list[Result]) -> str:
  """The Markdown table of `results`. No memory column: libFuzzer's peak RSS (getrusage) starts from
  this process's own at the fork, about a gigabyte once TensorFlow is loaded, whatever the target."""
  rows = ["| target | what it fuzzes | time | executions | executions/s | coverage (edges) | features | corpus "
          "| findings |", "|---|---|---:|---:|---:|---:|---:|---:|---|"]
  for result in results:
    rows.append(f"| {result.target} | {TARGETS[result.target].fuzzes} | {result.seconds / 60:.1f} min | "
                f"{result.executions:,} | {result.executions / max(result.seconds, 1e-9):,.0f} | {result.edges:,} | "
                f"{result.features:,} | {result.corpus:,} | "
                f"{', '.join(result.findings) or 'none'} |")
  return "\n".join(rows)


def main(argv):
  names = argv[1:] or list(TARGETS)
  unknown = [name for name in names if name not in TARGETS]
  if unknown:
    sys.exit(f"fuzz: unknown target(s) {', '.join(unknown)}; targets: {', '.join(TARGETS)}")
  if shutil.which(CLANG) is None:
    sys.exit(f"fuzz: {CLANG} not found; scripts/fuzz installs it (clang, scripts/system_packages.txt)")
  binaries = {name: build(TARGETS[name]) for name in names}

  def fuzz_one(name: str) -> Result:
    result = fuzz(TARGETS[name], binaries[name], _MINUTES.value)
    print(table([result]), flush=True)
    return result

  with concurrent.futures.ThreadPoolExecutor(max_workers=_PARALLEL.value) as pool:
    results = list(pool.map(fuzz_one, names))
  body = table(results)
  if set(names) == set(TARGETS):
    findings = sum(len(result.findings) for result in results)
    benchmark_results.write(
        "fuzz", f"Fuzzing the native code with libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer (clang "
        f"{_clang_version()}): each target {_MINUTES.value:g} minutes or {_RUNS.value:,} executions, whichever came "
        f"first, {_schedule(len(names))} under nice -n 19, seeds from the real sample; {findings} finding(s)",
        body + "\n\nCoverage: libFuzzer's edges (`cov`) and features (`ft`) at the end of the run; corpus: inputs "
        "kept for new coverage (with the seeds).", _OUT.value)
  else:
    print(body)
  if any(result.findings for result in results):
    sys.exit("fuzz: findings kept in " + ", ".join(str(REGRESSIONS / r.target) for r in results if r.findings))


def _schedule(targets: int) -> str:
  at_once = min(_PARALLEL.value, targets)
  return "one after another" if at_once == 1 else f"{at_once} at once on {os.cpu_count()} cores"


def _clang_version() -> str:
  found = re.search(r"version (\S+)", subprocess.run([CLANG, "--version"], capture_output=True, text=True).stdout)
  return found.group(1) if found else "unknown"


if __name__ == "__main__":
  program.run(main)
