"""Validation of TpuGraphs arrays: every malformed input gets a GraphFileError naming file and problem."""

import sys

import numpy as np
import pytest

from tpu_graphs.data import graphs, npz


def tile_arrays(nodes=4, configs=3):
  rng = np.random.default_rng(0)
  return {
      "node_feat": rng.normal(size=(nodes, 140)).astype(np.float32),
      "node_opcode": np.arange(nodes, dtype=np.uint8),
      "edge_index": np.array([[i + 1, i] for i in range(nodes - 1)], np.int64),
      "config_feat": rng.normal(size=(configs, 24)).astype(np.float32),
      "config_runtime": np.arange(1, configs + 1, dtype=np.int64) * 100,
      "config_runtime_normalizers": np.full(configs, 50, np.int64),
  }


def layout_arrays(nodes=6, configs=3):
  rng = np.random.default_rng(1)
  return {
      "node_feat": rng.normal(size=(nodes, 140)).astype(np.float32),
      "node_opcode": np.arange(nodes, dtype=np.uint8),
      "edge_index": np.array([[i + 1, i] for i in range(nodes - 1)], np.int64),
      "node_config_ids": np.array([1, 4], np.int64),
      "node_config_feat": rng.integers(-1, 4, size=(configs, 2, 18)).astype(np.float32),
      "config_runtime": np.arange(1, configs + 1, dtype=np.int64) * 7,
      "node_splits": np.array([[0, 3, nodes]], np.int64),
  }


def write(tmp_path, arrays, split="train", kind="tile"):
  folder = tmp_path / ("tile/xla" if kind == "tile" else "layout/xla/default") / split
  folder.mkdir(parents=True, exist_ok=True)
  path = folder / "g.npz"
  np.savez(path, **arrays)
  return path


def assert_rejected(path, fragment):
  with pytest.raises(graphs.GraphFileError) as caught:
    npz.read_graph(path)
  assert str(path) in str(caught.value) and caught.value.path == str(path)
  assert fragment in str(caught.value), str(caught.value)
  assert fragment in caught.value.problem, caught.value.problem


def test_valid_files_load_with_canonical_dtypes(tmp_path):
  arrays = tile_arrays()
  arrays["node_opcode"] = arrays["node_opcode"].astype(np.int32)
  arrays["edge_index"] = arrays["edge_index"].astype(np.int32)
  graph = npz.read_graph(write(tmp_path, arrays))
  assert isinstance(graph, graphs.TileGraph)
  assert graph.node_opcode.dtype == np.uint8 and graph.edge_index.dtype == np.int64
  assert graph.collection == "tile:xla" and graph.split == "train" and graph.graph_id == "g"
  np.testing.assert_allclose(graph.runtimes(), np.array([2.0, 4.0, 6.0]))
  layout = npz.read_graph(write(tmp_path, layout_arrays(), kind="layout"))
  assert isinstance(layout, graphs.LayoutGraph) and layout.collection == "layout:xla:default"


def test_config_counts_of_both_collections():
  tile = graphs.validate_graph("t", "g", "tile:xla", "train", tile_arrays(nodes=4, configs=3))
  layout = graphs.validate_graph("l", "g", "layout:xla:default", "train", layout_arrays(nodes=6, configs=5))
  assert (tile.num_configs, layout.num_configs) == (3, 5)


def test_graph_arrays_are_the_npz_members_of_each_collection():
  for collection, arrays in [("tile:xla", tile_arrays()), ("layout:xla:default", layout_arrays())]:
    graph = graphs.validate_graph("p", "g", collection, "train", arrays)
    held = graphs.graph_arrays(graph)
    assert sorted(held) == sorted(arrays)
    for name, value in arrays.items():
      np.testing.assert_array_equal(held[name], value, err_msg=name)


@pytest.mark.parametrize("value, accepted", [(-1, True), (5, True), (0, True), (-2, False), (6, False), (0.5, False)])
def test_layout_values_are_dimension_indices_from_minus_one_to_five(tmp_path, value, accepted):
  arrays = layout_arrays()
  arrays["node_config_feat"][1, 0, 3] = value
  path = write(tmp_path, arrays, kind="layout")
  if accepted:
    assert npz.read_graph(path).node_config_feat[1, 0, 3] == value
  else:
    assert_rejected(path, f"'node_config_feat'[1, 0, 3] = {value:g} is not a layout value")


def test_each_collection_of_the_release_is_named_by_its_folders():
  assert graphs.COLLECTIONS == ("tile:xla", "layout:xla:default", "layout:xla:random", "layout:nlp:default",
                                "layout:nlp:random")  # the order of submissions and tables
  for collection in graphs.COLLECTIONS:
    assert graphs.collection_of_folders(["data", *collection.split(":"), "train"]) == collection
  # A kind without all its names after it names no collection.
  for folders in (["data", "tile"], ["layout", "xla"], ["layout"], []):
    assert graphs.collection_of_folders(folders) is None, folders
  assert graphs.collection_of_folders(["tile", "xla"]) == "tile:xla"


def test_the_largest_float32_is_a_value_and_beyond_it_is_refused(tmp_path):
  arrays = tile_arrays()
  arrays["node_feat"][0, 0] = np.finfo(np.float32).max
  assert npz.read_graph(write(tmp_path, arrays)).node_feat[0, 0] == np.finfo(np.float32).max
  arrays["node_feat"] = arrays["node_feat"].astype(np.float64)
  arrays["node_feat"][0, 0] = 1e39
  assert_rejected(write(tmp_path, arrays), "'node_feat' holds 1e+39, beyond float32's range")


@pytest.mark.parametrize("key", ["node_feat", "edge_index", "config_runtime_normalizers"])
def test_missing_key(tmp_path, key):
  arrays = tile_arrays()
  del arrays[key]
  assert_rejected(write(tmp_path, arrays), f"missing key(s) '{key}'")


def test_wrong_rank(tmp_path):
  arrays = tile_arrays()
  arrays["node_opcode"] = arrays["node_opcode"][:, None]
  assert_rejected(write(tmp_path, arrays), "'node_opcode' has rank 2")


def test_wrong_width(tmp_path):
  arrays = tile_arrays()
  arrays["node_feat"] = arrays["node_feat"][:, :139]
  assert_rejected(write(tmp_path, arrays), "'node_feat' has width 139")
  arrays = layout_arrays()
  arrays["node_config_feat"] = arrays["node_config_feat"][..., :10]
  assert_rejected(write(tmp_path, arrays, kind="layout"), "'node_config_feat' has width 10")


def test_edge_out_of_range(tmp_path):
  arrays = tile_arrays()
  arrays["edge_index"][2] = [3, 4]
  assert_rejected(write(tmp_path, arrays), "'edge_index' row 2 = [3, 4] is out of range for 4 nodes")


def test_configurable_node_out_of_range(tmp_path):
  arrays = layout_arrays()
  arrays["node_config_ids"][1] = 6
  assert_rejected(write(tmp_path, arrays, kind="layout"), "'node_config_ids' entry 1 = 6 is out of range")


def test_repeated_configurable_node_is_refused(tmp_path):
  arrays = layout_arrays()
  arrays["node_config_ids"] = np.array([4, 4], np.int64)
  assert_rejected(write(tmp_path, arrays, kind="layout"), "'node_config_ids' lists a node more than once")


@pytest.mark.parametrize("offsets, accepted", [
    ([0, 3, 6], True), ([0, 3, 3, 6], True), ([], True),  # ascending, a repeated offset (an empty computation)
    ([0, 4, 3, 6], False), ([3, 0], False), ([0, 3, 7], False), ([-1, 3], False)])
def test_node_splits_must_ascend_within_the_nodes(tmp_path, offsets, accepted):
  arrays = layout_arrays(nodes=6)
  arrays["node_splits"] = np.array([offsets], np.int64)
  path = write(tmp_path, arrays, kind="layout")
  if accepted:
    np.testing.assert_array_equal(npz.read_graph(path).node_splits, [offsets])
  else:
    assert_rejected(path, "'node_splits' is not an ascending list of offsets within 6 nodes")


def test_a_single_op_is_a_graph_and_no_op_is_none(tmp_path):
  arrays = tile_arrays(nodes=1)
  arrays["edge_index"] = np.zeros((0, 2), np.int64)
  assert npz.read_graph(write(tmp_path, arrays)).node_feat.shape == (1, 140)
  arrays = tile_arrays(nodes=1)
  arrays.update(node_feat=np.zeros((0, 140), np.float32), node_opcode=np.zeros(0, np.uint8),
                edge_index=np.zeros((0, 2), np.int64))
  assert_rejected(write(tmp_path, arrays), "the graph has no nodes")


def test_opcodes_must_be_one_per_node_and_fit_uint8(tmp_path):
  arrays = tile_arrays(nodes=4)
  arrays["node_opcode"] = arrays["node_opcode"][:3]
  assert_rejected(write(tmp_path, arrays), "'node_opcode' has 3 entries for 4 nodes")
  arrays = tile_arrays(nodes=4)
  arrays["node_opcode"] = np.array([0, 1, 2, 255], np.int32)  # the largest uint8 is an opcode
  assert npz.read_graph(write(tmp_path, arrays)).node_opcode.tolist() == [0, 1, 2, 255]
  arrays["node_opcode"] = np.array([0, 1, 2, 256], np.int32)
  assert_rejected(write(tmp_path, arrays), "'node_opcode' holds values in [0, 256], outside uint8")


@pytest.mark.parametrize("dtype, rank", [(np.float64, 3), (np.float32, 2)])
def test_a_streamed_array_of_another_dtype_or_rank_is_refused_by_its_header(tmp_path, dtype, rank):
  arrays = layout_arrays()
  feat = arrays["node_config_feat"].astype(dtype)
  arrays["node_config_feat"] = feat if rank == 3 else feat.reshape(feat.shape[0], -1)
  path = write(tmp_path, arrays, kind="layout")
  with pytest.raises(graphs.GraphFileError, match=rf"'node_config_feat' is {np.dtype(dtype).name} of rank {rank}, "
                     "expected float32 of rank 3"):
    npz.read_graph(path, stream_configs=True)


def test_unmeasured_runtimes_in_labelled_splits(tmp_path):
  arrays = layout_arrays()
  arrays["config_runtime"][:] = [1, 0, 1]  # one config unmeasured among measured ones: refused in any labelled split
  assert_rejected(write(tmp_path, arrays, split="valid", kind="layout"),
                  "'config_runtime' is 0 at config 1 (1 of 3 configs) in labelled split valid")
  arrays["config_runtime"][:] = 0  # nothing measured: refused for training, read elsewhere
  assert_rejected(write(tmp_path, arrays, split="train", kind="layout"), "'config_runtime' is all 0 (nothing "
                  "measured) in the training split")
  assert npz.read_graph(write(tmp_path, arrays, split="test", kind="layout")).num_configs == 3
  tile = tile_arrays()
  tile["config_runtime_normalizers"][1] = 0
  assert_rejected(write(tmp_path, tile, split="train"), "'config_runtime_normalizers' holds zeros in a labelled split")
  tile["config_runtime"][:] = 0
  assert npz.read_graph(write(tmp_path, tile, split="test")).config_runtime_normalizers[1] == 0


def test_node_zero_is_configurable_and_the_first_bad_id_is_named(tmp_path):
  arrays = layout_arrays()
  arrays["node_config_ids"] = np.array([0, 4], np.int64)
  assert npz.read_graph(write(tmp_path, arrays, kind="layout")).node_config_ids.tolist() == [0, 4]
  arrays["node_config_ids"] = np.array([0, 7], np.int64)
  assert_rejected(write(tmp_path, arrays, kind="layout"), "'node_config_ids' entry 1 = 7 is out of range for 6 nodes")


def test_config_counts_disagree(tmp_path):
  arrays = tile_arrays()
  arrays["config_runtime"] = arrays["config_runtime"][:2]
  assert_rejected(write(tmp_path, arrays), "config counts disagree")
  arrays = layout_arrays()
  arrays["config_runtime"] = arrays["config_runtime"][:2]
  assert_rejected(write(tmp_path, arrays, kind="layout"), "config counts disagree")
  arrays = layout_arrays()
  arrays["node_config_ids"] = arrays["node_config_ids"][:1]
  assert_rejected(write(tmp_path, arrays, kind="layout"), "describes 2 configurable nodes")


def test_negative_runtime_in_labelled_split_only(tmp_path):
  arrays = tile_arrays()
  arrays["config_runtime"][1] = -5
  assert_rejected(write(tmp_path, arrays, split="valid"), "negative value -5 at config 1 in labelled split valid")
  arrays = layout_arrays()
  arrays["config_runtime"][:] = 0
  assert npz.read_graph(write(tmp_path, arrays, split="test", kind="layout")).split == "test"
  # A validation file nothing was measured in is read (and left out of the metrics): 0 is no negative value.
  assert npz.read_graph(write(tmp_path, arrays, split="valid", kind="layout")).config_runtime.tolist() == [0, 0, 0]


def test_zero_configs(tmp_path):
  assert_rejected(write(tmp_path, tile_arrays(configs=0)), "zero configs")
  assert_rejected(write(tmp_path, layout_arrays(configs=0), kind="layout"), "zero configs")


def test_non_finite_features(tmp_path):
  arrays = tile_arrays()
  arrays["config_feat"][0, 0] = np.nan
  assert_rejected(write(tmp_path, arrays), "'config_feat' holds NaN")


def test_truncated_and_non_zip_files(tmp_path):
  path = write(tmp_path, tile_arrays(nodes=50))
  data = path.read_bytes()
  path.write_bytes(data[: len(data) // 2])
  assert_rejected(path, "not a readable npz archive")
  path.write_bytes(b"this is not a zip file at all")
  assert_rejected(path, "not a readable npz archive")
  assert_rejected(tmp_path / "absent.npz", "no such file")


def test_unknown_collection_without_path_hint(tmp_path):
  arrays = tile_arrays()
  del arrays["config_feat"]
  path = tmp_path / "loose.npz"
  np.savez(path, **arrays)
  assert_rejected(path, "cannot tell the collection")


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
