"""Untrained models exported for serving, for benchmarks and tests that measure what serving costs
or whether two ways of serving agree: neither depends on the weights, and no training is waited for.

    export_untrained("tile:xla", "/tmp/models")                      # the baselines' default size
    export_untrained("layout:xla:default", "/tmp/m", units=16, layers=2, prune_hops=1)
    export_untrained("tile:xla", "/tmp/native", static_signatures=True)  # for aot/native_library.py
"""

from __future__ import annotations

import pathlib

import tensorflow as tf

from tpu_graphs.data import graphs
from tpu_graphs.export import saved_model
from tpu_graphs.export.aot import signatures
from tpu_graphs.train import experiments

# Python that imports this module as `untrained` in any commit's tree (locations.run_with_tree: a
# benchmark's earlier model), also one from before it moved here from tpu_graphs/export/.
IMPORT_IN_ANY_TREE = ("import importlib, importlib.util; untrained = importlib.import_module('benchmarks.untrained' "
                      "if importlib.util.find_spec('benchmarks.untrained') else 'tpu_graphs.export.untrained')")


def export_untrained(collection: str, directory, experiment: str = "quickstart", seed: int = 0,
                     static_signatures: bool = False, **model_settings) -> pathlib.Path:
  """Exports the experiment's model of `collection` with initial weights (drawn from `seed`) to
  <directory>/<kind>, with the task's preprocessing (layout pruning) inside, and the static
  signatures a native library compiles if asked (aot.signatures); returns that path.

  `model_settings` override the experiment's (e.g. units, layers, prune_hops). Layout models do
  not normalize op features: there are no training statistics to normalize with.
  """
  kind = graphs.collection_kind(collection)
  overrides = {"normalize": False, **model_settings} if kind == "layout" else model_settings
  chosen = experiments.experiment(experiment, collection).overridden(model=overrides)
  tf.keras.utils.set_random_seed(seed)
  export_dir = pathlib.Path(directory) / kind
  saved_model.export(chosen.model.model_builder(experiments.DataDerived())(saved_model.model_input_spec(kind)), kind,
                     export_dir, chosen.task().structure_transform, signatures.static_functions if static_signatures else None)
  return export_dir
