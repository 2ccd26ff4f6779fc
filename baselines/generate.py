"""Generates a TpuGraphs-format dataset (GENERATED data: cost-model labels, real XLA graphs).

  python baselines/generate.py --output_dir out/generated --scale small --seed 0
  bazel run //baselines:generate -- --output_dir ... --scale tiny

Compiles the model zoo with XLA, writes all five collections (see tpu_graphs/synth/generate.py)
with a progress bar, then prints the statistics table of what was written. The embedded dataset
is `--output_dir data/generated --scale small --seed 0`.
"""

import time

from absl import flags

from baselines import program
from tpu_graphs.data import statistics
from tpu_graphs.synth import generate, zoo

_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Root of the generated tree.", required=True)
_SCALE = flags.DEFINE_enum("scale", "small", sorted(generate.SCALES), "How much to generate.")
_SEED = flags.DEFINE_integer("seed", 0, "Generation seed.")
_ARCHITECTURES = flags.DEFINE_list("architectures", None, "Zoo architectures to generate (default all).")
_CONFIGS_PER_GRAPH = flags.DEFINE_integer(
    "configs_per_graph", None, f"Layout configs per graph (default: the scale's; at most {generate.MAX_CONFIGS}).")
program.require_at_least(1, _CONFIGS_PER_GRAPH)


def known_architectures(names) -> None:
  """Raises ValueError naming every architecture of `names` the zoo does not have."""
  unknown = [name for name in names or () if name not in zoo.ARCHITECTURES_BY_NAME]
  if unknown:
    raise ValueError(f"unknown architecture(s) {', '.join(map(repr, unknown))}; the zoo has "
                     f"{', '.join(sorted(zoo.ARCHITECTURES_BY_NAME))}")


program.check_flag(_ARCHITECTURES, known_architectures)


def main(argv):
  del argv
  start = time.time()
  files = generate.generate(_OUTPUT_DIR.value, _SCALE.value, _SEED.value, _ARCHITECTURES.value,
                            _CONFIGS_PER_GRAPH.value, program.progress_bar(start))
  print(f"Wrote {len(files)} GENERATED files to {_OUTPUT_DIR.value} in {time.time() - start:.0f}s\n")
  print(statistics.format_table(statistics.directory_statistics(f"{_OUTPUT_DIR.value}/npz")))


if __name__ == "__main__":
  program.run(main)
