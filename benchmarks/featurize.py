"""Prints how fast the pure-Python featurizer turns HLO into TpuGraphs arrays (nodes/s).

  python benchmarks/featurize.py [--input path/to/module_tuning_data_layout.pb] [--repeats 5]

Times module_features (node features, opcodes, edges, splits) and layout_graph (plus configs and
validation) on the release's 3,163-node unet_3d layout proto; parsing is timed separately.
"""

import pathlib
import sys
import time

from absl import app
from absl import flags

from tpu_graphs.data import locations
from tpu_graphs.hlo import featurize

_INPUT = flags.DEFINE_string(
    "input", str(locations.SAMPLE_NPZ.parent / "pb"
                 / "official_testdata" / "module_tuning_data_layout.pb"),
    "A ModuleTuningData .pb file.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed repetitions; the best is reported.")


def best_seconds(function, repeats: int) -> float:
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    function()
    times.append(time.perf_counter() - start)
  return min(times)


def main(argv):
  del argv
  path = pathlib.Path(_INPUT.value)
  if not path.exists():
    sys.exit(f"benchmark: {path} not found; pass --input=<a ModuleTuningData .pb>")
  data = path.read_bytes()
  tuning = featurize.parse_hlo_proto(data, str(path))
  num_nodes = featurize.module_features(tuning.module).num_nodes
  parse = best_seconds(lambda: featurize.parse_hlo_proto(data, str(path)), _REPEATS.value)
  nodes = best_seconds(lambda: featurize.module_features(tuning.module), _REPEATS.value)
  graph = best_seconds(lambda: featurize.layout_graph(tuning), _REPEATS.value)
  print(f"{path.name}: {num_nodes} nodes, {len(tuning.runs)} runs, best of {_REPEATS.value}")
  print(f"  parse proto     {parse * 1e3:8.1f} ms")
  print(f"  module_features {nodes * 1e3:8.1f} ms  {num_nodes / nodes:10,.0f} nodes/s")
  print(f"  layout_graph    {graph * 1e3:8.1f} ms  {num_nodes / graph:10,.0f} nodes/s (with configs, validation)")


if __name__ == "__main__":
  app.run(main)
