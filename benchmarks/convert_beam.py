"""Conversion throughput: the single-process converter against the Beam pipeline on DirectRunner.

  python benchmarks/convert_beam.py [--input_dir data/generated/npz] [--shard_kb 256] [--workers 1,2] \
      [--out benchmarks/results/convert_beam.md]

Each run converts the whole tree into a fresh folder; every Beam output is checked to be
byte-identical to the single-process one. Times are wall-clock seconds, TensorFlow already
imported in this process; Beam's multi-process runs include starting their worker processes,
which "Beam startup" measures alone (a tree of one small file). Throughput is bounded by the
machine's cores: compare the runs with the core count in the table's header. The table goes to
--out (benchmarks/benchmark_results.py).
"""

import pathlib
import tempfile
import time

from absl import flags
from apache_beam.options import pipeline_options

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from tpu_graphs.data import beam_pipeline
from benchmarks import benchmark_results
from tpu_graphs.data import convert
from tpu_graphs.data import errors
from tpu_graphs.data import locations

_INPUT_DIR = flags.DEFINE_string(
    "input_dir", None, "A TpuGraphs npz tree; default data/generated/npz, else the real sample.")
_SHARD_KB = flags.DEFINE_integer(
    "shard_kb", 256, "Target npz kilobytes per shard: small enough to give every worker shards.")
_WORKERS = flags.DEFINE_list("workers", ["1", "2"], "DirectRunner worker counts to time.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("convert_beam")), "Markdown table to write.")


def default_input_dir() -> pathlib.Path:
  return locations.EMBEDDED_NPZ if locations.EMBEDDED_NPZ.is_dir() else locations.sample_path("npz")


def direct_runner(workers: int) -> pipeline_options.PipelineOptions:
  mode = "multi_processing" if workers > 1 else "in_memory"
  return pipeline_options.PipelineOptions(
      ["--runner=DirectRunner", f"--direct_num_workers={workers}", f"--direct_running_mode={mode}"])


def tree_bytes(root: pathlib.Path) -> dict:
  return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def main(argv):
  del argv
  source = pathlib.Path(_INPUT_DIR.value) if _INPUT_DIR.value else default_input_dir()
  files = sorted(source.rglob("*.npz"))
  if not files:
    raise errors.InputError(f"{source}: no npz files; pass --input_dir=<an npz tree>")
  npz_mb = sum(p.stat().st_size for p in files) / 1e6
  shard_bytes = _SHARD_KB.value << 10
  with tempfile.TemporaryDirectory() as scratch:
    scratch = pathlib.Path(scratch)
    small = min(files, key=lambda p: p.stat().st_size)
    tiny_tree = scratch / "tiny" / small.relative_to(source)
    tiny_tree.parent.mkdir(parents=True)
    tiny_tree.write_bytes(small.read_bytes())
    convert.convert_directory(scratch / "tiny", scratch / "warmup", progress=False)  # TensorFlow's first-use costs

    start = time.perf_counter()
    summary = convert.convert_directory(source, scratch / "single", shard_bytes=shard_bytes, progress=False)
    single_seconds = time.perf_counter() - start
    reference = tree_bytes(scratch / "single")
    shards = sum(g["shards"] for g in summary.groups)
    title = (f"Converting {len(files)} graphs ({npz_mb:.1f} MB of npz, {shards} shards of ~{_SHARD_KB.value} kB) "
             "in one process and with Beam's DirectRunner")
    table = ["| converter | seconds | graphs/s | npz MB/s | same bytes |", "|---|---:|---:|---:|---|"]
    table.append(f"| single process | {single_seconds:.2f} | {len(files) / single_seconds:.1f} | "
                 f"{npz_mb / single_seconds:.2f} | reference |")
    for workers in map(int, _WORKERS.value):
      name = f"beam_{workers}"
      start = time.perf_counter()
      beam_pipeline.run_conversion(source, scratch / name, direct_runner(workers), shard_bytes=shard_bytes)
      seconds = time.perf_counter() - start
      same = "yes" if tree_bytes(scratch / name) == reference else "NO"
      table.append(f"| Beam DirectRunner, {workers} worker{'s' if workers > 1 else ''} | {seconds:.2f} | "
                   f"{len(files) / seconds:.1f} | {npz_mb / seconds:.2f} | {same} |")
      start = time.perf_counter()
      beam_pipeline.run_conversion(scratch / "tiny", scratch / f"tiny_{workers}", direct_runner(workers))
      table.append(f"| Beam startup, {workers} worker{'s' if workers > 1 else ''} "
                   f"(one {small.stat().st_size / 1e3:.0f} kB file) | {time.perf_counter() - start:.2f} | | | |")
  benchmark_results.write("convert_beam", title, "\n".join(table), _OUT.value)


if __name__ == "__main__":
  program.run(main)
