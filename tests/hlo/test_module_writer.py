"""The module written back (tpu_graphs/hlo/module_writer.py): a layout candidate applied to its
module gives a module that passes the module checks and that both featurizers (Python here,
//native:featurize in a fresh process) read back as exactly that candidate, on real modules:
XLA's own dump of a transformer block (an HloProto), a TensorFlow dense layer's module (an
HloModuleProto) with and without the entry's layouts free, and the real sample's unet_3d tuning
data (a ModuleTuningData). The C call and //native:rank write the same bytes (tests/test_native.py)."""

import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.compiler.xla.service import hlo_pb2

from featurizer_parity import native_graphs
import sample_data
from tpu_graphs.data import graphs
from tpu_graphs.hlo import candidates, featurize, from_tensorflow, hlo_input, module_check, module_writer, xla_dumps

LAYOUT_PB = "pb/official_testdata/module_tuning_data_layout.pb"
TILE_PB = "pb/official_testdata/op_tuning_data.pb"


@pytest.fixture(scope="module")
def modules(tmp_path_factory) -> dict[str, bytes]:
  """Serialized real modules, by the wrapper each comes in."""
  dumped = xla_dumps.dump_programs(["transformer_block"], tmp_path_factory.mktemp("dumps"))
  dense = from_tensorflow.hlo_module(lambda x, w, b: tf.nn.relu(tf.linalg.matmul(x, w)) + b,
                                     tf.TensorSpec([8, 16]), tf.TensorSpec([16, 4]), tf.TensorSpec([8, 4]))
  return {"hlo_proto": dumped["transformer_block"].before_optimizations.read_bytes(),
          "hlo_module_proto": dense.SerializeToString()}


def _candidates(data: bytes, num_candidates: int, seed: int, change_entry_layouts: bool = False) -> graphs.LayoutGraph:
  [graph] = candidates.candidate_graphs(hlo_input.parse_hlo_proto(data, "in.pb"), num_candidates, False, seed, "in.pb",
                                        change_entry_layouts=change_entry_layouts)
  return graph


def _configs_by_name(module: hlo_pb2.HloModuleProto, node_ids, node_config_feat: np.ndarray) -> dict:
  """Instruction name -> its (18,) config features."""
  names = [i.name for c in module.computations for i in c.instructions]
  return {names[int(node)]: node_config_feat[j] for j, node in enumerate(node_ids)}


def _assert_reads_back(data: bytes, written: bytes, graph: graphs.LayoutGraph, config: int) -> hlo_pb2.HloModuleProto:
  """The written module passes the module checks, and featurized as a bare module it sets every
  configurable instruction of the candidate as the candidate does. Returns the written module."""
  module = hlo_input.parse_hlo_proto(written, "out.pb")
  module_check.check_module(module, "out.pb")
  [read] = featurize.graphs_of_proto(module, source="out.pb")
  original = hlo_input.parse_hlo_proto(data, "in.pb")
  original = getattr(original, "module", original)  # a ModuleTuningData's module
  wanted = _configs_by_name(original, graph.node_config_ids, graph.node_config_feat[config])
  got = _configs_by_name(module, read.node_config_ids, read.node_config_feat[0])
  assert set(wanted) <= set(got)
  for name, features in wanted.items():
    np.testing.assert_array_equal(got[name], features, err_msg=f"config {config}, {name}")
  return module


@pytest.mark.parametrize("wrapper, change_entry_layouts", [
    ("hlo_proto", False), ("hlo_module_proto", False), ("hlo_module_proto", True)])
def test_every_candidate_written_back_is_read_back_as_that_candidate_in_the_wrapper_it_came_in(
    modules, wrapper, change_entry_layouts):
  data = modules[wrapper]
  graph = _candidates(data, 40, 3, change_entry_layouts)
  assert graph.num_configs == 40
  copies = 0
  for config in range(graph.num_configs):
    written, num_copies = module_writer.written_module(data, "in.pb", 40, 3, config,
                                                       change_entry_layouts=change_entry_layouts)
    _assert_reads_back(data, written, graph, config)
    assert type(hlo_input.parse_hlo_message(written, "out.pb")) is type(hlo_input.parse_hlo_message(data, "in.pb"))
    copies += num_copies
  assert copies > 0  # some candidates read an operand in another layout than its producer's


def test_a_tuning_datas_candidate_is_written_back_as_its_module():
  data = sample_data.require_sample(LAYOUT_PB).read_bytes()
  graph = _candidates(data, 4, 11)
  for config in range(graph.num_configs):
    written, _ = module_writer.written_module(data, "in.pb", 4, 11, config)
    assert isinstance(hlo_input.parse_hlo_message(written, "out.pb"), hlo_pb2.HloModuleProto)
    _assert_reads_back(data, written, graph, config)


def test_the_cpp_featurizer_reads_the_written_module_back_as_the_candidate(modules, tmp_path):
  """//native:featurize on written modules: its one config is the candidate's, and its arrays are
  the Python featurizer's, bit for bit; on candidates that read an operand through a copy."""
  data = modules["hlo_proto"]
  graph = _candidates(data, 40, 3)
  written = {config: module_writer.written_module(data, "in.pb", 40, 3, config) for config in range(40)}
  with_copies = [c for c, (_, copies) in written.items() if copies][:3]
  assert with_copies
  for config in with_copies:
    path = tmp_path / f"written_{config}.pb"
    path.write_bytes(written[config][0])
    [native] = native_graphs(path, tmp_path / f"native_{config}").values()
    [python] = featurize.graphs_from_file(path)
    for name, array in graphs.graph_arrays(python).items():
      assert native[name].tobytes() == np.ascontiguousarray(array).tobytes(), (config, name)
    got = _configs_by_name(hlo_input.read_hlo_file(path), native["node_config_ids"], native["node_config_feat"][0])
    wanted = _configs_by_name(hlo_input.parse_hlo_proto(data, "in.pb"), graph.node_config_ids,
                              graph.node_config_feat[config])
    assert sorted(got) == sorted(wanted)
    for name, features in wanted.items():
      np.testing.assert_array_equal(got[name], features, err_msg=f"config {config}, {name}")


def test_an_operand_read_in_another_layout_reads_a_copy_placed_after_its_producer_which_keeps_its_own(modules):
  data = modules["hlo_proto"]
  original = hlo_input.parse_hlo_proto(data, "in.pb")
  graph = _candidates(data, 40, 3)
  config = next(c for c in range(graph.num_configs) if module_writer.written_module(data, "in.pb", 40, 3, c)[1])
  written = hlo_input.parse_hlo_proto(module_writer.written_module(data, "in.pb", 40, 3, config)[0], "out.pb")
  before = {i.id: i for c in original.computations for i in c.instructions}
  for computation in written.computations:
    order = [i.id for i in computation.instructions]
    for position, copy in enumerate(computation.instructions):
      if copy.id in before:
        continue
      [producer_id] = copy.operand_ids
      producer = before[producer_id]
      assert copy.opcode == "copy" and copy.name.startswith(f"{producer.name}.copy")
      assert order[position - 1] == producer_id or computation.instructions[position - 1].opcode == "copy"
      assert list(copy.shape.dimensions) == list(producer.shape.dimensions)
      assert list(copy.shape.layout.minor_to_major) != list(producer.shape.layout.minor_to_major)
      assert any(copy.id in i.operand_ids for i in computation.instructions)  # an instruction reads it
      assert copy.id > max(before)


def test_the_listed_dims_come_first_then_the_others_in_the_tensors_own_order():
  assert module_writer.full_order([2, 0], [3, 2, 1, 0]) == (2, 0, 3, 1)
  assert module_writer.full_order([1], [0, 1, 2]) == (1, 0, 2)
  assert module_writer.full_order([], [1, 0]) == (1, 0)


def test_tile_tuning_data_and_a_config_outside_the_candidates_are_refused_naming_the_file(modules):
  tile = sample_data.require_sample(TILE_PB).read_bytes()
  with pytest.raises(graphs.GraphFileError, match=r"^tile\.pb: holds kernels' tuning data \(TuningData\): a module "
                     "carries no tile sizes"):
    module_writer.written_module(tile, "tile.pb", 10, 0, 0)
  with pytest.raises(graphs.GraphFileError, match=r"^in\.pb: config 40 is not among the 40 candidates drawn "
                     r"\(num_candidates 40, seed 3\)$"):
    module_writer.written_module(modules["hlo_module_proto"], "in.pb", 40, 3, 40)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-v"]))
