"""The HLO featurizer reproduces the release's npz files and rejects bad input by name."""

import sys

import numpy as np
import pytest
from tensorflow.compiler.xla.service import hlo_pb2

import sample_data
from tpu_graphs.data import graphs
from tpu_graphs.data import npz
from tpu_graphs.hlo import featurize, fusion_kernels, hlo_input

LAYOUT_PB = "pb/official_testdata/module_tuning_data_layout.pb"
TILE_PB = "pb/official_testdata/op_tuning_data.pb"
LAYOUT_NPZ = "npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz"


@pytest.fixture(scope="module")
def unet_graph_and_release():
  graph = featurize.graphs_from_file(sample_data.require_sample(LAYOUT_PB))[0]
  return graph, npz.read_graph(sample_data.require_sample(LAYOUT_NPZ))


def test_layout_structure_equals_release(unet_graph_and_release):
  ours, release = unet_graph_and_release
  for name in ("node_opcode", "edge_index", "node_config_ids", "node_splits"):
    np.testing.assert_array_equal(getattr(ours, name), getattr(release, name), err_msg=name)


def test_layout_node_features_equal_release(unet_graph_and_release):
  ours, release = unet_graph_and_release
  assert ours.node_feat.shape == release.node_feat.shape == (3163, 140)
  np.testing.assert_array_equal(ours.node_feat, release.node_feat)  # all 442,820 entries, bit for bit


def test_every_successful_run_is_a_release_config_with_its_runtime(unet_graph_and_release):
  ours, release = unet_graph_and_release
  assert ours.num_configs == 112  # 122 runs, 10 failed
  for config, runtime in zip(ours.node_config_feat, ours.config_runtime):
    same_runtime = np.flatnonzero(release.config_runtime == runtime)
    assert any(np.array_equal(config, release.node_config_feat[i]) for i in same_runtime), runtime


def test_tile_tuning_data_gives_15_valid_kernels(tmp_path):
  kernels = featurize.graphs_from_file(sample_data.require_sample(TILE_PB))
  assert len(kernels) == 15
  for kernel in kernels:
    path = tmp_path / "tile" / "xla" / "train" / f"{kernel.graph_id}.npz"
    npz.write_graph(path, kernel)
    reread = npz.read_graph(path)
    assert isinstance(reread, graphs.TileGraph)
    defaults = reread.config_runtime == reread.config_runtime_normalizers
    assert defaults.any() and np.all(reread.runtimes()[defaults] == 1.0)


def test_tile_drops_failed_runs():
  tuning = hlo_input.read_hlo_file(sample_data.require_sample(TILE_PB))
  fusion_191 = next(m for m in tuning.modules if m.module.name == "fusion.191")
  assert len(fusion_191.runs) == 581 and sum(r.error for r in fusion_191.runs) == 2
  assert featurize.tile_graph(fusion_191).num_configs == 579


def test_module_features_map_instructions_to_nodes():
  tuning = hlo_input.read_hlo_file(sample_data.require_sample(LAYOUT_PB))
  module = featurize.module_features(tuning.module)
  for node in (0, 1000, module.num_nodes - 1):
    instruction = module.instructions[node]
    assert module.node_by_instruction_id[instruction.id] == node
    assert module.node_feat[node, 21:21 + min(6, len(instruction.shape.dimensions))].tolist() == \
        list(instruction.shape.dimensions)[:6]


def test_not_a_proto_is_rejected_naming_the_file(tmp_path):
  path = tmp_path / "notes.pb"
  path.write_text("this is not a protocol buffer\n" * 20)
  with pytest.raises(graphs.GraphFileError, match="notes.pb.*not a serialized ModuleTuningData, TuningData, "
                                                   "HloModuleProto or HloProto"):
    hlo_input.read_hlo_file(path)


def test_truncated_proto_is_rejected_naming_the_file(tmp_path):
  data = sample_data.require_sample(LAYOUT_PB).read_bytes()
  path = tmp_path / "truncated.pb"
  path.write_bytes(data[:len(data) // 2 + 7])
  with pytest.raises(graphs.GraphFileError, match="truncated.pb"):
    hlo_input.read_hlo_file(path)


def test_unknown_opcode_is_rejected_naming_module_and_opcode():
  tuning = hlo_input.read_hlo_file(sample_data.require_sample(LAYOUT_PB))
  tuning.module.computations[0].instructions[0].opcode = "frobnicate"
  with pytest.raises(graphs.GraphFileError, match=r"main__\.10904.*'frobnicate'"):
    featurize.layout_graph(tuning)


def test_empty_module_is_rejected():
  with pytest.raises(graphs.GraphFileError, match="'empty'.*no instructions"):
    featurize.module_features(hlo_pb2.HloModuleProto(name="empty"))
  with pytest.raises(graphs.GraphFileError, match="empty.pb.*not a serialized"):
    hlo_input.parse_hlo_proto(hlo_pb2.HloModuleProto(name="empty").SerializeToString(), "empty.pb")


def test_layout_without_successful_runs_is_rejected():
  tuning = hlo_input.read_hlo_file(sample_data.require_sample(LAYOUT_PB))
  for run in tuning.runs:
    run.error = True
  with pytest.raises(graphs.GraphFileError, match="none of the 122 runs succeeded"):
    featurize.layout_graph(tuning)


def test_bare_module_becomes_unlabelled_program_graph():
  tuning = hlo_input.read_hlo_file(sample_data.require_sample(LAYOUT_PB))
  program = hlo_input.parse_hlo_proto(tuning.module.SerializeToString(), "module.pb")
  assert isinstance(program, hlo_pb2.HloModuleProto)
  graph = featurize.program_graph(program)
  assert graph.split == "test" and graph.config_runtime.tolist() == [0]
  # Its configurable nodes (convolutions, dots, reshapes) are the release's 53 convolutions + 9 reshapes.
  np.testing.assert_array_equal(graph.node_config_ids, tuning.config_index_to_node)
  # Its one config is the layouts as found: each tensor's two minor-most dimensions (all of the
  # release's configs set two, unet3d's rank-5 tensors included), the other four -1.
  tensors = graph.node_config_feat[0].reshape(-1, 3, 6)
  assert (tensors[:, :, :2] >= 0).any() and (tensors[:, :, 2:] == -1).all()


def test_kernel_modules_wrap_each_fusion_in_its_own_module():
  tuning = hlo_input.read_hlo_file(sample_data.require_sample(TILE_PB))
  fusion_232 = next(m for m in tuning.modules if m.module.name == "fusion.232").module
  fused = [c for c in fusion_232.computations if c.name != "fusion.232"]
  # Rebuild the release's kernel module from its fusion alone: same computations, same graph.
  whole = hlo_pb2.HloModuleProto(name="program")
  whole.computations.extend(fused)
  whole.computations.add().CopyFrom(fusion_232.computations[-1])
  whole.entry_computation_id = fusion_232.computations[-1].id  # every module XLA writes names its entry
  kernels = fusion_kernels.kernel_modules(whole)
  assert [k.name for k in kernels] == ["fusion.232"]
  ours, release = featurize.module_features(kernels[0]), featurize.module_features(fusion_232)
  np.testing.assert_array_equal(ours.node_feat, release.node_feat)
  np.testing.assert_array_equal(ours.edge_index, release.edge_index)


def test_module_without_fusions_has_no_kernels():
  tuning = hlo_input.read_hlo_file(sample_data.require_sample(TILE_PB))
  copy_kernel = next(m for m in tuning.modules if m.module.name == "copy.24").module
  with pytest.raises(graphs.GraphFileError, match="'copy.24'.*no fusion"):
    fusion_kernels.kernel_modules(copy_kernel)


def test_hlo_proto_of_xla_dumps_gives_its_module(tmp_path):
  """XLA's --xla_dump_hlo_as_proto writes HloProto (the module and its buffer assignment)."""
  module = hlo_input.read_hlo_file(sample_data.require_sample(LAYOUT_PB)).module
  dump = hlo_pb2.HloProto(hlo_module=module)
  dump.buffer_assignment.logical_buffers.add(id=1, size=64)
  path = tmp_path / "module_0000.x.before_optimizations.hlo.pb"
  path.write_bytes(dump.SerializeToString())
  assert hlo_input.read_hlo_file(path) == module
  [graph] = featurize.graphs_from_file(path)
  np.testing.assert_array_equal(graph.node_feat, featurize.program_graph(module).node_feat)


def test_layout_tuning_data_without_runs_is_its_graph_without_configs():
  tuning = hlo_input.read_hlo_file(sample_data.require_sample(LAYOUT_PB))
  measured = featurize.layout_graph(tuning)
  del tuning.runs[:]
  unmeasured = hlo_input.parse_hlo_proto(tuning.SerializeToString(), "unmeasured.pb")
  graph = featurize.layout_graph(unmeasured)
  assert (graph.num_configs, graph.node_config_feat.shape, graph.split) == (0, (0, 62, 18), "test")
  for name in ("node_feat", "node_opcode", "edge_index", "node_config_ids", "node_splits"):
    np.testing.assert_array_equal(getattr(graph, name), getattr(measured, name), err_msg=name)


def test_tile_tuning_data_without_runs_is_each_kernel_without_configs():
  tuning = hlo_input.read_hlo_file(sample_data.require_sample(TILE_PB))
  for kernel in tuning.modules:
    del kernel.runs[:]
  unmeasured = hlo_input.parse_hlo_proto(tuning.SerializeToString(), "unmeasured.pb")
  kernels = featurize.tile_graphs(unmeasured)
  assert len(kernels) == len(tuning.modules) and all(k.num_configs == 0 and k.split == "test" for k in kernels)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
