"""TF programs and Keras models become valid TpuGraphs graphs through XLA's HLO."""

import collections
import sys

import numpy as np
import pytest
import tensorflow as tf

from tpu_graphs.data import graphs
from tpu_graphs.data import npz
from tpu_graphs.hlo import from_tensorflow
from tpu_graphs.hlo import opcodes


def opcode_counts(graph) -> collections.Counter:
  return collections.Counter(opcodes.OPCODE_NAMES[int(o)] for o in graph.node_opcode)


def test_tf_function_gives_program_and_kernel_graphs():
  def dense_relu_sum(x, w):
    return tf.reduce_sum(tf.nn.relu(tf.matmul(x, w)) * 2.0, axis=1)

  result = from_tensorflow.from_tf_function(dense_relu_sum, tf.ones([4, 8]), tf.ones([8, 16]), kernels=True)
  program = result.program
  assert isinstance(program, graphs.LayoutGraph) and program.split == "test"
  assert {"dot", "maximum", "reduce", "parameter"} <= set(opcode_counts(program))
  configured = {opcodes.OPCODE_NAMES[int(o)] for o in program.node_opcode[program.node_config_ids]}
  assert configured <= {"dot", "reshape", "convolution"} and "dot" in configured
  assert len(result.kernels) >= 1
  assert all(isinstance(k, graphs.TileGraph) and "fusion" in opcode_counts(k) for k in result.kernels)


def test_keras_resnet50_featurizes_into_a_valid_graph(tmp_path):
  model = tf.keras.applications.ResNet50(weights=None)
  result = from_tensorflow.from_keras_model(model, kernels=True)
  counts = opcode_counts(result.program)
  assert counts["convolution"] == 53 and counts["reduce"] >= 1 and counts["parameter"] > 53
  assert result.program.node_config_ids.size >= 53
  path = tmp_path / "layout" / "xla" / "default" / "test" / f"{result.program.graph_id}.npz"
  npz.write_graph(path, result.program)
  for name, value in graphs.graph_arrays(npz.read_graph(path)).items():
    np.testing.assert_array_equal(value, getattr(result.program, name), err_msg=name)
  assert len(result.kernels) > 10


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
