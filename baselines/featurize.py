"""Featurizes XLA HLO protos into TpuGraphs npz files, one per module or kernel, named after it.

  python baselines/featurize.py --input module_tuning_data_layout.pb --output_dir out/featurized
  python baselines/featurize.py --input op_tuning_data.pb --output_dir out/featurized
  python baselines/featurize.py --input optimized_module.pb --kernels --output_dir out/kernels

The input is a ModuleTuningData (one layout graph), a TuningData (one tile graph per kernel) or a
bare HloModuleProto (an unlabelled program graph, or with --kernels one tile graph per fusion).
See tpu_graphs/hlo/featurize.py.
"""

import pathlib

from absl import flags

from baselines import program
from tpu_graphs.data import npz
from tpu_graphs.hlo import featurize

_INPUT = flags.DEFINE_string("input", None, "A .pb file: ModuleTuningData, TuningData or HloModuleProto.")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", "out/featurized", "Where the npz files go.")
_KERNELS = flags.DEFINE_bool("kernels", False, "For a bare HloModuleProto: one tile graph per fusion.")
flags.mark_flag_as_required("input")


def main(argv):
  del argv
  featurized = featurize.graphs_from_file(_INPUT.value, kernels=_KERNELS.value)
  output_dir = pathlib.Path(_OUTPUT_DIR.value)
  for graph in featurized:
    path = output_dir / f"{graph.graph_id.replace('/', '_')}.npz"
    npz.write_graph(path, graph)
    print(f"{path}  {graph.collection}  nodes={graph.node_feat.shape[0]}  edges={graph.edge_index.shape[0]}  "
          f"configs={graph.num_configs}")


if __name__ == "__main__":
  program.run(main)
