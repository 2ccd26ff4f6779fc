"""Scoring every config of every graph of a records directory, and the per-graph metrics of it.

Validation runs after every epoch and tracing a layout model takes seconds, so each scorer and
task is traced once, on a fully relaxed batch spec, and the traced function is kept while the
scorer lives.
"""

from __future__ import annotations

import weakref
from typing import Callable

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.data import errors, predictions, readers
from tpu_graphs.train import inputs, tasks, xla

# scorer -> {task: its traced scoring function}.
_SCORING_FUNCTIONS: "weakref.WeakKeyDictionary[tf.keras.Model, dict]" = weakref.WeakKeyDictionary()


def _scoring_function(task: tasks.Task, scorer: tf.keras.Model, spec: tfgnn.GraphTensorSpec) -> Callable:
  """graph -> (graph keys, config indices, runtimes, scores) of every config of a merged batch."""
  functions = _SCORING_FUNCTIONS.setdefault(scorer, {})
  if task not in functions:
    @tf.function(input_signature=[spec.relax(num_components=True, num_nodes=True, num_edges=True)], autograph=False)
    def score(graph):
      configs = graph.node_sets["config"]
      return (tf.repeat(xla.graph_keys(graph), configs.sizes), configs["config_index"], task.config_runtimes(configs),
              scorer(xla.model_features(graph)))
    functions[task] = score
  return functions[task]


def evaluation_batches(task: tasks.Task, records_dir, batch_size: int = 8) -> tf.data.Dataset:
  """Merged batches of every config of every graph of a records directory, in file order.

  Building a pipeline traces its functions, which costs seconds; a run validates after every
  epoch, so it builds this once and scores it again with each epoch's weights (`score_batches`).
  """
  return inputs.merged_batches(readers.evaluation_dataset(records_dir, task.structure_transform), batch_size,
                               drop_remainder=False)


def score_batches(task: tasks.Task, scorer: tf.keras.Model, batches: tf.data.Dataset) -> dict:
  """Scores every config of `evaluation_batches`: {"<collection>:<graph_id>": (runtimes (c,), scores (c,))}.

  Arrays are ordered by config index, i.e. as rows of the graph's npz file.
  """
  score = _scoring_function(task, scorer, batches.element_spec)
  parts: dict[str, list] = {}
  for graph in batches:
    keys, indices, runtimes, scores = (t.numpy() for t in score(graph))
    for key in dict.fromkeys(keys):  # graphs in order of appearance
      mine = keys == key
      parts.setdefault(key.decode(), []).append((indices[mine], runtimes[mine], scores[mine]))
  scored = {}
  for key, chunks in parts.items():
    indices, runtimes, scores = (np.concatenate(column) for column in zip(*chunks))
    order = np.argsort(indices, kind="stable")
    scored[key] = (runtimes[order], scores[order])
  return scored


def score_records(task: tasks.Task, scorer: tf.keras.Model, records_dir, batch_size: int = 8) -> dict:
  """Scores every config of every graph under records_dir, as `score_batches`."""
  return score_batches(task, scorer, evaluation_batches(task, records_dir, batch_size))


def evaluate(task: tasks.Task, scored: dict) -> dict:
  """{"mean": {metric: mean over graphs}, "per_graph": {key: {metric: value}}, "graphs": count,
  "unmeasured": [keys]} of scored graphs.

  A graph whose runtimes are all 0 was never measured (the reader warned of it): it has no metric,
  and is listed under "unmeasured" instead of counting as a perfect or a failed ranking.
  """
  unmeasured = [key for key, (runtimes, _) in scored.items() if not (runtimes > 0).any()]
  if scored and len(unmeasured) == len(scored):
    raise errors.InputError(f"{', '.join(unmeasured[:3])}{', ...' if len(unmeasured) > 3 else ''}: no scored graph "
                            "has a measured runtime (all are 0); there is nothing to compute metrics on")
  per_graph = {key: task.graph_metrics(runtimes, scores) for key, (runtimes, scores) in scored.items()
               if key not in unmeasured}
  names = next(iter(per_graph.values())).keys() if per_graph else ()
  mean = {name: float(np.mean([m[name] for m in per_graph.values()])) for name in names}
  return {"mean": mean, "per_graph": per_graph, "graphs": len(per_graph), "unmeasured": unmeasured}


def ranked_predictions(task: tasks.Task, scored: dict) -> list[predictions.Prediction]:
  """Per scored graph, its config indices best first (task.submission_length of them)."""
  return [predictions.Prediction.from_row_id(key, tuple(int(i) for i in
                                                        np.argsort(scores, kind="stable")[:task.submission_length]))
          for key, (_, scores) in scored.items()]
