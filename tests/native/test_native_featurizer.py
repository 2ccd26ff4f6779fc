"""The C++ featurizer (native/hlo, run as //native:featurize in a fresh process) computes the arrays
of the Python featurizer (tpu_graphs/hlo): opcodes, edges and ids equal, features bit-identical as
float32, candidates the same for the same seed, on the real sample's protos and on modules XLA
dumps itself (--xla_dump_hlo_as_proto) for a CNN, an RNN and a transformer block; tuning data
without runs featurizes to the same graph without configs; malformed input is refused with the
Python featurizer's own message. tests/native/test_native_zoo.py checks the zoo's programs."""

import pathlib
import random
import re
import subprocess
import sys

import numpy as np
import pytest

from featurizer_parity import assert_featurized_alike, native_graphs, python_graphs
import bazel_outputs
import hang_guard
import malformed_modules
import sample_data
from google.protobuf import descriptor_pb2, text_format
from tensorflow.compiler.xla import xla_data_pb2
from tensorflow.compiler.xla.service import hlo_pb2
from tpu_graphs.data import graphs
from tpu_graphs.hlo import candidates, featurize, hlo_input, opcodes, tuning_pb2, xla_dumps

LAYOUT_PB = "pb/official_testdata/module_tuning_data_layout.pb"
REPOSITORY = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", sample_data.files("pb/**/*.pb"), ids=lambda path: path and path.name)
def test_every_sample_proto_featurizes_alike_with_its_own_configs_and_with_candidates(path, tmp_path):
  assert_featurized_alike(path, tmp_path / "own")
  kernels = isinstance(hlo_input.read_hlo_file(path), tuning_pb2.TuningData)
  assert_featurized_alike(path, tmp_path / "candidates", *(["--kernels"] if kernels else []), "--num_candidates=60",
                          "--seed=7")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> dict[str, xla_dumps.DumpedModule]:
  """XLA's own dumps (--xla_dump_hlo_as_proto) of a CNN, an RNN and a transformer block."""
  return xla_dumps.dump_programs(list(xla_dumps.PROGRAMS), tmp_path_factory.mktemp("dumps"))


@pytest.mark.parametrize("program", list(xla_dumps.PROGRAMS))
def test_modules_dumped_by_xla_featurize_alike_as_programs_kernels_and_candidates(dumps, program, tmp_path):
  before, after = dumps[program].before_optimizations, dumps[program].after_optimizations
  assert isinstance(hlo_input.read_hlo_file(before), hlo_pb2.HloModuleProto)  # an HloProto's module
  assert_featurized_alike(before, tmp_path / "program")
  assert_featurized_alike(before, tmp_path / "layouts", "--num_candidates=100", "--seed=3")
  assert_featurized_alike(after, tmp_path / "optimized")
  assert_featurized_alike(after, tmp_path / "kernels", "--kernels")
  assert_featurized_alike(after, tmp_path / "tiles", "--kernels", "--num_candidates=25", "--seed=11")


def test_tuning_data_without_runs_featurizes_to_its_graph_and_configurable_nodes_without_configs(tmp_path):
  tuning = hlo_input.read_hlo_file(sample_data.require_sample(LAYOUT_PB))
  measured = featurize.layout_graph(tuning)
  del tuning.runs[:]
  path = tmp_path / "unmeasured.pb"
  path.write_bytes(tuning.SerializeToString())
  [native] = native_graphs(path, tmp_path / "native").values()
  [python] = featurize.graphs_from_file(path)
  assert python.num_configs == 0 and native["node_config_feat"].shape == (0, 62, 18)
  for name in ("node_feat", "node_opcode", "edge_index", "node_config_ids", "node_splits"):
    np.testing.assert_array_equal(getattr(python, name), getattr(measured, name), err_msg=name)
    np.testing.assert_array_equal(native[name], getattr(measured, name), err_msg=name)
  # Its candidates keep those configurable nodes (config_index_to_node), alike in both languages.
  assert_featurized_alike(path, tmp_path / "candidates", "--num_candidates=40", "--seed=2")
  [drawn] = candidates.candidate_graphs(tuning, 40, seed=2)
  np.testing.assert_array_equal(drawn.node_config_ids, measured.node_config_ids)


def test_feature_values_beyond_64_bits_and_below_zero_are_bit_identical(tmp_path):
  """Sums and products Python computes with unbounded integers: a window whose sizes multiply to
  more than 2^127 (beyond 128-bit integers, within float32), a shape of 2^40-sized dims (beyond 64
  bits), negative paddings."""
  module = malformed_modules.module({"name": "p", "opcode": "parameter", "id": 10, "dims": [2**40, 2**40, 2**40 - 3]},
                                    {"name": "r", "opcode": "reduce-window", "id": 11, "operand_ids": [10],
                                     "dims": [3, 5]},
                                    {"name": "s", "opcode": "reshape", "id": 12, "operand_ids": [11], "dims": [15]})
  for size in (2**62 + 1, 2**62 - 1, 9):
    module.computations[0].instructions[1].window.dimensions.add(size=size, padding_low=-size, stride=-7)
  path = tmp_path / "huge.pb"
  path.write_bytes(module.SerializeToString())
  assert_featurized_alike(path, tmp_path / "out")


def test_opcode_numbering_is_the_python_one():
  listed = (REPOSITORY / "native" / "hlo" / "opcodes.cc").read_text()
  table = listed.split("kOpcodesById[] = {", 1)[1].split("};", 1)[0]
  names = re.findall(r'"([^"]+)"|(nullptr)', table)
  assert {name: number for number, (name, _) in enumerate(names) if name} == opcodes.OPCODE_IDS


def test_checked_in_xla_message_definitions_are_the_pinned_tensorflows():
  """native/hlo builds XLA's classes from a checked-in descriptor set (scripts/generate_protos dumps
  it): it must be what this TensorFlow's Python classes are, marked for protobuf's lite runtime."""
  checked_in = descriptor_pb2.FileDescriptorSet()
  text_format.Parse((REPOSITORY / "native" / "hlo" / "xla_protos.textproto").read_text(), checked_in)
  expected = descriptor_pb2.FileDescriptorSet()
  for module in (xla_data_pb2, hlo_pb2):
    module.DESCRIPTOR.CopyToProto(expected.file.add())
    expected.file[-1].options.optimize_for = descriptor_pb2.FileOptions.LITE_RUNTIME
  assert checked_in == expected


def _refusals() -> list:
  """(bytes, expected message regex) of input both featurizers refuse."""
  layout = sample_data.sample_dir() / LAYOUT_PB
  data = layout.read_bytes() if layout.exists() else hlo_pb2.HloModuleProto(name="x").SerializeToString() * 50
  unknown_opcode = malformed_modules.module(malformed_modules.PARAMETER, {
      "name": "f", "opcode": "frobnicate", "id": 11, "operand_ids": [10]})
  cases = [pytest.param(case.values[0].SerializeToString(), case.values[1], id=case.id)
           for case in malformed_modules.CASES]
  return cases + [
      pytest.param(unknown_opcode.SerializeToString(), r"instruction 'f' has opcode 'frobnicate', which the TpuGraphs "
                   "opcode numbering does not know", id="unknown_opcode"),
      pytest.param(data[:len(data) // 2 + 7], "not a serialized ModuleTuningData, TuningData, HloModuleProto or "
                   "HloProto", id="truncated_proto"),
      pytest.param(b"this is not a protocol buffer\n" * 20, "not a serialized", id="garbage"),
      pytest.param(bytes(range(256)) * 8, "not a serialized", id="binary_garbage"),
      pytest.param(b"", "the file is empty", id="empty_file"),
      pytest.param(b"HloModule jit_f, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n\nENTRY main {\n}\n",
                   r"holds HLO text \(it starts with 'HloModule'\), not a serialized proto; pass the module as a "
                   r"proto: XLA writes one per module with --xla_dump_hlo_as_proto", id="hlo_text_named_pb"),
  ]


@pytest.mark.parametrize("data, message", _refusals())
def test_malformed_input_is_refused_by_both_featurizers_with_the_same_message(data, message, tmp_path):
  path = tmp_path / "in.pb"
  path.write_bytes(data)
  with pytest.raises(graphs.GraphFileError) as refused:
    featurize.graphs_from_file(path)
  assert re.search(message, str(refused.value))
  completed = subprocess.run([str(bazel_outputs.built("native/tools/featurize")), f"--input={path}",
                              f"--output_dir={tmp_path / 'out'}"],
                             capture_output=True, text=True, timeout=hang_guard.SECONDS)
  assert (completed.returncode, completed.stdout) == (1, "")
  assert completed.stderr == f"featurize: {refused.value}\n"


def _mutated(data: bytes, rng: random.Random) -> bytes:
  """`data` with one to four bytes overwritten, runs deleted or bytes inserted at random places."""
  data = bytearray(data)
  for _ in range(rng.randint(1, 4)):
    where, kind = rng.randrange(len(data)), rng.random()
    if kind < 0.5:
      data[where] = rng.randrange(256)
    elif kind < 0.75:
      del data[where:where + rng.randint(1, 8)]
    else:
      data[where:where] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
  return bytes(data)


def test_damaged_modules_get_the_same_graphs_or_the_same_refusal_from_both_never_a_crash(dumps, tmp_path):
  """Random damage to XLA's dumps: most is refused (a field cut short, a dangling id, bytes that
  parse as another message), some still parses; either way both featurizers answer alike."""
  rng = random.Random(0)
  sources = [dump.read_bytes() for dumped in dumps.values()
             for dump in (dumped.before_optimizations, dumped.after_optimizations)]
  for case in range(40):
    path = tmp_path / f"damaged{case}.pb"
    path.write_bytes(_mutated(rng.choice(sources), rng))
    for flags in ((), ("--kernels",), ("--num_candidates=20",), ("--kernels", "--num_candidates=10")):
      completed = subprocess.run([str(bazel_outputs.built("native/tools/featurize")), f"--input={path}",
                                  f"--output_dir={tmp_path / 'out' / str(case)}", *flags], capture_output=True,
                                 text=True, timeout=hang_guard.SECONDS)
      assert completed.returncode in (0, 1), completed.stderr  # never a signal
      if completed.returncode == 1:
        with pytest.raises(graphs.GraphFileError) as refused:
          python_graphs(path, *flags)
        assert completed.stderr == f"featurize: {refused.value}\n"
      else:
        assert_featurized_alike(path, tmp_path / "again" / str(case), *flags)


def test_bad_flags_get_the_usage_and_status_2(tmp_path):
  featurize = str(bazel_outputs.built("native/tools/featurize"))
  completed = subprocess.run([featurize, "--input=x.pb", "--num_candidates=-1"], capture_output=True, text=True,
                             timeout=hang_guard.SECONDS)
  assert completed.returncode == 2 and "--num_candidates must be an integer >= 0" in completed.stderr


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
