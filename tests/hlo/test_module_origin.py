"""Which backend a module was compiled for (tpu_graphs/hlo/module_origin.py): the release's TPU
modules and modules before optimizations get no note; XLA's CPU dump after optimizations and a
module calling a CPU or GPU library do, saying the model was trained on TPU measurements."""

import sys

import pytest

import sample_data
from tpu_graphs.hlo import hlo_input, module_origin, xla_dumps


@pytest.fixture(scope="module")
def cnn(tmp_path_factory) -> xla_dumps.DumpedModule:
  return xla_dumps.dump_programs(["cnn"], tmp_path_factory.mktemp("dumps"))["cnn"]


@pytest.mark.parametrize("relative", ["pb/official_testdata/module_tuning_data_layout.pb",
                                      "pb/official_testdata/op_tuning_data.pb"])
def test_the_releases_tpu_modules_get_no_note(relative):
  assert module_origin.backend_note(hlo_input.read_hlo_file(sample_data.require_sample(relative))) is None


def test_a_module_before_optimizations_is_every_backends_and_gets_no_note(cnn):
  assert module_origin.backend_note(hlo_input.read_hlo_file(cnn.before_optimizations)) is None


def test_the_cpu_backends_module_after_optimizations_gets_the_note(cnn):
  note = module_origin.backend_note(hlo_input.read_hlo_file(cnn.after_optimizations))
  assert note == ("note: this module was compiled for a backend other than TPU (fusions, and no tiled layout as TPU's "
                  "layout assignment writes); the model was trained on TPU measurements, so its ranking says what "
                  "would be fast on a TPU, not on that backend")


@pytest.mark.parametrize("target, backend", [("__onednn$matmul", "CPU"), ("__cublas$gemm", "GPU"),
                                             ("__cudnn$convForward", "GPU")])
def test_a_custom_call_to_a_backends_library_names_the_backend(cnn, target, backend):
  module = hlo_input.read_hlo_file(cnn.before_optimizations)
  dot = next(i for c in module.computations for i in c.instructions if i.opcode == "dot")
  dot.opcode, dot.custom_call_target = "custom-call", target
  assert module_origin.other_backend([module]) == f"{backend} (a custom call to {target})"


def test_a_tiled_layout_anywhere_makes_a_tpu_module(cnn):
  module = hlo_input.read_hlo_file(cnn.after_optimizations)
  module.computations[0].instructions[0].shape.layout.tiles.add().dimensions.extend([8, 128])
  assert module_origin.other_backend([module]) is None


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
