"""Stress generation: one >= 20k-node layout file with 100k configs, streamed; time, size, peak RSS.

  python benchmarks/research/generate_stress.py --output_dir /tmp/stress [--min_nodes 20000 --configs 100000] \
      [--out benchmarks/results/generate_stress.md]

The table goes to --out (benchmarks/benchmark_results.py).
"""

import resource
import time

from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from benchmarks import benchmark_results
from tpu_graphs.data import npz
from tpu_graphs.data import statistics
from tpu_graphs.synth import generate

_OUTPUT_DIR = flags.DEFINE_string("output_dir", "/tmp/tpu_graphs_stress", "Where the file goes.")
_MIN_NODES = flags.DEFINE_integer("min_nodes", 20_000, "Smallest node count of the program.")
_CONFIGS = flags.DEFINE_integer("configs", generate.MAX_CONFIGS, "Configs in the file.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("generate_stress")), "Markdown table to write.")


def main(argv):
  del argv
  start = time.time()
  generated = generate.generate_stress(_OUTPUT_DIR.value, 0, _MIN_NODES.value, _CONFIGS.value)
  seconds = time.time() - start
  peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
  graph = npz.read_graph(generated.path, stream_configs=True)
  raw_gb = graph.node_config_feat.shape[0] * graph.node_config_feat.shape[1] * 18 * 4 / 1e9
  table = ["| measure | value |", "|---|---:|",
           f"| nodes / edges / configurable nodes | {graph.node_feat.shape[0]:,} / {graph.edge_index.shape[0]:,} / "
           f"{len(graph.node_config_ids):,} |",
           f"| configs | {graph.num_configs:,} |",
           f"| node_config_feat, uncompressed | {raw_gb:.1f} GB |",
           f"| file | {statistics.format_bytes(generated.path.stat().st_size)} |",
           f"| seconds to generate and write | {seconds:.0f} |",
           f"| peak RSS | {peak_gb:.2f} GB |"]
  benchmark_results.write("research/generate_stress", "Generating one NLP-sized layout file, streamed", "\n".join(table),
                          _OUT.value)


if __name__ == "__main__":
  program.run(main)
