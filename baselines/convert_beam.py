"""Converts a TpuGraphs npz tree (or raw tuning protos) into GraphTensor records with Apache Beam.

The same output, byte for byte, as baselines/convert.py, for data that outgrows one process.
Arguments after a lone `--` are Beam pipeline options and choose the runner:

  python baselines/convert_beam.py --npz_dir ../shared/tpugraphs_sample/npz --output_dir out/records \\
      -- --runner=DirectRunner --direct_num_workers=4 --direct_running_mode=multi_processing
  python baselines/convert_beam.py --input_pb_glob '../shared/tpugraphs_sample/pb/official_testdata/*.pb' \\
      --npz_dir out/featurized --output_dir out/records -- --direct_num_workers=2
  bazel run //baselines:convert_beam -- --npz_dir ... --output_dir ... -- --runner=FlinkRunner ...

With --input_pb_glob, each ModuleTuningData / TuningData / HloModuleProto file is featurized into
--npz_dir first (see tpu_graphs/hlo/featurize.py), then the whole tree is converted. --output_dir
may be a URL (gs://, s3://, hdfs://); with several machines, --npz_dir must be on a file system
every worker mounts at that path.
See tpu_graphs/beam_pipeline.py and the README's "Scale-out: Beam".
"""

from absl import flags
from apache_beam.options import pipeline_options

from tpu_graphs import beam_pipeline
from tpu_graphs import programs
from tpu_graphs.data import convert, graphs, records

_NPZ_DIR = flags.DEFINE_string(
    "npz_dir", None, "The TpuGraphs npz tree to convert; with --input_pb_glob, where the featurized npz "
    "files are written first.")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", "out/records", "Where the records go.")
_INPUT_PB_GLOB = flags.DEFINE_string(
    "input_pb_glob", None, "Raw protos to featurize first (ModuleTuningData, TuningData or HloModuleProto).")
_LABELLED_SPLIT = flags.DEFINE_enum(
    "labelled_split", "train", graphs.SPLITS, "The split of graphs featurized from measured tuning data.")
_CONFIGS_PER_CHUNK = flags.DEFINE_integer(
    "configs_per_chunk", records.DEFAULT_CONFIGS_PER_CHUNK, "Most configs per config-chunk record.")
_CHUNK_KB = flags.DEFINE_integer("chunk_kb", records.DEFAULT_CHUNK_BYTES >> 10,
                                 "Most kilobytes of config features per config-chunk record.")
_SHARD_MB = flags.DEFINE_integer("shard_mb", convert.DEFAULT_SHARD_BYTES >> 20,
                                 "Target npz megabytes per shard.")
flags.mark_flag_as_required("npz_dir")
programs.require_at_least(1, _CONFIGS_PER_CHUNK, _CHUNK_KB)
programs.require_at_least(0, _SHARD_MB)


def main(argv):
  options = pipeline_options.PipelineOptions(argv[1:])
  summary = beam_pipeline.run_conversion(
      _NPZ_DIR.value, _OUTPUT_DIR.value, options, input_pb_glob=_INPUT_PB_GLOB.value,
      labelled_split=_LABELLED_SPLIT.value, configs_per_chunk=_CONFIGS_PER_CHUNK.value,
      chunk_bytes=_CHUNK_KB.value << 10, shard_bytes=_SHARD_MB.value << 20)
  print(f"\nConverted {summary.graphs_written} graphs, skipped {summary.graphs_skipped} already converted, "
        f"from {_NPZ_DIR.value}")
  for group in summary.groups:
    print(f"  {group['collection']} {group['split']}: {group['graphs']} graphs, {group['configs']} configs, "
          f"{group['shards']} shards, {group['record_bytes'] / 1e6:.2f} MB in {group['directory']}")


if __name__ == "__main__":
  programs.run(main)
