"""How generated layout search compares with real: baselines/stats.py's layout-search table of the
embedded generated data beside that of the real sample.

  python benchmarks/research/layout_search.py [--data_dir data/generated/npz] [--out benchmarks/results/layout_search.md]

Per layout collection and split, medians over files of: distinct layouts per configurable op,
how often an op takes its most common layout, configurable ops per group of ops the configs
move in lockstep (and, summed over files, how many such groups there are beside how many the
alike-op rule makes), the runtime spread, the Kendall tau of runtime against the number of ops off
their modal layout, the largest single-op effect and the per-node-layout ridge tau (baselines/stats.py says how each is computed). The real sample is
read from ../shared/tpugraphs_sample (or $TPUGRAPHS_SAMPLE_DIR).
"""

import subprocess
import sys

from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from benchmarks import benchmark_results
from tpu_graphs.data import errors
from tpu_graphs.data import locations

_DATA_DIR = flags.DEFINE_string("data_dir", str(locations.EMBEDDED_NPZ), "A generated npz tree.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("layout_search")), "Markdown table to write.")
_TABLE_HEADER = "| collection"


def layout_search_table(data_dir) -> str:
  """The layout-search table baselines/stats.py prints for `data_dir` (its last table)."""
  printed = subprocess.run([sys.executable, str(locations.REPOSITORY / "baselines" / "stats.py"),
                            f"--data_dir={data_dir}"], capture_output=True, text=True, check=True).stdout
  return printed[printed.rindex(_TABLE_HEADER):]


def main(argv):
  del argv
  sample = locations.sample_path("npz")
  if not sample.is_dir():
    raise errors.InputError(locations.missing_sample(sample))
  body = (f"Generated ({benchmark_results.relative_to_repository(_DATA_DIR.value)}):\n\n"
          f"{layout_search_table(_DATA_DIR.value)}\nReal sample:\n\n{layout_search_table(sample)}")
  benchmark_results.write("research/layout_search", "Layout search of generated data against the real sample", body,
                          _OUT.value)


if __name__ == "__main__":
  program.run(main)
