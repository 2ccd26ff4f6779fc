"""The configs of generated layout files: which nodes are configurable. The searches over them are
checked on the generated data itself (tests/synth/test_generate.py)."""

import sys

import numpy as np
import pytest
import tensorflow as tf

from tpu_graphs.hlo import featurize
from tpu_graphs.hlo import from_tensorflow
from tpu_graphs.synth import layout_configs
from tpu_graphs.synth import layout_cost_model


def test_configurable_nodes_are_every_matrix_op_and_a_random_share_of_reshapes():
  def program(x, w, v):
    h = tf.reshape(x, [32, 64])
    for _ in range(7):
      h = tf.tanh(h @ w)
    return tf.reshape(tf.reshape(h, [8, 4, 64]) * 2, [2048]) * tf.einsum("ij,j->i", w, v)[0]
  module = from_tensorflow.hlo_module(program, tf.TensorSpec([8, 4, 64]), tf.TensorSpec([64, 64]), tf.TensorSpec([64]))
  nodes = featurize.module_features(module)
  rank = lambda i: len(nodes.instructions[i].shape.dimensions)
  of = lambda opcode: {i for i, inst in enumerate(nodes.instructions) if inst.opcode == opcode}
  matrix = {i for i in of("dot") if rank(i) >= 2}
  reshapes = {i for i in of("reshape") if rank(i) >= 2}
  assert len(matrix) == 7 and of("dot") - matrix and of("reshape") - reshapes  # a matrix-vector dot and flat reshapes left out
  drawn = [set(layout_configs.configurable_nodes(nodes, layout_cost_model.costed_nodes(module), np.random.default_rng(seed)).tolist())
           for seed in range(4)]
  for chosen in drawn:
    assert matrix <= chosen and chosen - matrix <= reshapes
    assert len(chosen - matrix) == min(len(reshapes), max(1, round(layout_configs.RESHAPE_SHARE * len(matrix))))
  assert len({frozenset(chosen) for chosen in drawn}) > 1


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
