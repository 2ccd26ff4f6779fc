"""Untrained models exported for serving, for benchmarks and tests that measure what serving costs
or whether two ways of serving agree: neither depends on the weights, and no training is waited for.

    export_untrained("tile:xla", "/tmp/models")                      # the baselines' default size
    export_untrained("layout:xla:default", "/tmp/m", units=16, layers=2, prune_hops=1)
"""

from __future__ import annotations

import pathlib

import numpy as np
import tensorflow as tf

from tpu_graphs.data import graphs, records
from tpu_graphs.export import saved_model
from tpu_graphs.train import experiments, inputs


def _graph_spec(kind: str):
  """The relaxed input spec of a model of `kind`, from a 3-op graph with 2 configs."""
  layout = kind == "layout"
  example = records.graph_tensor_from_arrays(
      kind, np.ones([3, graphs.NODE_FEATURE_WIDTH], np.float32), np.zeros([3], np.uint8), np.array([[1, 0], [2, 1]]),
      config_feat=None if layout else np.ones([2, graphs.TILE_CONFIG_FEATURE_WIDTH], np.float32),
      node_config_ids=np.array([1]) if layout else None,
      node_config_feat=np.ones([2, 1, graphs.LAYOUT_CONFIG_FEATURE_WIDTH], np.float32) if layout else None)
  return example.with_indices_dtype(inputs.INDICES_DTYPE).spec.relax(num_components=True, num_nodes=True,
                                                                      num_edges=True)


def export_untrained(collection: str, directory, experiment: str = "quickstart", seed: int = 0,
                     **model_settings) -> pathlib.Path:
  """Exports the experiment's model of `collection` with initial weights (drawn from `seed`) to
  <directory>/<kind>, with the task's preprocessing (layout pruning) inside; returns that path.

  `model_settings` override the experiment's (e.g. units, layers, prune_hops). Layout models do
  not normalize op features: there are no training statistics to normalize with.
  """
  kind = graphs.collection_kind(collection)
  overrides = {"normalize": False, **model_settings} if kind == "layout" else model_settings
  chosen = experiments.experiment(experiment, collection).overridden(model=overrides)
  tf.keras.utils.set_random_seed(seed)
  export_dir = pathlib.Path(directory) / kind
  saved_model.export(chosen.model.model_builder(train_npz_dir=None)(_graph_spec(kind)), kind, export_dir,
                     chosen.task().structure_transform)
  return export_dir
