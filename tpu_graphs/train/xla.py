"""Training on XLA: what a compiled step (TPUs, or `jit_compile` on any device) needs of its inputs.

A TPU runs one XLA program per input shape; `tf.function(jit_compile=True)` compiles the same
program on a CPU or GPU, so one flag exercises the TPU path on every machine. XLA takes

* static shapes: inputs are padded to fixed totals (padding.py) and lists are built by scatter
  into a static list size (tpu_graphs/models/config_lists.py);
* no strings: the records' text context features (`graph_id`, `collection`) leave the features
  a model sees (`model_features`); evaluation keeps them outside the step for its bookkeeping
  (`graph_keys`: predictions.csv names every graph).

On a TPU, Keras also runs several steps per call into the device (`steps_per_execution`), so the
host does not wait on the device after every step.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn
from absl import logging

from tpu_graphs.train import strategies

# Steps per host call into a TPU (capped by the steps of an epoch).
TPU_STEPS_PER_EXECUTION = 32


def _numeric(features) -> dict:
  return {name: value for name, value in features.items() if value.dtype != tf.string}


def model_features(graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
  """The graph without its string features (context `graph_id`, `collection`): what a model sees."""
  return tfgnn.GraphTensor.from_pieces(
      context=tfgnn.Context.from_fields(features=_numeric(graph.context.features), sizes=graph.context.sizes),
      node_sets={name: tfgnn.NodeSet.from_fields(features=_numeric(node_set.features), sizes=node_set.sizes)
                 for name, node_set in graph.node_sets.items()},
      edge_sets=dict(graph.edge_sets))


def graph_keys(graph: tfgnn.GraphTensor) -> tf.Tensor:
  """(b,) string "<collection>:<graph_id>" of every component, for bookkeeping outside the step."""
  return tf.strings.join([graph.context["collection"], graph.context["graph_id"]], ":")


def needs_padding(strategy: tf.distribute.Strategy, jit_compile: bool) -> bool:
  """Whether training inputs are padded to static sizes: on TPUs, and for any XLA-compiled step."""
  return jit_compile or strategies.needs_static_shapes(strategy)


def compile_settings(strategy: tf.distribute.Strategy, jit_compile: bool, steps_per_epoch: int) -> dict:
  """Keyword arguments of Keras `Model.compile` for the step: XLA or not, steps per execution.

  Says once, in the log, when the step is XLA-compiled without a TPU (nothing was run on a TPU).
  """
  on_tpu = strategies.needs_static_shapes(strategy)
  if jit_compile and not on_tpu:
    devices = sorted({device.device_type for device in tf.config.list_logical_devices()})
    logging.warning("No TPU: the XLA-compiled training step (jit_compile) runs on %s", ", ".join(devices))
  settings = {"jit_compile": bool(jit_compile)}  # TPUStrategy compiles with XLA by itself
  if on_tpu:
    settings["steps_per_execution"] = min(TPU_STEPS_PER_EXECUTION, steps_per_epoch)
  return settings
