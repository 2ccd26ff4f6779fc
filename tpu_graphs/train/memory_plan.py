"""A layout run's memory plan: its peak memory estimated before any work, and a refusal naming the
flags that would fit when the plan exceeds the memory available.

Asked to train on whole programs, a layout run used to grow until the kernel killed it (on the
real unet3d; docs/training.md, "Whole graphs and the memory plan"). Its memory is dominated by op states (ops x configs
x units, float32) and messages (edges x configs x units) of the ops one model call holds at once:

* training: batch_size lists of configs_per_graph configs of the largest training graph, every
  layer's activations kept for the gradient: with Graph Segment Training (segment_size) only the
  drawn segment's ops (the other segments are scored without gradients, one at a time);
* scoring (validation, test, export): eval_batch_size chunks of configs_per_chunk configs of the
  largest graph, forward only, one segment at a time.

Sizes are counted after pruning (the records' manifest: ops, edges, configurable ops per graph,
pruned as the task prunes them). The constants below were set from the activations a step keeps
and checked against measured peak RSS of layout_train.py on unet3d, pruned and whole
(benchmarks/full_graph.py prints plan / measured); they are this machine's (CPU, float32).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional, Sequence

import numpy as np

from tpu_graphs.data import errors, npz, storage

GIB = 2 ** 30
# Resident memory of a layout run beside its model calls (TensorFlow, Keras, the input pipeline),
# and the bytes one (op or edge) x config slot costs per hidden unit (and layer, when training):
# float32 values of about 7 activations kept per slot, unit and layer for the gradient, 6 alive
# at once when scoring. Checked in benchmarks/full_graph.py (plan / measured).
BASE_BYTES = 1.1 * GIB
TRAINING_BYTES_PER_SLOT_UNIT_LAYER = 4 * 7.0
SCORING_BYTES_PER_SLOT_UNIT = 4 * 6.0


@dataclasses.dataclass(frozen=True)
class GraphSize:
  """One graph of the manifest, after pruning."""
  path: str
  ops: int
  edges: int
  configurable: int
  configs: int


@functools.lru_cache(maxsize=8)
def _pruned_counter(prune_hops: int):
  """A traced function (keep, sources, targets) -> (ops, feeds edges) that pruning by `prune_hops` keeps,
  traced once per hop count (kept_data_flow's loop runs once per topological level)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top: only pruned plans need it
  from tpu_graphs.models import layout_preprocessing  # pylint: disable=g-import-not-at-top

  @tf.function(input_signature=[tf.TensorSpec([None], tf.bool)] + [tf.TensorSpec([None], tf.int64)] * 2, autograph=False)
  def counts(keep, sources, targets):
    keep = layout_preprocessing.neighbourhood(keep, sources, targets, prune_hops)
    flow = layout_preprocessing.kept_data_flow(keep, sources, targets)
    return tf.reduce_sum(tf.cast(keep, tf.int64)), tf.shape(flow, tf.int64)[0]

  return counts


def _pruned_counts(node_config_ids: np.ndarray, edge_index: np.ndarray, num_ops: int, prune_hops: int) -> tuple[int, int]:
  """(ops, feeds edges) the task's pruning (layout_preprocessing.prune_to_configurable) keeps."""
  keep = np.zeros(num_ops, bool)
  keep[node_config_ids] = True
  ops, edges = _pruned_counter(prune_hops)(keep, edge_index[:, 1].astype(np.int64), edge_index[:, 0].astype(np.int64))
  return int(ops), int(edges)


@functools.lru_cache(maxsize=256)
def graph_size(path: str, prune_hops: Optional[int]) -> GraphSize:
  """A layout npz file's sizes as a run with `prune_hops` (None = whole graph) sees them."""
  graph = npz.read_graph(path, stream_configs=True)
  ops, edges = graph.node_feat.shape[0], graph.edge_index.shape[0]
  if prune_hops is not None:
    ops, edges = _pruned_counts(np.asarray(graph.node_config_ids), np.asarray(graph.edge_index), ops, prune_hops)
  return GraphSize(str(path), ops, edges, int(len(graph.node_config_ids)), int(graph.num_configs))


def largest_ops(sizes: dict[str, list[GraphSize]]) -> int:
  """The most ops of any graph of the manifest."""
  return max((graph.ops for graphs in sizes.values() for graph in graphs), default=0)


def manifest(split_dirs: Sequence, prune_hops: Optional[int]) -> dict[str, list[GraphSize]]:
  """{split name: sizes of its npz files}, for the split directories that exist."""
  return {storage.base_name(str(split_dir)): [graph_size(str(path), prune_hops)
                                              for path in sorted(storage.glob(storage.join(split_dir, "*.npz")))]
          for split_dir in split_dirs if storage.is_directory(split_dir)}


@dataclasses.dataclass(frozen=True)
class Settings:
  """What a layout run's memory depends on besides its graphs."""
  batch_size: int
  configs_per_graph: int
  units: int
  layers: int
  segment_size: Optional[int]
  configs_per_chunk: int
  eval_batch_size: int
  prune_hops: Optional[int]

  def flags(self) -> str:
    from tpu_graphs.train import experiments  # pylint: disable=g-import-not-at-top: this module stays light
    prune_hops = experiments.flag_value(experiments.LayoutSettings, "prune_hops", self.prune_hops)
    return (f"--batch_size={self.batch_size} --configs_per_graph={self.configs_per_graph} --units={self.units} "
            f"--layers={self.layers} --segment_size={self.segment_size or 0} "
            f"--configs_per_chunk={self.configs_per_chunk} --prune_hops={prune_hops}")


def _held(graph: GraphSize, segment_size: Optional[int]) -> tuple[int, int]:
  """(ops, edges) one model call holds of a graph: all, or one segment's share."""
  if segment_size is None or graph.ops <= segment_size:
    return graph.ops, graph.edges
  return segment_size, int(np.ceil(graph.edges * segment_size / max(graph.ops, 1)))


@dataclasses.dataclass(frozen=True)
class Plan:
  settings: Settings
  largest_training: Optional[GraphSize]
  largest: GraphSize
  training_bytes: float
  scoring_bytes: float

  @property
  def peak_bytes(self) -> float:
    return BASE_BYTES + max(self.training_bytes, self.scoring_bytes)

  def summary(self) -> str:
    graph = self.largest_training or self.largest
    return (f"memory plan: peak {self.peak_bytes / GIB:.2f} GiB (base {BASE_BYTES / GIB:.2f}, training step "
            f"{self.training_bytes / GIB:.2f}, scoring {self.scoring_bytes / GIB:.2f}); largest graph "
            f"{storage.base_name(graph.path)}: {graph.ops} ops, {graph.edges} edges, {graph.configurable} "
            f"configurable after pruning; settings {self.settings.flags()}")


def plan(sizes: dict[str, list[GraphSize]], settings: Settings) -> Plan:
  """The run's memory plan from its manifest (`manifest`) and settings."""
  every = [graph for graphs in sizes.values() for graph in graphs]
  if not every:
    raise errors.InputError("memory plan: no layout npz files to plan for")
  by_slots = lambda graph: sum(_held(graph, settings.segment_size))
  training = max(sizes.get("train", []), key=by_slots, default=None)
  largest = max(every, key=by_slots)
  training_bytes = 0.0
  if training is not None:
    configs = min(settings.configs_per_graph, training.configs)
    training_bytes = (settings.batch_size * configs * sum(_held(training, settings.segment_size)) * settings.units *
                      settings.layers * TRAINING_BYTES_PER_SLOT_UNIT_LAYER)
  chunk = min(settings.configs_per_chunk, largest.configs) * settings.eval_batch_size
  scoring_bytes = chunk * sum(_held(largest, settings.segment_size)) * settings.units * SCORING_BYTES_PER_SLOT_UNIT
  return Plan(settings, training, largest, training_bytes, scoring_bytes)


def available_bytes() -> float:
  """Memory this process may still use: MemAvailable of /proc/meminfo (or infinity where there is none)."""
  try:
    with open("/proc/meminfo") as meminfo:
      for line in meminfo:
        if line.startswith("MemAvailable:"):
          return float(line.split()[1]) * 1024
  except OSError:
    pass
  return float("inf")


def _fitting_changes(sizes: dict[str, list[GraphSize]], settings: Settings, limit: float) -> list[str]:
  """Single flag changes (each alone) whose plan fits under `limit`."""
  candidates = []
  for segment_size in (1024, 512, 256, 128, 64):
    candidates.append(("segment_size", segment_size))
  for configs in (64, 32, 16, 8):
    candidates.append(("configs_per_graph", configs))
  for batch_size in (2, 1):
    candidates.append(("batch_size", batch_size))
  candidates += [("prune_hops", 1), ("prune_hops", 0)]
  fitting, seen = [], set()
  for name, value in candidates:
    current = getattr(settings, name)
    if name == "prune_hops" and settings.prune_hops is not None and settings.prune_hops <= value:
      continue
    if name != "prune_hops" and current is not None and current <= value:
      continue
    if name in seen:
      continue
    changed = dataclasses.replace(settings, **{name: value})
    if changed.prune_hops != settings.prune_hops:
      changed_sizes = manifest_with_hops(sizes, value)
    else:
      changed_sizes = sizes
    candidate = plan(changed_sizes, changed)
    if candidate.peak_bytes <= limit:
      fitting.append(f"--{name}={value} ({candidate.peak_bytes / GIB:.2f} GiB)")
      seen.add(name)
  return fitting


def manifest_with_hops(sizes: dict[str, list[GraphSize]], prune_hops: Optional[int]) -> dict[str, list[GraphSize]]:
  """The same files' sizes under another pruning."""
  return {split: [graph_size(graph.path, prune_hops) for graph in graphs] for split, graphs in sizes.items()}


def check(sizes: dict[str, list[GraphSize]], the_plan: Plan, limit: Optional[float] = None) -> None:
  """Raises InputError when the plan's peak exceeds `limit` (default: available_bytes()), naming
  the estimate and the single flag changes that would fit."""
  limit = available_bytes() if limit is None else limit
  if the_plan.peak_bytes <= limit:
    return
  fitting = _fitting_changes(sizes, the_plan.settings, limit)
  advice = f"pass one of {', '.join(fitting)}" if fitting else "no single flag change fits; lower several"
  raise errors.InputError(
      f"refused before any work: the {the_plan.summary()} exceeds the {limit / GIB:.2f} GiB available; {advice}, "
      "or --memory_limit_gb to state another limit")
