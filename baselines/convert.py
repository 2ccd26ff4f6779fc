"""Converts a TpuGraphs npz tree into sharded GraphTensor records and prints a summary table.

  python baselines/convert.py                                   # the embedded generated data
  python baselines/convert.py --input_dir ../shared/tpugraphs_sample/npz --output_dir out/records
  bazel run //baselines:convert -- --input_dir ... --output_dir ...

Rerunning after an interruption skips finished shards. Both folders may be URLs (gs://, s3://,
hdfs://). See tpu_graphs/data/convert.py.
"""

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads
from absl import flags

from tpu_graphs.data import convert
from tpu_graphs.data import errors
from tpu_graphs.data import locations
from tpu_graphs.data import storage

_INPUT_DIR = flags.DEFINE_string("input_dir", str(locations.EMBEDDED_NPZ),
                                 "A TpuGraphs npz tree; defaults to the embedded generated data.")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", "out/records", "Where the records go.")
_RECORD_SIZES = program.define_record_size_flags()


def summary_table(summary: convert.ConversionSummary) -> str:
  """Markdown table of what a conversion holds, one row per collection and split."""
  lines = ["| collection | split | graphs | configs | shards | npz MB | records MB | records dir |",
           "|---|---|---:|---:|---:|---:|---:|---|"]
  for group in summary.groups:
    lines.append(
        f"| {group['collection']} | {group['split']} | {group['graphs']} | {group['configs']} | "
        f"{group['shards']} | {group['npz_bytes'] / 1e6:.2f} | {group['record_bytes'] / 1e6:.2f} | "
        f"{group['directory']} |")
  return "\n".join(lines)


def main(argv):
  del argv
  input_dir = _INPUT_DIR.value
  if not storage.is_directory(input_dir):
    raise errors.InputError(f"{input_dir}: input directory not found; pass --input_dir=<a TpuGraphs npz tree>")
  summary = convert.convert_directory(input_dir, _OUTPUT_DIR.value, **_RECORD_SIZES())
  print(f"\nConverted {summary.graphs_written} graphs, skipped {summary.graphs_skipped} already "
        f"converted, from {input_dir}\n")
  print(summary_table(summary))


if __name__ == "__main__":
  program.run(main)
