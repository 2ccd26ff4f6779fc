"""Stress generation: one >= 20k-node layout file with 100k configs, streamed; prints time, size, peak RSS.

  python benchmarks/generate_stress.py --output_dir /tmp/stress [--min_nodes 20000 --configs 100000]
"""

import resource
import time

from absl import app
from absl import flags

from tpu_graphs.data import npz
from tpu_graphs.data import statistics
from tpu_graphs.synth import generate

_OUTPUT_DIR = flags.DEFINE_string("output_dir", "/tmp/tpu_graphs_stress", "Where the file goes.")
_MIN_NODES = flags.DEFINE_integer("min_nodes", 20_000, "Smallest node count of the program.")
_CONFIGS = flags.DEFINE_integer("configs", generate.MAX_CONFIGS, "Configs in the file.")


def main(argv):
  del argv
  start = time.time()
  generated = generate.generate_stress(_OUTPUT_DIR.value, 0, _MIN_NODES.value, _CONFIGS.value)
  seconds = time.time() - start
  peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
  graph = npz.read_graph(generated.path, stream_configs=True)
  print(f"{generated.path}: {graph.node_feat.shape[0]} nodes, {graph.edge_index.shape[0]} edges, "
        f"{len(graph.node_config_ids)} configurable nodes, {graph.num_configs} configs, "
        f"node_config_feat {graph.node_config_feat.shape} "
        f"({graph.node_config_feat.shape[0] * graph.node_config_feat.shape[1] * 18 * 4 / 1e9:.1f} GB raw), "
        f"file {statistics.format_bytes(generated.path.stat().st_size)}")
  print(f"generated in {seconds:.0f}s, peak RSS {peak_gb:.2f} GB")


if __name__ == "__main__":
  app.run(main)
