"""The model zoo: real architectures, compiled by XLA, with deterministic HLO."""

import sys

import numpy as np
import pytest

from tpu_graphs.hlo import featurize
from tpu_graphs.synth import zoo


def test_the_zoo_has_at_least_twelve_architectures_in_both_families():
  families = [a.family for a in zoo.ARCHITECTURES]
  assert len(zoo.ARCHITECTURES) >= 12
  assert families.count("xla") >= 6 and families.count("nlp") >= 4


def test_a_program_compiles_to_an_unoptimized_module_and_fused_kernels():
  compiled = zoo.compile_program(zoo.Program(zoo.ARCHITECTURES_BY_NAME["unet"], 1, "bf16"))
  opcodes = {i.opcode for c in compiled.module.computations for i in c.instructions}
  assert {"convolution", "parameter"} <= opcodes and "fusion" not in opcodes
  assert len(featurize.kernel_modules(compiled.optimized)) > 5


def test_compiling_twice_gives_the_same_features():
  program = zoo.Program(zoo.ARCHITECTURES_BY_NAME["gru"], 2, "f32")
  first, second = (featurize.module_features(zoo.compile_program(program).module) for _ in range(2))
  for name in ("node_feat", "node_opcode", "edge_index", "node_splits"):
    assert np.array_equal(getattr(first, name), getattr(second, name)), name


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
