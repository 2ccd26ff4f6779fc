"""Typed, validated TpuGraphs graphs: the one in-memory form every later stage reads.

A TpuGraphs file holds one graph and all measured compiler configurations for it. Two
collections share the node and edge arrays and differ in how configurations are described:

* tile: one fused kernel; each config is a graph-level tile size, `config_feat` (c, 24), and the
  runtime to rank is `config_runtime / config_runtime_normalizers`.
* layout: one whole program; each config sets a layout on every configurable node,
  `node_config_feat` (c, nc, 18) for the nodes `node_config_ids` (nc,).

Edges follow the dataset's convention: `edge_index[i] = [consumer, producer]`.

Validation happens here, once, with errors that name the file, so nothing downstream (TensorFlow
in particular) ever sees malformed arrays.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional, Sequence, Union

from absl import logging
import numpy as np

from tpu_graphs.data import errors, storage

NODE_FEATURE_WIDTH = 140
TILE_CONFIG_FEATURE_WIDTH = 24
LAYOUT_CONFIG_FEATURE_WIDTH = 18
SPLITS = ("train", "valid", "test")
# node_config_feat holds minor-to-major dimension indices of up to 6 dimensions, -1 where unset.
LAYOUT_VALUE_RANGE = (-1, 5)
# A graph id ends the ID `<collection>:<graph id>` of its prediction rows, which is split at ':'.
# (Kaggle's stricter rule binds only a submission: baselines/submission.py.)
GRAPH_ID_PATTERN = re.compile(r"[^:]+")
_FLOAT32_MAX = float(np.finfo(np.float32).max)
# The five collections of the release, in the order submissions and tables list them.
COLLECTIONS = ("tile:xla", "layout:xla:default", "layout:xla:random", "layout:nlp:default", "layout:nlp:random")


class GraphFileError(errors.InputError):
  """An input that gives no valid TpuGraphs graph: an npz file that is unreadable or violates the
  format, or an HLO proto (or module) that cannot be featurized; the message names the file (or
  module) and the problem."""

  def __init__(self, path, problem: str):
    self.path = str(path)
    self.problem = problem
    super().__init__(f"{self.path}: {problem}")


@dataclasses.dataclass(frozen=True)
class _ConfiguredGraph:
  """What both collections share: the graph's identity, its ops and their data flow."""

  graph_id: str
  collection: str
  split: Optional[str]
  node_feat: np.ndarray
  node_opcode: np.ndarray
  edge_index: np.ndarray

  @property
  def num_configs(self) -> int:
    return int(self.config_runtime.shape[0])  # each collection defines config_runtime


@dataclasses.dataclass(frozen=True)
class TileGraph(_ConfiguredGraph):
  """One fused kernel and its tile-size configurations.

  Shapes: node_feat (n, 140) float32; node_opcode (n,) uint8; edge_index (m, 2) int64;
  config_feat (c, 24) float32; config_runtime (c,) int64; config_runtime_normalizers (c,) int64.
  """

  config_feat: np.ndarray
  config_runtime: np.ndarray
  config_runtime_normalizers: np.ndarray

  def runtimes(self) -> np.ndarray:
    """Normalized runtimes (c,) float64: the quantity tile models rank."""
    return self.config_runtime / self.config_runtime_normalizers


@dataclasses.dataclass(frozen=True)
class LayoutGraph(_ConfiguredGraph):
  """One whole program and its per-node layout configurations.

  Shapes: node_feat (n, 140) float32; node_opcode (n,) uint8; edge_index (m, 2) int64;
  node_config_ids (nc,) int64; node_config_feat (c, nc, 18) float32 (-1 pads unset dims);
  config_runtime (c,) int64; node_splits (1, k) int64, computation boundaries as node offsets.
  """

  node_config_ids: np.ndarray
  node_config_feat: np.ndarray
  config_runtime: np.ndarray
  node_splits: np.ndarray

  def runtimes(self) -> np.ndarray:
    """Runtimes (c,) float64: the quantity layout models rank."""
    return self.config_runtime.astype(np.float64)


Graph = Union[TileGraph, LayoutGraph]

# The arrays of each collection, with the dtype each is held in and its rank.
TILE_ARRAYS = {
    "node_feat": (np.float32, 2),
    "node_opcode": (np.uint8, 1),
    "edge_index": (np.int64, 2),
    "config_feat": (np.float32, 2),
    "config_runtime": (np.int64, 1),
    "config_runtime_normalizers": (np.int64, 1),
}
LAYOUT_ARRAYS = {
    "node_feat": (np.float32, 2),
    "node_opcode": (np.uint8, 1),
    "edge_index": (np.int64, 2),
    "node_config_ids": (np.int64, 1),
    "node_config_feat": (np.float32, 3),
    "config_runtime": (np.int64, 1),
    "node_splits": (np.int64, 2),
}


def graph_arrays(graph: Graph) -> dict[str, np.ndarray]:
  """The graph's arrays keyed by their npz names."""
  names = TILE_ARRAYS if isinstance(graph, TileGraph) else LAYOUT_ARRAYS
  return {name: getattr(graph, name) for name in names}


# Collection kind -> how many names follow it in a collection name (tile:xla, layout:<source>:<search>).
_NAMES_AFTER_KIND = {"tile": 1, "layout": 2}


def collection_kind(collection: str) -> str:
  """'tile' or 'layout' from a collection name such as 'layout:nlp:random'."""
  kind = collection.split(":")[0]
  if kind not in _NAMES_AFTER_KIND:
    raise ValueError(f"unknown collection {collection!r}: expected tile:... or layout:...")
  return kind


def collection_of_folders(folders: Sequence[str]) -> Optional[str]:
  """'layout:nlp:random' from the folders of a path such as .../layout/nlp/random/test (the last
  collection they name in full); None if they name none."""
  for i in range(len(folders) - 1, -1, -1):
    names = _NAMES_AFTER_KIND.get(folders[i])
    if names is not None and i + names < len(folders):
      return ":".join(folders[i:i + names + 1])
  return None


def collection_directory(root, collection: str):
  """Where a collection's splits lie under an npz (or records) tree: <root>/tile/xla or
  <root>/layout/<source>/<search>; a pathlib.Path under a local root, a string under a URL."""
  return storage.as_path(storage.join(root, *collection.split(":")))


def check_values(path, name: str, values: np.ndarray) -> None:
  """Raises GraphFileError where the values of array `name` (whole, or a leading-axis chunk of it)
  cannot be held as the format says: NaN or infinite floats, floats beyond float32's range (a
  float64 file would otherwise become inf in silence), layout values that are not dimension
  indices in LAYOUT_VALUE_RANGE. The one check of values, for loaded and streamed arrays alike."""
  if values.dtype.kind != "f" or not values.size:
    return
  if not np.all(np.isfinite(values)):
    raise GraphFileError(path, f"'{name}' holds NaN or infinite values")
  largest = float(np.max(np.abs(values)))
  if largest > _FLOAT32_MAX:
    raise GraphFileError(path, f"'{name}' holds {largest:g}, beyond float32's range (the model's dtype)")
  if name == "node_config_feat":
    low, high = LAYOUT_VALUE_RANGE
    bad = (values < low) | (values > high) | (values != np.round(values))
    if bad.any():
      index = tuple(int(i) for i in np.argwhere(bad)[0])
      raise GraphFileError(path, f"'{name}'{list(index)} = {values[index]:g} is not a layout value (an integer "
                           f"dimension index in [{low}, {high}], -1 unset)")


def check_graph_id(path, graph_id: str) -> None:
  """Raises GraphFileError if `graph_id` (the file's name) cannot end the ID of a prediction row."""
  if not GRAPH_ID_PATTERN.fullmatch(graph_id):
    raise GraphFileError(path, f"graph id {graph_id!r} (the file name) cannot end the ID '<collection>:<graph id>' "
                         "of its prediction rows, which is split at ':'; rename the file without ':'")


def _cast(path, name: str, array: np.ndarray, dtype, rank: int) -> np.ndarray:
  """Checks rank and kind, then converts to the canonical dtype without losing values.

  An array streamed from disk (anything with `iter_chunks`, see npz.StreamedArray) is checked by
  its header only; its values are checked chunk by chunk as they are read.
  """
  if hasattr(array, "iter_chunks"):
    if array.ndim != rank or np.dtype(array.dtype) != np.dtype(dtype):
      raise GraphFileError(
          path, f"'{name}' is {array.dtype} of rank {array.ndim}, expected {np.dtype(dtype).name} of rank {rank}")
    return array
  array = np.asarray(array)
  if array.ndim != rank:
    raise GraphFileError(path, f"'{name}' has rank {array.ndim} (shape {array.shape}), expected {rank}")
  if np.issubdtype(dtype, np.integer):
    if not np.issubdtype(array.dtype, np.integer):
      raise GraphFileError(path, f"'{name}' has dtype {array.dtype}, expected an integer type")
    info = np.iinfo(dtype)
    if array.size and (array.min() < info.min or array.max() > info.max):
      raise GraphFileError(
          path, f"'{name}' holds values in [{array.min()}, {array.max()}], outside {np.dtype(dtype).name}")
  else:
    if not np.issubdtype(array.dtype, np.floating):
      raise GraphFileError(path, f"'{name}' has dtype {array.dtype}, expected a float type")
    check_values(path, name, array)
  return np.ascontiguousarray(array, dtype=dtype)


def _check_width(path, name: str, array: np.ndarray, width: int) -> None:
  if array.shape[-1] != width:
    raise GraphFileError(path, f"'{name}' has width {array.shape[-1]} (shape {array.shape}), expected {width}")


def _check_common(path, arrays: dict[str, np.ndarray]) -> int:
  """Checks node and edge arrays shared by both collections; returns the node count."""
  node_feat, node_opcode, edge_index = arrays["node_feat"], arrays["node_opcode"], arrays["edge_index"]
  _check_width(path, "node_feat", node_feat, NODE_FEATURE_WIDTH)
  num_nodes = node_feat.shape[0]
  if num_nodes == 0:
    raise GraphFileError(path, "the graph has no nodes")
  if node_opcode.shape[0] != num_nodes:
    raise GraphFileError(path, f"'node_opcode' has {node_opcode.shape[0]} entries for {num_nodes} nodes")
  _check_width(path, "edge_index", edge_index, 2)
  if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
    bad = int(np.argmax((edge_index < 0).any(1) | (edge_index >= num_nodes).any(1)))
    raise GraphFileError(
        path, f"'edge_index' row {bad} = {edge_index[bad].tolist()} is out of range for {num_nodes} nodes")
  return num_nodes


def _check_runtimes(path, name: str, runtimes: np.ndarray, split: Optional[str]) -> None:
  if split != "test" and runtimes.size and runtimes.min() < 0:
    raise GraphFileError(
        path, f"'{name}' has a negative value {runtimes.min()} at config {int(np.argmin(runtimes))} "
        f"in labelled split {split or '(unknown)'}")


def _check_measured(path, runtimes: np.ndarray, split: Optional[str]) -> None:
  """A labelled graph whose runtimes are all 0 was never measured: refused for training (every
  list would be masked); in other labelled splits said here and left out of the metrics
  (train/scoring.py counts it). A labelled graph with some runtimes 0 is refused in any split:
  a measured runtime is positive, and the slowdown metrics divide by the best one."""
  if split in (None, "test"):
    return
  if (runtimes > 0).any():
    if (runtimes == 0).any():  # the slowdown metrics divide by the best runtime
      raise GraphFileError(path, f"'config_runtime' is 0 at config {int(np.argmin(runtimes))} "
                           f"({int((runtimes == 0).sum())} of {runtimes.size} configs) in labelled split {split}, "
                           "while others are measured; a measured runtime is positive")
    return
  if split == "train":
    raise GraphFileError(path, "'config_runtime' is all 0 (nothing measured) in the training split; "
                         "remove the file or move it to test/")
  logging.warning("%s: 'config_runtime' is all 0 (nothing measured) in split %s; the graph is left out of "
                  "the metrics", path, split)


def _checked_arrays(path, arrays, specification) -> dict[str, np.ndarray]:
  missing = [name for name in specification if name not in arrays]
  if missing:
    raise GraphFileError(path, f"missing key(s) {', '.join(repr(m) for m in missing)}")
  return {name: _cast(path, name, arrays[name], dtype, rank)
          for name, (dtype, rank) in specification.items()}


def validate_tile(path, graph_id: str, collection: str, split: Optional[str],
                  arrays) -> TileGraph:
  """Builds a TileGraph from raw arrays, raising GraphFileError on any format violation."""
  arrays = _checked_arrays(path, arrays, TILE_ARRAYS)
  _check_common(path, arrays)
  _check_width(path, "config_feat", arrays["config_feat"], TILE_CONFIG_FEATURE_WIDTH)
  num_configs = arrays["config_feat"].shape[0]
  if num_configs == 0:
    raise GraphFileError(path, "the file has zero configs")
  for name in ("config_runtime", "config_runtime_normalizers"):
    if arrays[name].shape[0] != num_configs:
      raise GraphFileError(
          path, f"config counts disagree: 'config_feat' has {num_configs}, '{name}' has {arrays[name].shape[0]}")
    _check_runtimes(path, name, arrays[name], split)
  if split != "test" and (arrays["config_runtime_normalizers"] == 0).any():
    raise GraphFileError(path, "'config_runtime_normalizers' holds zeros in a labelled split")
  _check_measured(path, arrays["config_runtime"], split)
  return TileGraph(graph_id=graph_id, collection=collection, split=split, **arrays)


def validate_layout(path, graph_id: str, collection: str, split: Optional[str],
                    arrays) -> LayoutGraph:
  """Builds a LayoutGraph from raw arrays, raising GraphFileError on any format violation."""
  arrays = _checked_arrays(path, arrays, LAYOUT_ARRAYS)
  num_nodes = _check_common(path, arrays)
  ids, config_feat = arrays["node_config_ids"], arrays["node_config_feat"]
  _check_width(path, "node_config_feat", config_feat, LAYOUT_CONFIG_FEATURE_WIDTH)
  if ids.shape[0] == 0:
    raise GraphFileError(path, "'node_config_ids' is empty: no node is configurable, so the configs cannot differ "
                         "and there is nothing to rank")
  num_configs = config_feat.shape[0]
  if num_configs == 0:
    raise GraphFileError(path, "the file has zero configs")
  if arrays["config_runtime"].shape[0] != num_configs:
    raise GraphFileError(
        path, f"config counts disagree: 'node_config_feat' has {num_configs}, "
        f"'config_runtime' has {arrays['config_runtime'].shape[0]}")
  if config_feat.shape[1] != ids.shape[0]:
    raise GraphFileError(
        path, f"'node_config_feat' describes {config_feat.shape[1]} configurable nodes, "
        f"'node_config_ids' lists {ids.shape[0]}")
  if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
    bad = int(np.argmax((ids < 0) | (ids >= num_nodes)))
    raise GraphFileError(
        path, f"'node_config_ids' entry {bad} = {ids[bad]} is out of range for {num_nodes} nodes")
  if np.unique(ids).size != ids.size:
    raise GraphFileError(path, "'node_config_ids' lists a node more than once")
  splits = arrays["node_splits"]
  if splits.shape[0] != 1:
    raise GraphFileError(path, f"'node_splits' has shape {splits.shape}, expected (1, k)")
  if splits.size and (splits.min() < 0 or splits.max() > num_nodes or (np.diff(splits[0]) < 0).any()):
    raise GraphFileError(path, f"'node_splits' is not an ascending list of offsets within {num_nodes} nodes")
  _check_runtimes(path, "config_runtime", arrays["config_runtime"], split)
  _check_measured(path, arrays["config_runtime"], split)
  return LayoutGraph(graph_id=graph_id, collection=collection, split=split, **arrays)


def validate_graph(path, graph_id: str, collection: str, split: Optional[str], arrays) -> Graph:
  """Dispatches on the collection: the single entry point for arrays from any source."""
  validate = {"tile": validate_tile, "layout": validate_layout}[collection_kind(collection)]
  check_graph_id(path, graph_id)
  return validate(path, graph_id, collection, split, arrays)
