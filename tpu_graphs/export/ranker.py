"""Ranks the configs of one graph with an exported model: the call a compiler makes.

    ranker = Ranker("out/tiles/export")             # a SavedModel written by saved_model.export
    for ranking in ranker.rank_file("kernel.npz"):  # or an HLO .pb, featurized first
      print(ranking.best(5))                        # [(config index, score), ...] fastest first
      print(ranking.predicted_ratios([i for i, _ in ranking.best(5)]))  # [(runtime / config 0's, low, high)]
    ranker.rank_file("module.pb", num_candidates=100)  # candidate layouts of new code (candidates.py)

Configs go to the model `configs_per_call` at a time and, for npz files, are read from disk one
chunk at a time, so memory is bounded by the graph and one chunk, not by the number of configs.
Loading needs only TensorFlow (the graph building lives inside the SavedModel).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Optional, Union

import numpy as np
import tensorflow as tf

from tpu_graphs.data import errors, graphs, npz, records
from tpu_graphs.export import saved_model
from tpu_graphs.hlo import candidates, hlo_input
from tpu_graphs.hlo import featurize
from tpu_graphs.hlo import work_limits
from tpu_graphs.train import calibration as calibration_lib

# Configs per call of the SavedModel, which prunes the graph once per call and scores the configs
# in chunks of its own (saved_model.CONFIGS_PER_CALL). Bounds the input arrays read from disk: a
# 21,918-node nlp graph with nc = 848 sends 61 MB of node_config_feat per 1,000 configs.
DEFAULT_CONFIGS_PER_CALL = 2048


@dataclasses.dataclass(frozen=True)
class Ranking:
  """The scored configs of one graph. scores (c,) float32 in config order, lower = predicted
  faster; order (c,) int64, config indices fastest first (ties keep config order)."""

  graph_id: str
  collection: str
  scores: np.ndarray
  order: np.ndarray
  # The export's calibration (calibration.py), which turns score differences into runtime ratios;
  # None for an export without one.
  calibration: Optional[calibration_lib.Calibration] = None

  def best(self, count: int) -> list[tuple[int, float]]:
    """The `count` (at least 1; all where fewer) configs predicted fastest: [(config index, score)],
    fastest first. ValueError for a count below 1, which a slice would answer with all configs but
    the last ones."""
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
      raise ValueError(f"Ranking.best({count!r}): the count of best configs must be an integer of at least 1")
    return [(int(i), float(self.scores[i])) for i in self.order[:count]]

  def reference_rank(self) -> int:
    """The 1-based place of config 0 (a module's own configuration, candidate 0; an npz file's
    first measured config) among the configs, predicted fastest first."""
    return calibration_lib.reference_rank(self.order)

  def predicted_ratios(self, configs) -> Optional[list[tuple[float, float, float]]]:
    """[(ratio, low, high)] per config of `configs`: its predicted runtime over config 0's and the
    calibration's interval (calibration.COVERAGE of validation pairs); None without a calibration,
    where a ratio would be made up."""
    return self.calibration.ratios(self.scores, configs) if self.calibration else None


def check_export_dir(export_dir: pathlib.Path) -> None:
  """Raises InputError, saying where the serving model is, unless `export_dir` holds one."""
  if (export_dir / "saved_model.pb").exists():
    return
  if not export_dir.exists():
    problem = "no such folder"
  elif (export_dir / saved_model.EXPORT_DIR_NAME / "saved_model.pb").exists():
    raise errors.InputError(f"{export_dir}: a training run's folder; its serving model is "
                            f"{export_dir / saved_model.EXPORT_DIR_NAME}")
  else:
    problem = "no saved_model.pb, so no serving model"
  raise errors.InputError(f"{export_dir}: {problem}; a serving model is the export/ folder of a run of "
                          "baselines/tiles_train.py, layout_train.py or quickstart.py (<run>/export)")


class Ranker:
  """Scores and ranks configs with the serving SavedModel in `export_dir` (tile or layout)."""

  def __init__(self, export_dir: Union[str, os.PathLike], configs_per_call: int = DEFAULT_CONFIGS_PER_CALL):
    if configs_per_call < 1:
      raise ValueError(f"configs_per_call must be positive, got {configs_per_call}")
    self.export_dir = pathlib.Path(export_dir)
    check_export_dir(self.export_dir)
    self._score = tf.saved_model.load(str(self.export_dir)).signatures.get(saved_model.PLAIN_SIGNATURE)
    inputs = set(self._score.structured_input_signature[1]) if self._score is not None else set()
    kinds = [kind for kind in ("tile", "layout") if inputs == set(saved_model.plain_input_names(kind))]
    if not kinds:
      raise errors.InputError(f"{self.export_dir}: its {saved_model.PLAIN_SIGNATURE!r} signature takes "
                       f"{sorted(inputs)}, not the arrays of a tile or layout graph")
    self.kind = kinds[0]
    self.configs_per_call = configs_per_call
    self.calibration = calibration_lib.read(self.export_dir)

  def score(self, graph: graphs.Graph) -> np.ndarray:
    """(c,) float32 scores of every config of `graph`, in config order; lower = predicted faster."""
    if graphs.collection_kind(graph.collection) != self.kind:
      raise errors.InputError(f"graph {graph.graph_id} is a {graph.collection} graph; {self.export_dir} scores "
                       f"{self.kind} graphs")
    arrays = {"node_feat": tf.constant(graph.node_feat), "node_opcode": tf.constant(graph.node_opcode),
              "edge_index": tf.constant(graph.edge_index)}
    if self.kind == "layout":
      arrays["node_config_ids"] = tf.constant(graph.node_config_ids)
    config_name = "config_feat" if self.kind == "tile" else "node_config_feat"
    parts = [self._score(**arrays, **{config_name: tf.constant(rows, tf.float32)})["scores"].numpy()
             for _, rows in records.config_chunks(graph, self.configs_per_call)]
    return np.concatenate(parts) if parts else np.zeros([0], np.float32)

  def rank(self, graph: graphs.Graph) -> Ranking:
    """The graph's configs scored and ordered fastest first."""
    scores = self.score(graph)
    return Ranking(graph.graph_id, graph.collection, scores, np.argsort(scores, kind="stable"), self.calibration)

  def rank_file(self, path: Union[str, os.PathLike], kernels: bool = False, num_candidates: Optional[int] = None,
                seed: int = 0, limits: work_limits.WorkLimits = work_limits.WorkLimits(),
                change_entry_layouts: bool = False) -> list[Ranking]:
    """Rankings of the graphs in a TpuGraphs .npz file (one) or an HLO .pb file.

    A .pb file goes through featurize.graphs_from_file (`kernels`: one tile graph per fusion of an
    optimized HloModuleProto). With `num_candidates`, a bare HloModuleProto is given candidate
    configs to rank instead of its own (candidates.candidate_graphs_from_file: up to that many
    layout combinations, or with `kernels` tile sizes per fusion, drawn with `seed`); config i of
    a ranking is then candidate i, whose layouts or tile sizes the graph's config features hold.
    Raises graphs.GraphFileError naming the file for unreadable input, work_limits.WorkLimitError
    for work beyond `limits` (before it is done). Candidates leave the entry computation's parameter
    and result layouts alone unless `change_entry_layouts` (layout_changes.py).
    """
    path = pathlib.Path(path)
    if path.suffix == ".npz":
      if num_candidates is not None:
        raise errors.InputError(f"{path}: an npz file carries its own configs; candidates are generated "
                                "for an HLO module (.pb)")
      found = [npz.read_graph(path, stream_configs=True)]
    elif num_candidates is not None:
      found = candidates.candidate_graphs_from_file(path, num_candidates, kernels=kernels, seed=seed, limits=limits,
                                                    change_entry_layouts=change_entry_layouts)
    else:
      found = featurize.graphs_of_proto(hlo_input.read_hlo_file(path, limits.max_module_bytes), kernels, str(path))
    return [self.rank(graph) for graph in found]
