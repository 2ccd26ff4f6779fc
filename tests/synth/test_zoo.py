"""The model zoo: real architectures, compiled by XLA, with deterministic HLO."""

import collections
import sys

import numpy as np
import pytest
from tensorflow.compiler.xla import xla_data_pb2
from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.hlo import featurize, fusion_kernels
from tpu_graphs.synth import zoo


@pytest.fixture(scope="module")
def unet():
  """The smallest CNN of the zoo at batch 1, compiled (inference, optimized and training step)."""
  return zoo.compile_program(zoo.Program(zoo.ARCHITECTURES_BY_NAME["unet"], 1, "bf16"), traced_inference=True)


def _instructions(module):
  return [instruction for computation in module.computations for instruction in computation.instructions]


def _entry(module):
  return next(c for c in module.computations if c.id == module.entry_computation_id)


def test_the_zoo_has_at_least_twelve_architectures_in_both_families():
  families = [a.family for a in zoo.ARCHITECTURES]
  assert len(zoo.ARCHITECTURES) >= 12
  assert families.count("xla") >= 6 and families.count("nlp") >= 4


def test_a_program_compiles_to_an_unoptimized_module_and_fused_kernels(unet):
  opcodes = {i.opcode for i in _instructions(unet.module)}
  assert {"convolution", "parameter"} <= opcodes and "fusion" not in opcodes
  assert len(fusion_kernels.kernel_modules(unet.optimized)) > 5


def test_training_steps_run_on_larger_batches_of_longer_inputs():
  height, width, channels = zoo.ARCHITECTURES_BY_NAME["unet"].input_shape
  assert zoo.training_input_shape(zoo.ARCHITECTURES_BY_NAME["unet"]) == (
      height * zoo.TRAINING_SCALE, width * zoo.TRAINING_SCALE, channels)
  [length] = zoo.ARCHITECTURES_BY_NAME["gru"].input_shape
  assert zoo.training_input_shape(zoo.ARCHITECTURES_BY_NAME["gru"]) == (length * zoo.TRAINING_SCALE,)


def test_a_program_compiles_a_training_step_with_weight_gradient_convolutions(unet):
  [images] = [i for i in _entry(unet.training).instructions if i.opcode == "parameter" and i.parameter_number == 0]
  assert tuple(images.shape.dimensions) == (zoo.TRAINING_BATCH_SCALE,) + zoo.training_input_shape(unet.program.architecture)
  layers = [i for i in _instructions(unet.module) if i.opcode == "convolution"]
  roles = collections.Counter("weight gradient" if i.convolution_dimension_numbers.output_batch_dimension != 0
                              else "activation" for i in _instructions(unet.training) if i.opcode == "convolution")
  # Every layer's forward and weight-gradient convolution, and the input gradient of every layer
  # but the first: nothing needs the gradient of the images.
  assert roles == {"weight gradient": len(layers), "activation": 2 * len(layers) - 1}
  assert len(_instructions(unet.training)) > 2 * len(_instructions(unet.module))
  assert zoo.without_dead_code(unet.training) == unet.training


def _instruction(id_, opcode, *operands, control=()):
  return hlo_pb2.HloInstructionProto(
      id=id_, name=f"{opcode}.{id_}", opcode=opcode, operand_ids=operands, control_predecessor_ids=control,
      shape=xla_data_pb2.ShapeProto(element_type=xla_data_pb2.F32, dimensions=[4]))


def test_dead_code_removal_keeps_the_parameters_and_what_the_root_needs():
  reducer = hlo_pb2.HloComputationProto(id=1, name="reducer", root_id=11, instructions=[
      _instruction(10, "parameter"), _instruction(11, "negate", 10), _instruction(12, "exponential", 10)])
  entry = hlo_pb2.HloComputationProto(id=2, name="main", root_id=7, instructions=[
      _instruction(1, "parameter"), _instruction(2, "parameter"),  # parameter 2 is unused
      _instruction(3, "multiply", 2, 2), _instruction(4, "add", 1, 1), _instruction(5, "tanh", 1),
      _instruction(6, "add", 3, 3), _instruction(7, "negate", 4, control=[5])])
  module = hlo_pb2.HloModuleProto(name="m", entry_computation_id=2, computations=[reducer, entry])
  original = module.SerializeToString()
  pruned = zoo.without_dead_code(module)
  # The root's operand and its control predecessor stay, in their order; the unused chain goes.
  assert [i.id for i in _entry(pruned).instructions] == [1, 2, 4, 5, 7]
  assert _entry(pruned).root_id == 7 and pruned.computations[0] == reducer  # other computations as they were
  assert module.SerializeToString() == original  # a copy: the input is unchanged


def test_compiling_twice_gives_the_same_features():
  program = zoo.Program(zoo.ARCHITECTURES_BY_NAME["gru"], 2, "f32")
  first, second = (zoo.compile_program(program) for _ in range(2))
  for module in ("optimized", "training"):  # what generated files are made of
    features = [featurize.module_features(getattr(compiled, module)) for compiled in (first, second)]
    for name in ("node_feat", "node_opcode", "edge_index", "node_splits"):
      assert np.array_equal(getattr(features[0], name), getattr(features[1], name)), (module, name)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
