"""Tasks: what a collection trains on and how it is judged; one trainer serves every task.

A task turns a batch of graphs (a GraphTensor of b merged components, each with a list of
configs) into ranking lists: labels (b, k) and, from the model's per-config scores (c,), logits
(b, k) for the TF-Ranking losses. It also names the runtimes to rank and the per-graph metrics.

Sign convention: models output scores, lower = predicted faster; ranking logits are -scores and
labels (relevance) are higher for faster configs: log(slowest runtime in the list) - log(runtime).
Slots beyond a graph's configs, and configs without a measured runtime, get label -1 (masked).
"""

from __future__ import annotations

import abc
from typing import Callable, Optional

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.models import config_lists, layout_preprocessing
from tpu_graphs.train import losses, metrics


class Task(abc.ABC):
  """One collection's ranking problem. Subclasses define runtimes, metrics and submissions."""

  kind: str  # record kind read from the schema: "tile" or "layout"
  primary_metric: str  # key of `graph_metrics`, higher is better: early stopping, best model
  submission_length: Optional[int]  # configs per prediction row, best first; None for all
  # Applied by the readers to each graph's structure record once, before its config chunks join:
  # preprocessing that depends on the graph alone (e.g. pruning), not on configs.
  structure_transform: Optional[Callable[[tfgnn.GraphTensor], tfgnn.GraphTensor]] = None

  @abc.abstractmethod
  def config_runtimes(self, configs: tfgnn.NodeSet) -> tf.Tensor:
    """(c,) float32 runtimes to rank, from the `config` node set; <= 0 where unmeasured."""

  @abc.abstractmethod
  def graph_metrics(self, runtimes: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    """Metrics of one whole graph from all its (c,) runtimes and scores."""

  def labels(self, graph: tfgnn.GraphTensor, list_size: int) -> tf.Tensor:
    """(b, list_size) relevance: log(max runtime of the list) - log(runtime); -1 = masked."""
    runtimes = config_lists.to_lists(graph, self.config_runtimes(graph.node_sets["config"]), list_size, 0.0)
    measured = runtimes > 0
    log_runtimes = tf.math.log(tf.where(measured, runtimes, 1.0))
    slowest = tf.reduce_max(tf.where(measured, log_runtimes, -np.inf), axis=1, keepdims=True)
    return tf.where(measured, slowest - log_runtimes, -1.0)

  def ranking_logits(self, graph: tfgnn.GraphTensor, scores: tf.Tensor, list_size: int) -> tf.Tensor:
    """(b, list_size) logits for TF-Ranking (higher = faster) from (c,) scores (lower = faster)."""
    return config_lists.to_lists(graph, -scores, list_size, 0.0)

  def loss(self, spec: str) -> losses.WeightedRankingLoss:
    """The ranking loss mix named by `spec`, e.g. "listmle:1,mse:0.02"."""
    return losses.WeightedRankingLoss(spec)


class TileTask(Task):
  """tile:xla: rank runtime / normalizer; judged by the Kaggle tile score (1 - top-5 slowdown)."""

  kind = "tile"
  primary_metric = "tile_score"
  submission_length = 5

  def config_runtimes(self, configs: tfgnn.NodeSet) -> tf.Tensor:
    return tf.cast(configs["runtime"], tf.float32) / tf.cast(tf.maximum(configs["normalizer"], 1), tf.float32)

  def graph_metrics(self, runtimes: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    return metrics.tile_metrics(runtimes, scores)


class LayoutTask(Task):
  """layout:{xla,nlp}:{default,random}: rank config_runtime over all configs of a program;
  judged by Kendall's tau per graph (the Kaggle layout score is its mean over graphs)."""

  kind = "layout"
  primary_metric = "kendall_tau"
  submission_length = None

  def __init__(self, prune_hops: Optional[int] = None):
    """prune_hops: if set, every graph is pruned once to its configurable ops and their
    prune_hops-hop neighbourhood (layout_preprocessing.prune_to_configurable) as it is read."""
    self.prune_hops = prune_hops
    if prune_hops is not None:
      self.structure_transform = layout_preprocessing.Pruning(prune_hops)

  def config_runtimes(self, configs: tfgnn.NodeSet) -> tf.Tensor:
    return tf.cast(configs["runtime"], tf.float32)

  def graph_metrics(self, runtimes: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    result = {"kendall_tau": metrics.kendall_tau(runtimes, scores), "opa": metrics.ordered_pair_accuracy(runtimes, scores)}
    for k in (1, 5, 10):
      result[f"top{k}_slowdown"] = metrics.top_k_slowdown(runtimes, scores, k)
    return result
