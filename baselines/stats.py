"""Prints the statistics table (graphs, nodes, edges, configs, nc/n per collection and split).

  python baselines/stats.py --data_dir data/generated/npz
  python baselines/stats.py --data_dir ../shared/tpugraphs_sample/npz

Every file is validated on the way (config features are streamed, not loaded).
"""

from absl import flags

from tpu_graphs import programs
from tpu_graphs.data import errors
from tpu_graphs.data import statistics

_DATA_DIR = flags.DEFINE_string("data_dir", "data/generated/npz", "A TpuGraphs npz tree.")


def main(argv):
  del argv
  rows = statistics.directory_statistics(_DATA_DIR.value)
  if not rows:
    raise errors.InputError(f"{_DATA_DIR.value}: no .npz files found")
  print(statistics.format_table(rows))


if __name__ == "__main__":
  programs.run(main)
