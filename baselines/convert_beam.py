"""Converts a TpuGraphs npz tree (or raw tuning protos) into GraphTensor records with Apache Beam.

The same output, byte for byte, as baselines/convert.py, for data that outgrows one process.
Arguments after a lone `--` are Beam pipeline options and choose the runner:

  python baselines/convert_beam.py --input_dir ../shared/tpugraphs_sample/npz --output_dir out/records \\
      -- --runner=DirectRunner --direct_num_workers=4 --direct_running_mode=multi_processing
  python baselines/convert_beam.py --input_pb_glob '../shared/tpugraphs_sample/pb/official_testdata/*.pb' \\
      --input_dir out/featurized --output_dir out/records -- --direct_num_workers=2
  bazel run //baselines:convert_beam -- --input_dir ... --output_dir ... -- --runner=FlinkRunner ...

With --input_pb_glob, each ModuleTuningData / TuningData / HloModuleProto file is featurized into
--input_dir first (see tpu_graphs/hlo/featurize.py), then the whole tree is converted. --input_dir,
--input_pb_glob and --output_dir may be URLs (gs://, s3://, hdfs://); with several machines, a local
--input_dir must be on a file system every worker mounts at that path.
See tpu_graphs/data/beam_pipeline.py and the README's "Scale-out: Beam".
"""

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads
from absl import flags

from tpu_graphs.data import beam_pipeline, graphs
from tpu_graphs.hlo import featurize

_INPUT_DIR = flags.DEFINE_string(
    "input_dir", None, "The TpuGraphs npz tree to convert; with --input_pb_glob, where the featurized npz "
    "files are written first.")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", "out/records", "Where the records go.")
_INPUT_PB_GLOB = flags.DEFINE_string(
    "input_pb_glob", None, "Raw protos to featurize first (ModuleTuningData, TuningData or HloModuleProto).")
_LABELLED_SPLIT = flags.DEFINE_enum(
    "labelled_split", "train", graphs.SPLITS, "The split of graphs featurized from measured tuning data.")
_RECORD_SIZES = program.define_record_size_flags()
flags.mark_flag_as_required("input_dir")


def main(argv):
  options = beam_pipeline.checked_options(argv[1:])
  summary = beam_pipeline.run_conversion(
      _INPUT_DIR.value, _OUTPUT_DIR.value, options, input_pb_glob=_INPUT_PB_GLOB.value,
      featurize_file=featurize.graphs_from_file, labelled_split=_LABELLED_SPLIT.value, **_RECORD_SIZES())
  print(f"\nConverted {summary.graphs_written} graphs, skipped {summary.graphs_skipped} already converted, "
        f"from {_INPUT_DIR.value}")
  for group in summary.groups:
    print(f"  {group['collection']} {group['split']}: {group['graphs']} graphs, {group['configs']} configs, "
          f"{group['shards']} shards, {group['record_bytes'] / 1e6:.2f} MB in {group['directory']}")


if __name__ == "__main__":
  program.run(main)
