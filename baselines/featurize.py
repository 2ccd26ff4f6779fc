"""Featurizes XLA HLO protos into TpuGraphs npz files, one per module or kernel, named after it.

  python baselines/featurize.py --input module_tuning_data_layout.pb --output_dir out/featurized
  python baselines/featurize.py --input op_tuning_data.pb --output_dir out/featurized
  python baselines/featurize.py --input optimized_module.pb --kernels --output_dir out/kernels
  python baselines/featurize.py --input module.before_optimizations.hlo.pb --num_candidates 100 --output_dir out/c

The input is a ModuleTuningData (one layout graph), a TuningData (one tile graph per kernel), or a
bare HloModuleProto or HloProto (XLA's --xla_dump_hlo_as_proto: an unlabelled program graph, or
with --kernels one tile graph per fusion). Tuning data without runs (nothing measured yet) gives
its graph and configurable nodes without configs, a file the format's readers refuse (they need
configs): rank its candidates (baselines/rank.py --num_candidates). --num_candidates writes
candidate configs instead of the ones the input holds (tpu_graphs/hlo/candidates.py). See
tpu_graphs/hlo/featurize.py; //native:featurize writes the same files without Python.
"""

import pathlib

from absl import flags

from baselines import program
from tpu_graphs.data import npz
from tpu_graphs.hlo import candidates, hlo_input
from tpu_graphs.hlo import featurize

_INPUT = flags.DEFINE_string("input", None, "A .pb file: ModuleTuningData, TuningData, HloModuleProto or HloProto.")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", "out/featurized", "Where the npz files go.")
_KERNELS = flags.DEFINE_bool("kernels", False, "For an HLO module: one tile graph per fusion.")
_NUM_CANDIDATES = flags.DEFINE_integer("num_candidates", None, "Write up to this many candidate configs (drawn with "
                                       "--seed) instead of the ones the input holds.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the candidates drawn with --num_candidates.")
flags.mark_flag_as_required("input")
program.require_at_least(1, _NUM_CANDIDATES)
program.require_at_least(0, _SEED)


def main(argv):
  del argv
  proto = hlo_input.read_hlo_file(_INPUT.value)
  if _NUM_CANDIDATES.value is None:
    featurized = featurize.graphs_of_proto(proto, _KERNELS.value, _INPUT.value)
  else:
    featurized = candidates.candidate_graphs(proto, _NUM_CANDIDATES.value, _KERNELS.value, _SEED.value, _INPUT.value)
  output_dir = pathlib.Path(_OUTPUT_DIR.value)
  for graph in featurized:
    path = output_dir / f"{graph.graph_id.replace('/', '_')}.npz"
    npz.write_graph(path, graph)
    note = "" if graph.num_configs else " (nothing measured yet: rank its candidates, --num_candidates)"
    print(f"{path}  {graph.collection}  nodes={graph.node_feat.shape[0]}  edges={graph.edge_index.shape[0]}  "
          f"configs={graph.num_configs}{note}")


if __name__ == "__main__":
  program.run(main)
