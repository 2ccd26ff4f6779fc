"""TensorFlow and Keras programs -> TpuGraphs graphs, through the HLO XLA compiles them to.

`tf.function(jit_compile=True).experimental_get_compiler_ir(...)` hands back a serialized
HloModuleProto of the program:

* stage 'hlo' (unoptimized): the whole program, as a layout graph (featurize.program_graph).
* stage 'optimized_hlo': after XLA's fusion passes; each fusion becomes a kernel module and a
  tile graph (fusion_kernels.kernel_modules, featurize.kernel_graph).

Nothing is measured, so the graphs are unlabelled like the release's test split. Optimization
targets the machine compiling (a CPU here), not a TPU, so fusion boundaries differ from the
release's.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import tensorflow as tf
from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.data import graphs
from tpu_graphs.hlo import candidates, fusion_kernels
from tpu_graphs.hlo import featurize


@dataclasses.dataclass(frozen=True)
class ProgramGraphs:
  """A TF program as TpuGraphs graphs: the whole program and (when asked) its fused kernels."""

  program: graphs.LayoutGraph
  kernels: tuple[graphs.TileGraph, ...]


def hlo_module(fn: Callable, *example_args, optimized: bool = False,
               autograph: bool = True) -> hlo_pb2.HloModuleProto:
  """The HloModuleProto XLA builds for `fn` traced on `example_args` (tensors or TensorSpecs).

  `fn` may itself be a tf.function; it is traced inside a jit-compiled one either way. `autograph`
  (tf.function's) rewrites Python control flow on tensors; a function without any, such as a Keras
  model's call, traces faster without it, into the same module.
  """
  stage = "optimized_hlo_serialized" if optimized else "hlo_serialized"
  compiled = tf.function(fn, jit_compile=True, autograph=autograph)
  return hlo_pb2.HloModuleProto.FromString(compiled.experimental_get_compiler_ir(*example_args)(stage=stage))


def from_tf_function(fn: Callable, *example_args, graph_id: Optional[str] = None,
                     kernels: bool = False, num_candidates: Optional[int] = None, seed: int = 0) -> ProgramGraphs:
  """Graphs of a TF program: the unoptimized whole program and, with `kernels`, its fusions.

  Without `num_candidates` each graph has one config, the program's own (default layouts, an
  empty tile config); with it, up to that many candidate configs to rank, drawn with `seed`
  (candidates.program_candidates, candidates.kernel_candidates).

  Args:
    fn: a Python function of tensors, or a tf.function.
    *example_args: tensors or tf.TensorSpecs to trace `fn` on (their shapes are baked in).
    graph_id: the program graph's id; defaults to the HLO module's name.
    kernels: also compile with optimizations and return one tile graph per fusion.
  """
  module = hlo_module(fn, *example_args)
  if num_candidates is None:
    program = featurize.program_graph(module, graph_id)
  else:
    program = candidates.program_candidates(module, num_candidates, seed, graph_id)
  kernel_graphs = ()
  if kernels:
    kernel_modules = fusion_kernels.kernel_modules(hlo_module(fn, *example_args, optimized=True))
    kernel_graphs = tuple(featurize.kernel_graph(k) if num_candidates is None
                          else candidates.kernel_candidates(k, num_candidates, seed) for k in kernel_modules)
  return ProgramGraphs(program=program, kernels=kernel_graphs)


def from_keras_model(model: tf.keras.Model, batch_size: int = 1, training: bool = False,
                     kernels: bool = False, num_candidates: Optional[int] = None, seed: int = 0) -> ProgramGraphs:
  """Graphs of a Keras model's forward pass on one batch of `batch_size` examples (with
  `num_candidates`: their candidate configs, as from_tf_function).

  The input signature is the model's, with the batch dimension set, so nothing is evaluated;
  the graph id is the model's name.
  """
  specs = tf.nest.map_structure(lambda t: tf.TensorSpec([batch_size] + list(t.shape[1:]), t.dtype), model.inputs)
  if len(specs) == 1:
    specs = specs[0]

  def forward(inputs):
    return model(inputs, training=training)

  return from_tf_function(forward, specs, graph_id=model.name, kernels=kernels, num_candidates=num_candidates,
                          seed=seed)
