"""The conversion as an Apache Beam pipeline: raw tuning protos -> npz files -> GraphTensor records.

For data that outgrows one process. It writes the same tree as
`tpu_graphs.data.convert.convert_directory`, byte for byte (same shards, jsons and manifests), by
calling the converter's own functions on Beam workers:

  pb files --Reshuffle--> featurize one file per element (graphs_from_file) -> npz files
  npz dir  --plan (one element, as convert_directory plans)--> planned shards
           --Reshuffle--> convert_shard, one shard per element, in parallel
           --GroupByKey (collection, split)--> manifest.json

The featurized npz files go to npz_dir/<collection path>/<split>/<graph id>.npz, so the npz
tree may also hold files from elsewhere; all of it is converted. Finished shards are skipped on
a rerun, as by convert_directory. The npz directory, the protos and the output directory may be
URLs of any file system tf.io.gfile serves (gs://, s3://, hdfs://; ram:// in tests), written
atomically (tpu_graphs/data/storage.py); with several machines (Dataflow, Flink, Spark) a local
npz directory must be a file system every worker mounts at that path.

The runner is whatever the PipelineOptions say: DirectRunner with `--direct_num_workers` and
`--direct_running_mode=multi_processing` on one machine, or any other Beam runner.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import pathlib
from typing import Callable, Optional, Sequence

import apache_beam as beam
from apache_beam.metrics import metric
from apache_beam import runners
from apache_beam.options import pipeline_options

from tpu_graphs.data import convert, errors, graphs, npz, records, storage

METRICS_NAMESPACE = "tpu_graphs.conversion"
_GRAPHS_WRITTEN = metric.Metrics.counter(METRICS_NAMESPACE, "graphs_written")
_GRAPHS_SKIPPED = metric.Metrics.counter(METRICS_NAMESPACE, "graphs_skipped")
_GRAPHS_FEATURIZED = metric.Metrics.counter(METRICS_NAMESPACE, "graphs_featurized")


@dataclasses.dataclass(frozen=True)
class PlannedShard:
  """Shard `index` of `count` of one collection and split: its npz files (paths or URLs), in order,
  and its folder relative to the output directory."""
  collection: str
  split: str
  relative_dir: pathlib.Path
  index: int
  count: int
  files: tuple[storage.PathLike, ...]


# A raw proto file's path -> its graphs: tpu_graphs.hlo.featurize.graphs_from_file, passed in by
# the caller because data/ comes before hlo/ in the pipeline and imports nothing from it.
FeaturizeFile = Callable[[str], Sequence[graphs.Graph]]


def featurize_to_npz(pb_path: str, npz_dir: str, labelled_split: str,
                     featurize_file: FeaturizeFile) -> list[tuple[str, str]]:
  """Featurizes one raw proto file into npz files in npz_dir's tree; returns [(npz path, pb_path)].

  Graphs measured on hardware (from ModuleTuningData / TuningData) go to `labelled_split`;
  unlabelled ones (bare modules) to the split featurize gives them ('test').
  """
  written = []
  for graph in featurize_file(pb_path):
    split = graph.split or labelled_split
    folder = storage.join(npz_dir, str(convert.SourceGroup(graph.collection, split, ()).relative_dir))
    path = storage.join(folder, f"{graph.graph_id.replace('/', '_')}.npz")
    npz.write_graph(path, graph)
    _GRAPHS_FEATURIZED.inc()
    written.append((path, pb_path))
  return written


def _require_distinct_outputs(featurized: list[tuple[str, str]]) -> None:
  """Raises GraphFileError when two protos gave the same npz file (one graph would be lost)."""
  first_source = {}
  for npz_path, pb_path in featurized:
    if npz_path in first_source:
      raise graphs.GraphFileError(pb_path, f"its graph {npz_path} was also featurized from "
                                    f"{first_source[npz_path]}; graph ids must be unique")
    first_source[npz_path] = pb_path


def plan_conversion(npz_dir: str, output_dir: str, shard_bytes: int) -> list[PlannedShard]:
  """Every shard convert_directory would write for npz_dir, with its output folder prepared.

  Runs as one element, before any shard is written, so removing stale temporaries is safe.
  """
  planned = []
  for group in convert.find_source_groups(npz_dir):
    shard_dir = storage.join(output_dir, str(group.relative_dir))
    with convert.exclusive_shard_dir(shard_dir):  # not while convert.py writes there
      convert.prepare_shard_dir(shard_dir)
    shards = convert.plan_shards(group.files, shard_bytes)
    planned += [PlannedShard(group.collection, group.split, group.relative_dir, index, len(shards), tuple(files))
                for index, files in enumerate(shards)]
  return planned


def _convert_planned_shard(shard: PlannedShard, output_dir: str, settings: dict):
  """((collection, split, relative dir), (index, shard json)) after writing or reusing the shard."""
  content, written = convert.convert_shard(shard.collection, shard.split, shard.files, shard.index, shard.count,
                                           storage.join(output_dir, str(shard.relative_dir)), settings,
                                           on_graph=_GRAPHS_WRITTEN.inc)
  if not written:
    _GRAPHS_SKIPPED.inc(len(shard.files))
  return (shard.collection, shard.split, str(shard.relative_dir)), (shard.index, content)


def _write_group_manifest(keyed_shards, output_dir: str, settings: dict) -> None:
  (collection, split, relative_dir), indexed = keyed_shards
  shards = [content for _, content in sorted(indexed, key=lambda pair: pair[0])]
  convert.write_manifest(storage.join(output_dir, relative_dir), collection, split, settings, shards)


def add_conversion(pipeline: beam.Pipeline, npz_dir, output_dir, input_pb_glob: Optional[str] = None,
                   featurize_file: Optional[FeaturizeFile] = None, labelled_split: str = "train",
                   configs_per_chunk: int = records.DEFAULT_CONFIGS_PER_CHUNK,
                   chunk_bytes: int = records.DEFAULT_CHUNK_BYTES,
                   shard_bytes: int = convert.DEFAULT_SHARD_BYTES) -> None:
  """Adds the conversion of npz_dir (after featurizing input_pb_glob's files into it with
  `featurize_file`) to pipeline.

  Raises (here, before anything runs) FileNotFoundError when there is nothing to read and
  ValueError for an unknown labelled_split or protos without a featurize_file; bad input files fail the pipeline's run with the
  converter's or featurizer's error, which names the file.
  """
  npz_dir, output_dir = (os.path.abspath(d) if storage.is_local(d) else os.fspath(d) for d in (npz_dir, output_dir))
  settings = convert.conversion_settings(configs_per_chunk, chunk_bytes)
  if labelled_split not in graphs.SPLITS:
    raise ValueError(f"labelled_split {labelled_split!r} is not one of {graphs.SPLITS}")
  if input_pb_glob:
    if featurize_file is None:
      raise ValueError(f"{input_pb_glob}: protos to featurize, but no featurize_file to read them with")
    pb_paths = [os.path.abspath(p) if storage.is_local(p) else p for p in storage.glob(input_pb_glob)]
    if not pb_paths:
      raise FileNotFoundError(f"{input_pb_glob}: no file matches")
    start = (pipeline
             | "ListProtos" >> beam.Create(pb_paths)
             | "SpreadProtos" >> beam.Reshuffle()
             | "Featurize" >> beam.FlatMap(featurize_to_npz, npz_dir, labelled_split, featurize_file)
             | "AllFeaturized" >> beam.combiners.ToList()
             | "CheckDistinct" >> beam.Map(_require_distinct_outputs))
  else:
    if not storage.is_directory(npz_dir):
      raise FileNotFoundError(f"{npz_dir}: input directory not found")
    start = pipeline | "Start" >> beam.Create([None])
  _ = (start
       | "PlanShards" >> beam.FlatMap(lambda _: plan_conversion(npz_dir, output_dir, shard_bytes))
       | "SpreadShards" >> beam.Reshuffle()
       | "ConvertShard" >> beam.Map(_convert_planned_shard, output_dir, settings)
       | "ShardsByGroup" >> beam.GroupByKey()
       | "WriteManifest" >> beam.Map(_write_group_manifest, output_dir, settings))


class PipelineOptionError(errors.InputError):
  """A Beam pipeline option (after `--`) that Beam does not know or whose value it refuses."""


def checked_options(arguments: list[str]) -> pipeline_options.PipelineOptions:
  """PipelineOptions of command-line `arguments`, refused with PipelineOptionError before any work
  when one is unknown (Beam would drop it with a warning), has a bad value (Beam's parser would
  print its whole usage and exit) or names an unknown runner."""
  options = pipeline_options.PipelineOptions(arguments)
  usage = io.StringIO()
  try:
    with contextlib.redirect_stderr(usage):
      known = options.get_all_options(retain_unknown_options=False)
      given = options.get_all_options(retain_unknown_options=True)
  except SystemExit:
    problem = usage.getvalue().strip().splitlines()[-1].split("error: ", 1)[-1]
    raise PipelineOptionError(f"Beam pipeline options {' '.join(arguments)!r}: {problem}") from None
  unknown = sorted(set(given) - set(known))
  if unknown:
    raise PipelineOptionError(f"Beam pipeline options: unknown option(s) {', '.join('--' + u for u in unknown)}")
  try:
    runners.create_runner(known["runner"] or "DirectRunner")
  except ValueError as error:
    raise PipelineOptionError(f"Beam pipeline options: --runner: {str(error).split('. ')[0]}") from None
  return options


def run_conversion(npz_dir, output_dir, options: pipeline_options.PipelineOptions, **conversion) -> convert.ConversionSummary:
  """Runs add_conversion's pipeline under `options` and waits; summarizes from the manifests.

  `conversion` holds add_conversion's keyword arguments. graphs_written / graphs_skipped come
  from the pipeline's counters.
  """
  pipeline = beam.Pipeline(options=options)
  add_conversion(pipeline, npz_dir, output_dir, **conversion)
  result = pipeline.run()
  result.wait_until_finish()
  counts = {}
  for counter in result.metrics().query(metric.MetricsFilter().with_namespace(METRICS_NAMESPACE))["counters"]:
    value = counter.committed if counter.committed is not None else counter.attempted
    counts[counter.key.metric.name] = counts.get(counter.key.metric.name, 0) + value
  summaries = []
  for group in convert.find_source_groups(npz_dir):
    shard_dir = storage.join(output_dir, str(group.relative_dir))
    shards = json.loads(storage.read_text(storage.join(shard_dir, "manifest.json")))["shards"]
    summaries.append(convert.group_summary(group, shard_dir, shards))
  return convert.ConversionSummary(groups=summaries, graphs_written=counts.get("graphs_written", 0),
                                   graphs_skipped=counts.get("graphs_skipped", 0))
