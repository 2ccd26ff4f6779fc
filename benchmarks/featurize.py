"""How fast the pure-Python featurizer turns HLO into TpuGraphs arrays (nodes/s).

  python benchmarks/featurize.py [--input path/to/module_tuning_data_layout.pb] [--repeats 5] \
      [--out benchmarks/results/featurize.md]

Times module_features (node features, opcodes, edges, splits) and layout_graph (plus configs and
validation) on the release's 3,163-node unet_3d layout proto of the real sample; parsing is
timed separately. The table goes to --out (benchmarks/benchmark_results.py).
"""

import pathlib
import time

from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from benchmarks import benchmark_results
from tpu_graphs.data import errors, locations
from tpu_graphs.hlo import featurize, hlo_input

_INPUT = flags.DEFINE_string(
    "input", str(locations.sample_dir() / "pb" / "official_testdata" / "module_tuning_data_layout.pb"),
    "A ModuleTuningData .pb file; default: the real sample's unet_3d layout proto.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed repetitions; the best is reported.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("featurize")), "Markdown table to write.")


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
    raise errors.InputError(locations.missing_sample(path) + "; or pass --input=<a ModuleTuningData .pb>")
  data = path.read_bytes()
  tuning = hlo_input.parse_hlo_proto(data, str(path))
  num_nodes = featurize.module_features(tuning.module).num_nodes
  parse = best_seconds(lambda: hlo_input.parse_hlo_proto(data, str(path)), _REPEATS.value)
  nodes = best_seconds(lambda: featurize.module_features(tuning.module), _REPEATS.value)
  graph = best_seconds(lambda: featurize.layout_graph(tuning), _REPEATS.value)
  table = [f"| step | best of {_REPEATS.value} | nodes/s |", "|---|---:|---:|",
           f"| parse proto | {parse * 1e3:.1f} ms | |",
           f"| module_features | {nodes * 1e3:.1f} ms | {num_nodes / nodes:,.0f} |",
           f"| layout_graph (with configs, validation) | {graph * 1e3:.1f} ms | {num_nodes / graph:,.0f} |"]
  benchmark_results.write("featurize", f"Featurizing {path.name} ({num_nodes:,} nodes, {len(tuning.runs)} runs)",
                          "\n".join(table), _OUT.value)


if __name__ == "__main__":
  program.run(main)
