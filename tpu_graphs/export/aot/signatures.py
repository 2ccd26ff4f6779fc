"""The static-shape signatures of a serving SavedModel, which XLA compiles ahead of time for a
native library (native_library.py): one function per kind, each a {signature name: tf.function}
that saved_model.ServingModule adds beside its plain signatures.

* tile: every model per bucket of tile_shapes.TILE_BUCKETS; a late-join model (tile_scores.py) in
  three parts, its kernel half per bucket, its configs half and join once; any other model whole,
  on the padded GraphTensor.
* layout: only graphs as the host prunes them, in two halves (layout_shapes.py, layout_scores.py),
  so only a two-half model that prunes (layout_preprocessing.Pruning); others get none.

    saved_model.export(scorer, "tile", "/tmp/static", static_functions=signatures.static_functions)
"""

from __future__ import annotations

from typing import Callable, Optional

import tensorflow as tf

from tpu_graphs.export import saved_model
from tpu_graphs.export.aot import layout_scores, layout_shapes, tile_scores, tile_shapes
from tpu_graphs.models import layout_model, layout_preprocessing


def _named_arrays_function(function: Callable[[dict], dict], specs: tuple[tf.TensorSpec, ...]) -> Callable:
  """A tf.function of positional arrays (`specs`, in order) that calls `function` with them by name."""
  names = [spec.name for spec in specs]
  return saved_model.serving_function(lambda *arrays: function(dict(zip(names, arrays))), input_signature=specs)


def tile_functions(scorer: tf.keras.Model) -> dict[str, Callable]:
  """A tile scorer's static signatures: a late-join model's split buckets, another's whole ones."""
  functions = {}
  late_join = tile_scores.late_join_layers(scorer)
  if late_join is None:
    for bucket in tile_shapes.TILE_BUCKETS:
      functions[bucket.signature_name] = saved_model.serving_function(
          lambda *arrays: {"scores": scorer(saved_model.model_graph(tile_shapes.padded_tile_graph(*arrays)))},
          input_signature=tile_shapes.input_specs(bucket))
    return functions
  buckets = tile_shapes.SPLIT_TILE_BUCKETS
  for bucket in buckets:
    functions[bucket.signature_name] = saved_model.serving_function(
        lambda *arrays: {"kernel_part": tile_scores.kernel_part(late_join, *arrays)},
        input_signature=tile_shapes.kernel_input_specs(bucket))
  functions[buckets[0].configs_signature_name] = saved_model.serving_function(
      lambda config_feat: {"config_part": tile_scores.config_part(late_join, config_feat)},
      input_signature=tile_shapes.configs_input_specs(buckets[0]))
  functions[buckets[0].join_signature_name] = saved_model.serving_function(
      lambda *parts: {"scores": tile_scores.joined_scores(late_join, *parts)},
      input_signature=tile_shapes.join_input_specs(buckets[0], late_join.readout.units))
  return functions


def layout_functions(scorer: tf.keras.Model, preprocess: Optional[saved_model.Preprocess]) -> dict[str, Callable]:
  """A layout scorer's static signatures: per bucket its context and chunk, and the rows program
  once; none for a model that is not in two halves or does not prune."""
  halves = layout_model.context_and_scores(scorer)
  if halves is None or not isinstance(preprocess, layout_preprocessing.Pruning):
    return {}
  op_context, config_scorer = halves.context, halves.config_scorer
  buckets = layout_shapes.layout_buckets(preprocess.prune_hops)
  functions = {buckets[0].rows_signature_name: _named_arrays_function(
      lambda arrays: {"row_states": layout_scores.config_row_states(config_scorer, arrays)},
      layout_shapes.rows_input_specs())}
  for bucket in buckets:
    functions[bucket.context_signature_name] = _named_arrays_function(
        lambda arrays: {"context": layout_scores.op_context(op_context, arrays)},
        layout_shapes.context_input_specs(bucket))
    functions[bucket.signature_name] = _named_arrays_function(
        lambda arrays: {"scores": layout_scores.config_scores(config_scorer, arrays)},
        layout_shapes.chunk_input_specs(bucket, op_context.units, config_scorer.units))
  return functions


def static_functions(scorer: tf.keras.Model, kind: str,
                     preprocess: Optional[saved_model.Preprocess]) -> dict[str, Callable]:
  """The static signatures of a scorer of `kind` ('tile' or 'layout'), a saved_model.StaticFunctions."""
  return tile_functions(scorer) if kind == "tile" else layout_functions(scorer, preprocess)
