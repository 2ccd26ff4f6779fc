"""Duplicate layout configs: configs with identical node_config_feat rows become one, runtime averaged.

Layout collections hold many configs that set every configurable op identically (the random
search revisits them, and some config dimensions do not reach the features); their runtimes
differ only by measurement noise, so ranking them against each other teaches nothing. Training
files are rewritten with one config per distinct feature row, in order of first occurrence, with
the mean runtime of its copies. Only for splits with runtimes: predictions must rank every
config of a test file, so evaluation and test files are never deduplicated.

Both passes stream node_config_feat in chunks, so memory stays at one chunk plus one 16-byte
digest per config whatever the number of configs.
"""

from __future__ import annotations

import hashlib

import numpy as np

from tpu_graphs.data import graphs, npz, records, storage


def duplicate_groups(graph: graphs.LayoutGraph, configs_per_chunk: int = 1000) -> np.ndarray:
  """(c,) int64: for every config, the index of the first config with identical features."""
  first_of_digest: dict[bytes, int] = {}
  first = np.empty(graph.num_configs, np.int64)
  for start, rows in records.config_chunks(graph, configs_per_chunk):
    rows = np.ascontiguousarray(rows)
    for offset in range(rows.shape[0]):
      digest = hashlib.blake2b(rows[offset].tobytes(), digest_size=16).digest()
      first[start + offset] = first_of_digest.setdefault(digest, start + offset)
  return first


def write_deduplicated(graph: graphs.LayoutGraph, path: storage.PathLike,
                       configs_per_chunk: int = 1000) -> tuple[int, int]:
  """Writes `graph` with duplicate configs merged to the npz `path`; returns (configs before, after).

  Raises ValueError for a graph without runtimes (test split): its configs must all be ranked.
  """
  if graph.split == "test" or not np.all(graph.config_runtime > 0):
    raise ValueError(f"{graph.graph_id}: configs without runtimes cannot be deduplicated (split {graph.split})")
  first = duplicate_groups(graph, configs_per_chunk)
  kept = np.flatnonzero(first == np.arange(first.size))
  group = np.searchsorted(kept, first)  # position of each config's group among the kept configs
  total = np.bincount(group, weights=graph.config_runtime.astype(np.float64), minlength=kept.size)
  runtime = np.rint(total / np.bincount(group, minlength=kept.size)).astype(np.int64)
  keep_mask = first == np.arange(first.size)

  def kept_rows():
    for start, rows in records.config_chunks(graph, configs_per_chunk):
      yield rows[keep_mask[start:start + rows.shape[0]]]

  feature_shape = (kept.size,) + tuple(graph.node_config_feat.shape[1:])
  npz.write_npz(path, {
      "node_feat": graph.node_feat, "node_opcode": graph.node_opcode, "edge_index": graph.edge_index,
      "node_config_ids": graph.node_config_ids,
      "node_config_feat": (feature_shape, np.float32, kept_rows),
      "config_runtime": runtime, "node_splits": graph.node_splits})
  return first.size, kept.size


def deduplicate_directory(input_dir, output_dir) -> dict[str, tuple[int, int]]:
  """Deduplicates every layout npz below input_dir into the same relative path below output_dir.

  Either may be a URL of any file system tf.io.gfile serves. Files already present in output_dir
  are kept (reruns resume). Returns {relative path: (before, after)} for the files written.
  """
  counts = {}
  for source in storage.files_below(input_dir, "*.npz"):
    relative = storage.relative_path(source, input_dir)
    target = storage.join(output_dir, relative)
    if storage.exists(target):
      continue
    graph = npz.read_graph(source, stream_configs=True)
    if not isinstance(graph, graphs.LayoutGraph):
      raise graphs.GraphFileError(source, "is not a layout graph; only layout configs are deduplicated")
    counts[relative] = write_deduplicated(graph, target)
  return counts
