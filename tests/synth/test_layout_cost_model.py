"""The layout cost model behind generated layout files: candidates, copies, fused ops, bitcasts,
matrix-unit lanes, table lookups, configs written elsewhere."""

import itertools
import math
import sys

import numpy as np
import pytest
import tensorflow as tf

from tpu_graphs.hlo import candidates
from tpu_graphs.hlo import featurize
from tpu_graphs.hlo import features
from tpu_graphs.hlo import from_tensorflow
from tpu_graphs.synth import hardware
from tpu_graphs.synth import layout_cost_model


def test_a_tensor_is_offered_its_default_and_at_most_one_alternative():
  assert candidates.candidate_layouts(3).tolist() == [[2, 1, 0]]
  assert candidates.candidate_layouts(3, (1, 2, 0)).tolist() == [[2, 1, 0], [1, 2, 0]]
  assert candidates.candidate_layouts(2, (1, 0)).tolist() == [[1, 0]]  # the default is no alternative


def test_a_forward_convolution_keeps_its_output_layout_and_may_swap_its_operands():
  def program(x, kernel):
    return tf.nn.conv2d(x, kernel, strides=1, padding="SAME")
  module = from_tensorflow.hlo_module(program, tf.TensorSpec([1, 8, 8, 16]), tf.TensorSpec([3, 3, 16, 32]))
  nodes = featurize.module_features(module)
  convolution = [i for i, inst in enumerate(nodes.instructions) if inst.opcode == "convolution"]
  model = layout_cost_model.LayoutCostModel(nodes.instructions, layout_cost_model.costed_nodes(module), convolution)
  result, activations, kernel = (model.variables[v].choices.tolist() for v in model.node_variables[0])
  assert result == [[3, 2, 1, 0]]  # output features minor-most
  assert activations == kernel == [[3, 2, 1, 0], [2, 3, 1, 0]]


def _reshape_dot_program(elementwise=False):
  """x (4, 16, 256) -> reshape (64, 256) -> dot with w (256, 128); that reshape and the dot are
  configurable. With `elementwise`, the reshape's result y goes through tanh(exp(y) * y) first."""
  def program(x, w):
    y = tf.reshape(x, [64, 256])
    return tf.matmul(tf.tanh(tf.exp(y) * y) if elementwise else y, w)
  module = from_tensorflow.hlo_module(program, tf.TensorSpec([4, 16, 256]), tf.TensorSpec([256, 128]))
  nodes = featurize.module_features(module)
  chosen = [i for i, inst in enumerate(nodes.instructions) if inst.opcode == "dot"
            or (inst.opcode == "reshape" and list(inst.shape.dimensions) == [64, 256])]
  return nodes, layout_cost_model.LayoutCostModel(nodes.instructions, layout_cost_model.costed_nodes(module), chosen)


def test_every_configurable_op_has_two_to_eight_candidates_starting_with_the_default():
  nodes, model = _reshape_dot_program()
  assert [nodes.instructions[n].opcode for n in model.configurable_nodes] == ["reshape", "dot"]
  for variables in model.node_variables:
    sizes = [len(model.variables[v].choices) for v in variables if v >= 0]
    assert 2 <= np.prod(sizes) <= 8
    for v in variables[variables >= 0]:
      assert model.variables[v].choices[0].tolist() == list(range(len(model.variables[v].dims) - 1, -1, -1))


@pytest.mark.parametrize("elementwise", [False, True])
def test_a_consumer_reading_another_layout_than_its_producer_wrote_pays_a_fused_copy(elementwise):
  # Elementwise ops between them pass the producer's layout on: the copy is the consumer's.
  _, model = _reshape_dot_program(elementwise)
  reshape_result, dot_lhs = model.node_variables[0, 0], model.node_variables[1, 1]
  assert model.variables[reshape_result].choices.tolist() == model.variables[dot_lhs].choices.tolist() \
      == [[1, 0], [0, 1]]

  def runtime(producer_choice, consumer_choice):
    choices = np.zeros((1, len(model.variables)), np.int64)
    choices[0, [reshape_result, dot_lhs]] = producer_choice, consumer_choice
    return model.runtimes(choices)[0]

  # Each op's own cost cancels in this contrast; what remains is the two mismatched configs'
  # copies: a pass fused into the consumer, COPY_SHARE of reading and writing the (64, 256)
  # float32 tensor, whatever its padding, with no launch of its own.
  mismatched = runtime(1, 0) + runtime(0, 1) - runtime(0, 0) - runtime(1, 1)
  copy = layout_cost_model.COPY_SHARE * 2 * (64 * 256 * 4) / hardware.HBM_BYTES_PER_SECOND
  assert mismatched == pytest.approx(2 * copy, rel=1e-9)


def test_fused_elementwise_ops_cost_nothing_of_their_own():
  plain_nodes, plain = _reshape_dot_program()
  fused_nodes, fused = _reshape_dot_program(elementwise=True)
  added = {inst.opcode for inst in fused_nodes.instructions} - {inst.opcode for inst in plain_nodes.instructions}
  assert added == {"exponential", "multiply", "tanh"}
  sizes = [len(v.choices) for v in plain.variables]
  assert sizes == [len(v.choices) for v in fused.variables] and math.prod(sizes) == 32
  every_config = np.asarray(list(itertools.product(*(range(s) for s in sizes))), np.int64)
  np.testing.assert_allclose(fused.runtimes(every_config), plain.runtimes(every_config), rtol=1e-12)


def _weight_gradient_program(input_features, output_features, batch, size):
  """The weight gradient of a 3x3 'same' convolution of bf16 (batch, size, size, input_features)
  activations: a convolution of the activations with the output gradient (batch, size, size,
  output_features) whose result is the (3, 3, input_features, output_features) kernel and whose
  contracting (input-feature) dimension is the batch. Only that convolution is configurable."""
  def program(activations, output_gradient):
    return tf.compat.v1.nn.conv2d_backprop_filter(activations, [3, 3, input_features, output_features],
                                                  output_gradient, strides=[1, 1, 1, 1], padding="SAME")
  module = from_tensorflow.hlo_module(program, tf.TensorSpec([batch, size, size, input_features], tf.bfloat16),
                                      tf.TensorSpec([batch, size, size, output_features], tf.bfloat16))
  nodes = featurize.module_features(module)
  [convolution] = [i for i, inst in enumerate(nodes.instructions) if inst.opcode == "convolution"]
  return nodes, layout_cost_model.LayoutCostModel(nodes.instructions, layout_cost_model.costed_nodes(module), [convolution])


def _convolution_seconds(nodes, model, result_choice, lhs_choice):
  """The weight-gradient convolution's own runtime with its result and lhs at those choices: the
  program's runtime less the fused copy of the result out of a layout other than the default
  (the lhs's producer is not configured, so it writes the layout asked for; nothing else in the
  program costs anything)."""
  convolution = nodes.instructions[model.configurable_nodes[0]]
  by_id = {inst.id: inst for inst in nodes.instructions}
  result, lhs = model.node_variables[0, :2]
  choices = np.zeros((1, len(model.variables)), np.int64)
  choices[0, [result, lhs]] = result_choice, lhs_choice
  copy = lambda shape: layout_cost_model.COPY_SHARE * 2 * hardware.array_bytes(shape) / hardware.HBM_BYTES_PER_SECOND
  return model.runtimes(choices)[0] - result_choice * copy(convolution.shape)


def test_a_weight_gradient_result_fills_the_matrix_unit_lanes_with_its_minor_most_dimension():
  # As in the real unet3d: a kernel gradient of 192 input into 64 output features. Compute-bound,
  # so its runtime tells the share of the 128 lanes the matrix unit fills.
  nodes, model = _weight_gradient_program(input_features=192, output_features=64, batch=8, size=16)
  result, lhs, _ = (model.variables[v].choices.tolist() for v in model.node_variables[0])
  assert result == [[3, 2, 1, 0], [2, 3, 1, 0]]  # output features (64) or input features (192) minor-most
  assert lhs == [[3, 2, 1, 0], [0, 3, 2, 1]]  # the contracting dim (the batch) minor-most: streamed in
  flops = 2 * (3 * 3 * 192 * 64) * (8 * 16 * 16)

  def utilisation(result_choice, lhs_choice):
    seconds = _convolution_seconds(nodes, model, result_choice, lhs_choice) - hardware.OP_OVERHEAD_SECONDS
    return flops / (hardware.MXU_FLOPS * seconds)

  # Output features minor-most: their utilisation (64 of 128 lanes), however the lhs arrives.
  for lhs_choice in (0, 1):
    assert utilisation(0, lhs_choice) == pytest.approx(64 / 128, rel=1e-9)
  # The 192 input features minor-most fill more lanes (192 of 256) than the 64 features (64 of
  # 128): moving away from the default is faster, streamed lhs or not.
  for lhs_choice in (0, 1):
    assert utilisation(1, lhs_choice) == pytest.approx(192 / 256, rel=1e-9)
    assert _convolution_seconds(nodes, model, 1, lhs_choice) < _convolution_seconds(nodes, model, 0, lhs_choice)


def test_a_size_one_minor_most_result_dimension_is_slow_only_when_the_lhs_streams_in_its_preferred_layout():
  # The first layer's kernel gradient: one input feature. With it minor-most and the lhs streamed
  # in (its batch of 8 minor-most), there is no matrix-unit tiling: a vector-unit loop whose lanes
  # hold the batch (8 of 128). An lhs read in another order lets the emitter put the 32 output
  # features on the matrix unit's lanes instead.
  nodes, model = _weight_gradient_program(input_features=1, output_features=32, batch=8, size=32)
  seconds = lambda result_choice, lhs_choice: _convolution_seconds(nodes, model, result_choice, lhs_choice)
  flops = 2 * (3 * 3 * 1 * 32) * (8 * 32 * 32)
  streamed = seconds(1, 1) - hardware.OP_OVERHEAD_SECONDS
  assert flops / streamed == pytest.approx(hardware.VECTOR_FLOPS * 8 / 128, rel=1e-9)
  assert seconds(1, 1) > 5 * seconds(0, 1)
  # Not streamed: the 32 output features fill the lanes as in the default, and the op is
  # memory-bound again. Its operands cost their bytes in any layout; its result its padded bytes:
  # (3, 3, 1, 32) bf16 pads to 3 x 3 x 8 x 128 elements with the 32 features minor-most, to
  # 3 x 3 x 32 x 128 with the 1 input feature minor-most.
  assert seconds(0, 0) == pytest.approx(seconds(0, 1), rel=1e-12)
  padding = (3 * 3 * 32 * 128 - 3 * 3 * 8 * 128) * 2 / hardware.HBM_BYTES_PER_SECOND
  assert seconds(1, 0) - seconds(0, 0) == pytest.approx(padding, rel=1e-9)


def test_a_narrow_but_not_size_one_minor_most_result_dimension_stays_on_the_matrix_unit():
  # Four input features minor-most with the lhs streamed: the matrix unit fills 4 of its 128
  # lanes, no vector-unit loop.
  nodes, model = _weight_gradient_program(input_features=4, output_features=32, batch=8, size=32)
  flops = 2 * (3 * 3 * 4 * 32) * (8 * 32 * 32)
  streamed = _convolution_seconds(nodes, model, 1, 1) - hardware.OP_OVERHEAD_SECONDS
  assert flops / (hardware.MXU_FLOPS * streamed) == pytest.approx(4 / 128, rel=1e-9)


def _transpose_program():
  def program(x, w):
    y = tf.transpose(tf.tanh(x), [0, 2, 1])
    return tf.matmul(y, w)
  module = from_tensorflow.hlo_module(program, tf.TensorSpec([4, 64, 256]), tf.TensorSpec([4, 64, 128]))
  nodes = featurize.module_features(module)
  costed = layout_cost_model.costed_nodes(module)
  configurable = [i for i, inst in enumerate(nodes.instructions) if inst.opcode in ("transpose", "dot")]
  return nodes, layout_cost_model.LayoutCostModel(nodes.instructions, costed, configurable)


def test_a_transpose_is_offered_the_layouts_that_make_it_a_bitcast():
  nodes, model = _transpose_program()
  transpose = nodes.instructions[model.configurable_nodes[0]]
  assert transpose.opcode == "transpose"
  result, operand = model.variables[model.node_variables[0, 0]], model.variables[model.node_variables[0, 1]]
  free = layout_cost_model._bitcast_pairs(transpose, result, operand)
  # Default result with the permuted operand, and the inversely permuted result with the default
  # operand, keep memory order; mixing the two does not.
  assert free.tolist() == [[False, True], [True, False]]
  permutation = np.asarray(transpose.dimensions)
  assert (operand.choices[free.argmax(axis=1)] == permutation[result.choices]).all()


def test_runtimes_are_table_lookups_matching_the_feature_encoding():
  _, model = _transpose_program()
  rng = np.random.default_rng(0)
  sizes = [len(v.choices) for v in model.variables]
  choices = np.stack([rng.integers(0, s, 50) for s in sizes], axis=1)
  feats = model.config_features(choices)
  assert feats.shape == (50, len(model.configurable_nodes), 18)
  # Each tensor's CONFIGURED_LAYOUT_DIMS minor-most dims are set (the candidates differ only there), the
  # rest of its rank left unset.
  v = model.node_variables[1, 0]
  rank = len(model.variables[v].dims)
  assert rank > features.CONFIGURED_LAYOUT_DIMS
  chosen = model.variables[v].choices[choices[:, v]]
  assert (feats[:, 1, :features.CONFIGURED_LAYOUT_DIMS] == chosen[:, :features.CONFIGURED_LAYOUT_DIMS]).all()
  assert (feats[:, 1, features.CONFIGURED_LAYOUT_DIMS:features.LAYOUT_MAX_DIMS] == -1).all()
  assert np.all(np.isfinite(model.runtimes(choices))) and model.runtimes(choices).min() > 0


def test_configs_written_elsewhere_are_read_back_as_choices_and_unoffered_layouts_are_flagged():
  _, model = _transpose_program()
  rng = np.random.default_rng(1)
  choices = np.stack([rng.integers(0, len(v.choices), 20) for v in model.variables], axis=1)
  feats = model.config_features(choices)
  read, offered = model.choices_of(feats)
  assert (read == choices).all() and offered.all()
  # The dot's result (rank 3) laid out with its batch dimension minor-most: not a candidate.
  v = model.node_variables[1, 0]
  feats[3, 1, :2] = [0, 2]
  read, offered = model.choices_of(feats)
  assert not offered[3, v] and read[3, v] == 0 and offered.sum() == offered.size - 1
  # Unconstrained (all -1): the default.
  feats[4, 1, :features.LAYOUT_MAX_DIMS] = -1
  read, offered = model.choices_of(feats)
  assert read[4, v] == 0 and offered[4, v]
  with pytest.raises(ValueError, match="configurable nodes"):
    model.choices_of(feats[:, :1])



if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
