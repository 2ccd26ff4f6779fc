"""Conversion throughput, record size against npz size, and peak memory on the largest sample file.

  python benchmarks/convert.py [--input_dir ../shared/tpugraphs_sample/npz] [--out benchmarks/results/convert.md]

Memory is measured as the peak resident set size while converting the 21,918-node nlp test
graph, after TensorFlow is imported and warmed up on a small file (Linux's clear_refs resets the
peak), and compared with the uncompressed size of that file's arrays. The table goes to --out
(benchmarks/benchmark_results.py).
"""

import pathlib
import shutil
import tempfile
import time

from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from benchmarks import benchmark_results
from tpu_graphs.data import convert, errors, graphs, locations, npz

_INPUT_DIR = flags.DEFINE_string("input_dir", str(locations.sample_dir() / "npz"), "The real TpuGraphs sample's npz tree.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("convert")), "Markdown table to write.")
NLP_FILE = "layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz"


def _status_kib(field: str) -> int:
  for line in pathlib.Path("/proc/self/status").read_text().splitlines():
    if line.startswith(field + ":"):
      return int(line.split()[1])
  raise KeyError(field)


def _reset_peak_rss() -> None:
  pathlib.Path("/proc/self/clear_refs").write_text("5")


def _single_file_tree(source: pathlib.Path, relative: str, root: pathlib.Path) -> pathlib.Path:
  target = root / "npz" / relative
  target.parent.mkdir(parents=True)
  shutil.copy(source / relative, target)
  return root / "npz"


def main(argv):
  del argv
  source = pathlib.Path(_INPUT_DIR.value)
  if not (source / NLP_FILE).exists():
    raise errors.InputError(locations.missing_sample(source / NLP_FILE))
  with tempfile.TemporaryDirectory() as scratch:
    scratch = pathlib.Path(scratch)
    start = time.perf_counter()
    summary = convert.convert_directory(source, scratch / "all", progress=False)
    seconds = time.perf_counter() - start
    npz_bytes = sum(g["npz_bytes"] for g in summary.groups)
    record_bytes = sum(g["record_bytes"] for g in summary.groups)
    graph_count = sum(g["graphs"] for g in summary.groups)
    array_bytes = 0
    for path in sorted(source.rglob("*.npz")):
      array_bytes += sum(a.nbytes for a in graphs.graph_arrays(npz.read_graph(path)).values())
    rows = ["| measure | value |", "|---|---:|"]
    rows.append(f"| graphs converted | {graph_count} |")
    rows.append(f"| seconds | {seconds:.2f} |")
    rows.append(f"| graphs/s | {graph_count / seconds:.2f} |")
    rows.append(f"| MB/s of uncompressed arrays | {array_bytes / 1e6 / seconds:.1f} |")
    rows.append(f"| MB/s of npz files | {npz_bytes / 1e6 / seconds:.2f} |")
    rows.append(f"| records / npz bytes | {record_bytes / npz_bytes:.2f} |")
    rows.append(f"| records / uncompressed array bytes | {record_bytes / array_bytes:.3f} |")

    nlp = npz.read_graph(source / NLP_FILE)
    nlp_array_bytes = sum(a.nbytes for a in graphs.graph_arrays(nlp).values())
    del nlp
    warmup = _single_file_tree(source, "layout/nlp/random/test/23559853d9702baaaacbb0c83fd32266.npz", scratch / "w")
    convert.convert_directory(warmup, scratch / "warm_out", progress=False)
    nlp_tree = _single_file_tree(source, NLP_FILE, scratch / "nlp")
    baseline_kib = _status_kib("VmRSS")
    _reset_peak_rss()
    start = time.perf_counter()
    convert.convert_directory(nlp_tree, scratch / "nlp_out", progress=False)
    nlp_seconds = time.perf_counter() - start
    peak_kib = _status_kib("VmHWM")
    growth = (peak_kib - baseline_kib) * 1024
    rows.append(f"| nlp test graph (21,918 nodes, 1,001 configs): seconds | {nlp_seconds:.2f} |")
    rows.append(f"| nlp: uncompressed array MB | {nlp_array_bytes / 1e6:.1f} |")
    rows.append(f"| nlp: RSS before (TensorFlow loaded) MB | {baseline_kib * 1024 / 1e6:.1f} |")
    rows.append(f"| nlp: peak RSS MB | {peak_kib * 1024 / 1e6:.1f} |")
    rows.append(f"| nlp: peak RSS growth MB | {growth / 1e6:.1f} |")
    rows.append(f"| nlp: peak RSS growth / array size | {growth / nlp_array_bytes:.2f} |")
  benchmark_results.write(
      "convert", f"Converting {graph_count} npz graphs (--input_dir) to records", "\n".join(rows),
      _OUT.value)


if __name__ == "__main__":
  program.run(main)
