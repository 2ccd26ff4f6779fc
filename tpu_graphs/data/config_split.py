"""Config splits of one layout program: train on some of its measured configs, rank the others.

The release splits *programs*; a compiler autotuning one program it has partly measured needs the
other question answered: given some configs of this program, rank the rest. A config split
writes one program as an npz tree with train / valid / test files that hold disjoint random
subsets of its configs, so the ordinary training programs run on it unchanged. The test file
holds zero runtimes, as the release's test files do; its true runtimes are returned for scoring
outside the run.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Union

import numpy as np

from tpu_graphs.data import graphs, npz

DEFAULT_FRACTIONS = {"train": 0.5, "valid": 0.25, "test": 0.25}


def split_rows(num_configs: int, seed: int, fractions: dict[str, float] = DEFAULT_FRACTIONS) -> dict[str, np.ndarray]:
  """{split: sorted config rows}: a seeded random partition of range(num_configs) by `fractions`
  (which must sum to 1); the last split takes the rounding remainder."""
  if not np.isclose(sum(fractions.values()), 1.0):
    raise ValueError(f"split fractions {fractions} do not sum to 1")
  order = np.random.default_rng(seed).permutation(num_configs)
  bounds = np.round(np.cumsum([0.0, *fractions.values()]) * num_configs).astype(int)
  bounds[-1] = num_configs
  return {split: np.sort(order[start:stop]) for split, start, stop in zip(fractions, bounds[:-1], bounds[1:])}


def select_configs(graph: graphs.LayoutGraph, rows: np.ndarray, split: str, hide_runtimes: bool) -> graphs.LayoutGraph:
  """The graph restricted to config `rows` (in that order), labelled with `split`."""
  runtimes = np.zeros(len(rows), np.int64) if hide_runtimes else graph.config_runtime[rows]
  return dataclasses.replace(graph, split=split, node_config_feat=np.asarray(graph.node_config_feat)[rows],
                             config_runtime=runtimes)


def write_config_split(graph: graphs.LayoutGraph, root: Union[str, pathlib.Path], seed: int,
                       fractions: dict[str, float] = DEFAULT_FRACTIONS) -> dict[str, np.ndarray]:
  """Writes <root>/layout/<source>/<search>/<split>/<graph_id>.npz for each split of the graph's
  configs and returns {split: rows of the original file}. Row i of a split's file is config
  rows[split][i] of the original; test runtimes are written as zeros.
  """
  if not isinstance(graph, graphs.LayoutGraph):
    raise ValueError(f"{graph.graph_id}: config splits are for layout graphs, not {graph.collection}")
  if not np.all(graph.config_runtime > 0):
    raise ValueError(f"{graph.graph_id}: a config split needs measured runtimes for every config "
                     f"(is this a test file?)")
  rows = split_rows(graph.num_configs, seed, fractions)
  collection_dir = pathlib.Path(root, *graph.collection.split(":"))
  for split, chosen in rows.items():
    part = select_configs(graph, chosen, split, hide_runtimes=split == "test")
    npz.write_graph(collection_dir / split / f"{graph.graph_id}.npz", part)
  return rows


def labelled_layout_files(root: Union[str, pathlib.Path]) -> list[pathlib.Path]:
  """Layout npz files under `root` whose configs all carry measured runtimes: the files a config
  split (or any scoring against runtimes) can use."""
  return [path for path in sorted(pathlib.Path(root).rglob("*.npz"))
          if "/layout/" in str(path) and npz.read_graph(path, stream_configs=True).config_runtime.min() > 0]
