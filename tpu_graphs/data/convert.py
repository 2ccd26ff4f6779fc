"""npz directory -> sharded TFRecords of GraphTensors, resumable and byte-deterministic.

Output, per collection and split found under the input directory:

  <output_dir>/<kind>/<source>[/<search>]/<split>/
      structure-00000-of-00004.tfrecord.gz   one structure record per graph
      configs-00000-of-00004.tfrecord.gz     the chunk records of those graphs, graph by graph
      shard-00000-of-00004.json              what the shard holds; written last, marks it done
      manifest.json                          all shards: per-graph counts and checksums
      .convert.lock                          held by the converter writing here

Graphs are packed into shards in sorted file order, so the same input always yields the same
shards and bytes. Every file is written to a temporary name and renamed, and a shard counts as
finished only once its json exists, names the same sources and settings, and its record files
still have the sizes and sha256 it records: a rerun after a kill skips finished shards and redoes
the half-written one, and a record file damaged since (truncated, overwritten), or a shard json
edited since (its content_sha256), is written again rather than trusted. A second converter started on the same folder waits for the first to finish
(and then reuses its shards) instead of deleting its temporaries.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import pathlib
from typing import Callable, Optional

from absl import logging
import tensorflow as tf

from tpu_graphs.data import graphs, npz, records, storage

# 2: shard jsons record the sizes of their record files; 3: and the sha256 of their own content.
FORMAT_VERSION = 3
RECORD_COMPRESSION = "GZIP"
DEFAULT_SHARD_BYTES = 64 << 20


@dataclasses.dataclass(frozen=True)
class SourceGroup:
  """The npz files of one collection and split, in sorted order (pathlib.Paths, or URLs)."""
  collection: str
  split: str
  files: tuple[storage.PathLike, ...]

  @property
  def relative_dir(self) -> pathlib.Path:
    return pathlib.Path(*self.collection.split(":"), self.split)


def find_source_groups(input_dir) -> list[SourceGroup]:
  """Groups every *.npz below input_dir (a local folder or a URL) by (collection, split), inferred
  from the path.

  Checks what can be checked without reading a file, so that a conversion is refused before it
  writes anything: a folder without npz files, a path that is not a regular file, a file name that
  cannot be a graph id (graphs.check_graph_id).
  """
  if not storage.is_directory(input_dir):
    raise FileNotFoundError(f"{os.fspath(input_dir)}: input directory not found")
  grouped: dict[tuple[str, str], list[storage.PathLike]] = {}
  for path in storage.files_below(input_dir, "*.npz"):
    problem = storage.file_problem(path)
    if problem:
      raise graphs.GraphFileError(path, problem)
    graphs.check_graph_id(path, storage.base_name(path)[:-len(".npz")])
    collection, split = npz.infer_collection_and_split(path)
    if collection is None or split is None:
      raise graphs.GraphFileError(
          path, "cannot tell collection and split from the path; expected "
          ".../{tile/xla | layout/<source>/<search>}/{train,valid,test}/<graph>.npz")
    grouped.setdefault((collection, split), []).append(path)
  if not grouped:
    raise graphs.GraphFileError(input_dir, "no .npz files below this folder; expected "
                                ".../{tile/xla | layout/<source>/<search>}/{train,valid,test}/<graph>.npz")
  return [SourceGroup(c, s, tuple(f)) for (c, s), f in sorted(grouped.items())]


def plan_shards(files, shard_bytes: int = DEFAULT_SHARD_BYTES) -> list[list[storage.PathLike]]:
  """Contiguous runs of files of about shard_bytes (on-disk npz size) each, at least one file."""
  shards, current, size = [], [], 0
  for path in files:
    current.append(path)
    size += storage.file_size(path)
    if size >= shard_bytes:
      shards.append(current)
      current, size = [], 0
  if current:
    shards.append(current)
  return shards


def _shard_name(kind: str, index: int, count: int, suffix: str) -> str:
  return f"{kind}-{index:05d}-of-{count:05d}{suffix}"


def conversion_settings(configs_per_chunk: int, chunk_bytes: int) -> dict:
  """The settings a shard records: a finished shard is reused only under the same settings."""
  return {"configs_per_chunk": configs_per_chunk, "chunk_bytes": chunk_bytes}


@contextlib.contextmanager
def exclusive_shard_dir(shard_dir):
  """Holds shard_dir's lock (created with the folder) for the block; waits while another converter
  holds it. The lock is the kernel's (flock), so a killed converter never leaves it held.

  Only local folders have such a lock: on other file systems (gs://, ram://) the folder is created
  and one converter at a time must write it.
  """
  if not storage.is_local(shard_dir):
    tf.io.gfile.makedirs(shard_dir)
    yield
    return
  shard_dir = pathlib.Path(shard_dir)
  shard_dir.mkdir(parents=True, exist_ok=True)
  with storage.exclusive_lock(shard_dir / ".convert.lock", lambda: logging.warning(
      "%s: another conversion is writing here; waiting for it to finish", shard_dir)):
    yield


def prepare_shard_dir(shard_dir) -> None:
  """Creates shard_dir and removes the temporaries a conversion killed mid-write left there.

  Call it before any shard of the directory is written, never while one is being written.
  """
  storage.makedirs(shard_dir)
  for stale in tf.io.gfile.glob(storage.join(shard_dir, ".*.tmp")):
    tf.io.gfile.remove(stale)


def convert_shard(collection: str, split: str, files, index: int, count: int, shard_dir,
                  settings: dict,
                  on_graph: Callable[[], None] = lambda: None) -> tuple[dict, bool]:
  """Writes shard `index` of `count` from `files` unless it is finished; returns (its json, written).

  A shard is finished when its json names the same sources (file names, unique within a collection
  and split, with their sha256) and settings and its record files exist, wherever the input tree
  was rooted. on_graph is called after each graph written.
  """
  sources = [{"name": storage.base_name(p), "sha256": storage.sha256(p)} for p in files]
  json_path = storage.join(shard_dir, _shard_name("shard", index, count, ".json"))
  shard, problem = _finished_shard(json_path, settings, sources)
  if shard is not None:
    return shard, False
  if problem:
    logging.warning("%s: %s; converting the shard again", json_path, problem)
  return _write_shard(collection, split, files, shard_dir, index, count, settings, sources, on_graph), True


def write_manifest(shard_dir, collection: str, split: str, settings: dict,
                   shards: list[dict]) -> None:
  """Writes shard_dir/manifest.json listing `shards` (their jsons, in shard order)."""
  manifest = {"format_version": FORMAT_VERSION, "collection": collection, "split": split,
              "settings": settings, "compression": RECORD_COMPRESSION, "shards": shards}
  _write_json(storage.join(shard_dir, "manifest.json"), manifest)


def group_summary(group: SourceGroup, shard_dir, shards: list[dict]) -> dict:
  """One row of a ConversionSummary: what the shards of one collection and split hold."""
  return {
      "collection": group.collection, "split": group.split, "graphs": len(group.files),
      "shards": len(shards), "configs": sum(g["configs"] for s in shards for g in s["graphs"]),
      "record_bytes": sum(tf.io.gfile.stat(storage.join(shard_dir, s[k])).length for s in shards
                          for k in ("structure_file", "configs_file")),
      "npz_bytes": sum(storage.file_size(p) for p in group.files),
      "directory": os.fspath(shard_dir),
  }


def _write_shard(collection: str, split: str, files, shard_dir, index: int, count: int,
                 settings: dict, sources: list[dict], on_graph: Callable[[], None]) -> dict:
  """Writes one shard's two record files, then its json; returns the json's content."""
  options = tf.io.TFRecordOptions(compression_type=RECORD_COMPRESSION)
  structure_file = _shard_name("structure", index, count, ".tfrecord.gz")
  configs_file = _shard_name("configs", index, count, ".tfrecord.gz")
  structure_path, configs_path = storage.join(shard_dir, structure_file), storage.join(shard_dir, configs_file)
  entries = []
  with _record_writer(structure_path, options) as structure_writer, \
      _record_writer(configs_path, options) as configs_writer:
    for path, source in zip(files, sources):
      graph = npz.read_graph(path, collection=collection, split=split, stream_configs=True)
      structure, chunks = records.graph_records(graph, **settings)
      digest = hashlib.sha256(structure)
      structure_writer.write(structure)
      num_chunks = 0
      for chunk in chunks:
        configs_writer.write(chunk)
        digest.update(chunk)
        num_chunks += 1
      entries.append({
          "graph_id": graph.graph_id, "source": source["name"], "source_sha256": source["sha256"],
          "nodes": int(graph.node_feat.shape[0]), "edges": int(graph.edge_index.shape[0]),
          "configs": graph.num_configs, "chunks": num_chunks, "records_sha256": digest.hexdigest(),
      })
      on_graph()
  shard = {
      "format_version": FORMAT_VERSION, "collection": collection, "split": split,
      "settings": settings, "compression": RECORD_COMPRESSION,
      "structure_file": structure_file, "configs_file": configs_file,
      "structure_sha256": storage.sha256(structure_path), "configs_sha256": storage.sha256(configs_path),
      "structure_bytes": tf.io.gfile.stat(structure_path).length, "configs_bytes": tf.io.gfile.stat(configs_path).length,
      "graphs": entries,
  }
  shard["content_sha256"] = shard_content_sha256(shard)
  _write_json(storage.join(shard_dir, _shard_name("shard", index, count, ".json")), shard)
  return shard


@contextlib.contextmanager
def _record_writer(path, options: tf.io.TFRecordOptions):
  """A TFRecordWriter on a temporary beside `path`, renamed onto it if the block succeeds.

  TensorFlow reports a failed write (a full disk) as an OpError naming the temporary; it becomes an
  OSError naming `path`, like every other output error.
  """
  with storage.atomic_path(path) as temporary:
    try:
      with tf.io.TFRecordWriter(str(temporary), options) as writer:
        yield writer
    except tf.errors.OpError as error:
      if str(temporary) not in error.message:
        raise
      raise OSError(errno.EIO, error.message.rsplit("; ", 1)[-1], str(path)) from None


def _write_json(path, content) -> None:
  storage.write_text(path, json.dumps(content, indent=1, sort_keys=True) + "\n")


def shard_content_sha256(shard: dict) -> str:
  """sha256 of a shard json's content but this digest itself: counts the readers believe (configs,
  chunks) are checked, not only the record files (here on a rerun, in readers.read_manifest when
  records are read)."""
  content = {key: value for key, value in shard.items() if key != "content_sha256"}
  return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def _finished_shard(json_path, settings: dict, sources: list[dict]) -> tuple[Optional[dict], str]:
  """(the shard's json, "") if it was completed from the same sources and settings and its record
  files are intact; else (None, why not), why being "" when the shard was never finished."""
  try:
    shard = json.loads(storage.read_text(json_path))
  except FileNotFoundError:
    return None, ""
  except (OSError, ValueError, tf.errors.OpError) as error:
    return None, f"unreadable ({error})"
  if not isinstance(shard, dict) or shard.get("format_version") != FORMAT_VERSION or \
      shard.get("settings") != settings:
    return None, "written by another format version or with other settings"
  if shard.get("content_sha256") != shard_content_sha256(shard):
    return None, "edited since it was written (its content_sha256 differs)"
  if [(g["source"], g["source_sha256"]) for g in shard.get("graphs", [])] != [(s["name"], s["sha256"]) for s in sources]:
    return None, "its source files changed"
  for kind in ("structure", "configs"):
    name = shard[f"{kind}_file"]
    path = storage.join(os.path.dirname(json_path), name)
    problem = storage.file_problem(path)
    if problem:
      return None, f"{name}: {problem}"
    size = tf.io.gfile.stat(path).length
    if size != shard[f"{kind}_bytes"]:
      return None, f"{name} has {size} bytes, {shard[f'{kind}_bytes']} were written"
    if storage.sha256(path) != shard[f"{kind}_sha256"]:
      return None, f"{name} does not have the sha256 that was written"
  return shard, ""


@dataclasses.dataclass
class ConversionSummary:
  """What a conversion did, per collection and split."""
  groups: list[dict]
  graphs_written: int
  graphs_skipped: int


def convert_directory(input_dir, output_dir, configs_per_chunk: int = records.DEFAULT_CONFIGS_PER_CHUNK,
                      chunk_bytes: int = records.DEFAULT_CHUNK_BYTES, shard_bytes: int = DEFAULT_SHARD_BYTES,
                      progress: bool = True) -> ConversionSummary:
  """Converts every npz file below input_dir into sharded GraphTensor records under output_dir.

  input_dir and output_dir may be URLs of any file system tf.io.gfile serves (gs://, s3://, hdfs://,
  ram://).

  Raises GraphFileError for the first invalid input file, before or while writing its shard;
  shards finished before it stay valid and are skipped by the next run.
  """
  settings = conversion_settings(configs_per_chunk, chunk_bytes)
  groups = find_source_groups(input_dir)
  total = sum(len(g.files) for g in groups)
  bar = tf.keras.utils.Progbar(total, unit_name="graph", verbose=1 if progress else 0) if total else None
  done = written = skipped = 0
  summaries = []

  def advance():
    nonlocal done
    done += 1
    bar.update(done)

  for group in groups:
    shard_dir = storage.join(output_dir, str(group.relative_dir))
    with exclusive_shard_dir(shard_dir):
      prepare_shard_dir(shard_dir)
      planned = plan_shards(group.files, shard_bytes)
      shards = []
      for index, files in enumerate(planned):
        shard, was_written = convert_shard(group.collection, group.split, files, index, len(planned),
                                           shard_dir, settings, advance)
        if was_written:
          written += len(files)
        else:
          skipped += len(files)
          done += len(files)
          bar.update(done)
        shards.append(shard)
      write_manifest(shard_dir, group.collection, group.split, settings, shards)
    summaries.append(group_summary(group, shard_dir, shards))
  return ConversionSummary(groups=summaries, graphs_written=written, graphs_skipped=skipped)
