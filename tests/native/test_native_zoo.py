"""The C++ featurizer computes the Python featurizer's arrays for every program of the generated
zoo (tpu_graphs/synth/zoo.py) at the tiny scale (each architecture once, batch 1, float32): the
training step as a program and with candidate layouts, the optimized inference step's kernels and
their candidate tile sizes. Compiling the zoo takes a few minutes; the checks themselves seconds."""

import sys

import pytest

from featurizer_parity import assert_featurized_alike
from tpu_graphs.synth import generate, zoo

PROGRAMS = generate.programs(generate.SCALES["tiny"])


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
  """Program name -> the folder of its training.pb (unoptimized) and optimized.pb modules."""
  root = tmp_path_factory.mktemp("zoo")
  folders = {}
  for program in PROGRAMS:
    modules = zoo.compile_program(program)
    folders[program.name] = root / program.name
    folders[program.name].mkdir()
    (folders[program.name] / "training.pb").write_bytes(modules.training.SerializeToString())
    (folders[program.name] / "optimized.pb").write_bytes(modules.optimized.SerializeToString())
  return folders


@pytest.mark.parametrize("name", [program.name for program in PROGRAMS])
def test_zoo_program_featurizes_alike(compiled, name, tmp_path):
  training, optimized = compiled[name] / "training.pb", compiled[name] / "optimized.pb"
  assert_featurized_alike(training, tmp_path / "program")
  assert_featurized_alike(training, tmp_path / "layouts", "--num_candidates=100", f"--seed={len(name)}")
  assert_featurized_alike(optimized, tmp_path / "kernels", "--kernels")
  assert_featurized_alike(optimized, tmp_path / "tiles", "--kernels", "--num_candidates=20", f"--seed={len(name)}")


def test_the_zoo_is_every_architecture():
  assert sorted(program.architecture.name for program in PROGRAMS) == sorted(a.name for a in zoo.ARCHITECTURES)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
