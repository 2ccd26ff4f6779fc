"""npz I/O: exact reads of the real release, streamed config arrays, deterministic atomic writes."""

import os
import sys
import zipfile

import numpy as np
import pytest

import layout_test_data
import memory_file_system
import sample_data
from tpu_graphs.data import graphs, npz, storage


SAMPLE_FILES = sample_data.files("npz/**/*.npz")


def config_array_name(graph):
  return "config_feat" if isinstance(graph, graphs.TileGraph) else "node_config_feat"


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.parent.name + "/" + p.name[:20])
def test_reads_real_files_exactly(path):
  graph = npz.read_graph(path)
  raw = np.load(path)
  arrays = graphs.graph_arrays(graph)
  assert sorted(arrays) == sorted(raw.files)
  for name, value in arrays.items():
    assert value.dtype == raw[name].dtype and np.array_equal(value, raw[name]), name


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.parent.name + "/" + p.name[:20])
def test_streamed_config_array_equals_loaded(path):
  streamed = npz.read_graph(path, stream_configs=True)
  name = config_array_name(streamed)
  chunks = list(getattr(streamed, name).iter_chunks(64))
  assert all(chunk.shape[0] <= 64 for chunk in chunks)
  np.testing.assert_array_equal(np.concatenate(chunks), np.load(path)[name])


def test_sample_present_or_skipped():
  sample_data.require_sample("npz")
  assert len(SAMPLE_FILES) == 14


def test_write_is_deterministic_and_round_trips(tmp_path):
  path = sample_data.require_sample("npz/layout/xla/default/train/unet3d.npz")
  graph = npz.read_graph(path)
  npz.write_graph(tmp_path / "a.npz", graph)
  npz.write_graph(tmp_path / "b.npz", graph)
  assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
  again = npz.read_graph(tmp_path / "a.npz", collection=graph.collection, split=graph.split)
  for name, value in graphs.graph_arrays(again).items():
    np.testing.assert_array_equal(value, getattr(graph, name))


def test_members_are_dated_at_the_zip_epoch_so_the_bytes_are_the_same_any_day(tmp_path):
  npz.write_npz(tmp_path / "x.npz", {"a": np.arange(3), "b": np.ones((2, 2), np.float32)})
  with zipfile.ZipFile(tmp_path / "x.npz") as archive:
    assert [info.date_time for info in archive.infolist()] == [(1980, 1, 1, 0, 0, 0)] * 2


def _tile_file(tmp_path, config_feat):
  rng = np.random.default_rng(0)
  path = tmp_path / "tile/xla/train/g.npz"
  path.parent.mkdir(parents=True, exist_ok=True)
  np.savez(path, node_feat=rng.normal(size=(3, 140)).astype(np.float32), node_opcode=np.arange(3, dtype=np.uint8),
           edge_index=np.array([[1, 0], [2, 1]]), config_feat=config_feat,
           config_runtime=np.arange(1, len(config_feat) + 1), config_runtime_normalizers=np.ones(len(config_feat), int))
  return path


def test_a_streamed_array_reads_whole_as_loaded_in_any_dtype(tmp_path):
  config_feat = np.arange(5 * 24, dtype=np.float32).reshape(5, 24)
  streamed = npz.read_graph(_tile_file(tmp_path, config_feat), stream_configs=True).config_feat
  as_stored = np.asarray(streamed)
  assert as_stored.dtype == np.float32
  np.testing.assert_array_equal(as_stored, config_feat)
  as_double = np.asarray(streamed, np.float64)
  assert as_double.dtype == np.float64 and as_double.shape == (5, 24)
  np.testing.assert_array_equal(as_double, config_feat)


def test_a_fortran_ordered_config_array_is_refused_for_streaming_by_name(tmp_path):
  path = _tile_file(tmp_path, np.asfortranarray(np.arange(5 * 24, dtype=np.float32).reshape(5, 24)))
  with pytest.raises(graphs.GraphFileError, match=r"'config_feat' is stored in Fortran order; cannot stream it"):
    npz.read_graph(path, stream_configs=True)
  np.testing.assert_array_equal(npz.read_graph(path).config_feat, np.arange(5 * 24).reshape(5, 24))  # loaded: fine


@pytest.mark.parametrize("array", [np.zeros((0, 24), np.float32), np.arange(3, dtype=np.int64)], ids=["no_rows", "1d"])
def test_a_streamed_array_without_rows_or_of_one_dimension_reads_whole(tmp_path, array):
  npz.write_npz(tmp_path / "x.npz", {"x": array})
  streamed = npz.StreamedArray(tmp_path / "x.npz", "x.npy", array.shape, array.dtype, fortran=False)
  whole = np.asarray(streamed)
  assert whole.shape == array.shape and whole.dtype == array.dtype
  np.testing.assert_array_equal(whole, array)


def test_a_one_dimensional_array_streams_whatever_order_its_header_names(tmp_path):
  # One dimension reads the same in C and Fortran order: only arrays of two or more are refused.
  npz.write_npz(tmp_path / "x.npz", {"x": np.arange(4, dtype=np.int64)})
  streamed = npz.StreamedArray(tmp_path / "x.npz", "x.npy", (4,), np.int64, fortran=True)
  np.testing.assert_array_equal(np.concatenate(list(streamed.iter_chunks(3))), np.arange(4))
  with pytest.raises(graphs.GraphFileError, match=r"'x' is stored in Fortran order"):
    npz.StreamedArray(tmp_path / "x.npz", "x.npy", (2, 2), np.int64, fortran=True)


def test_read_array_reads_one_array_and_names_the_file_and_the_problem(tmp_path):
  arrays = _tile_arrays(7)
  npz.write_npz(tmp_path / "g.npz", arrays)
  for name in ("node_opcode", "config_feat", "config_runtime"):  # the first, a middle and the last but one member
    read = npz.read_array(str(tmp_path / "g.npz"), name)
    assert read.dtype == arrays[name].dtype
    np.testing.assert_array_equal(read, arrays[name])
  with pytest.raises(graphs.GraphFileError, match=r"g\.npz: missing key 'node_config_feat'$"):
    npz.read_array(tmp_path / "g.npz", "node_config_feat")
  (tmp_path / "corrupt.npz").write_bytes(b"not a zip")
  with pytest.raises(graphs.GraphFileError, match=r"corrupt\.npz: not a readable npz archive \(BadZipFile"):
    npz.read_array(tmp_path / "corrupt.npz", "config_feat")
  (tmp_path / "folder.npz").mkdir()
  with pytest.raises(graphs.GraphFileError, match=r"folder\.npz: a directory"):
    npz.read_array(str(tmp_path / "folder.npz"), "config_feat")


def test_members_other_than_arrays_are_passed_over(tmp_path):
  arrays = _tile_arrays(5)
  with zipfile.ZipFile(tmp_path / "g.npz", "w") as archive:
    archive.writestr("README.txt", "written by hand")
    for name, array in arrays.items():
      with archive.open(name + ".npy", "w") as stream:
        np.lib.format.write_array(stream, array)
  graph = npz.read_graph(tmp_path / "g.npz", collection="tile:xla", split="train")
  np.testing.assert_array_equal(graph.config_feat, arrays["config_feat"])


def test_a_file_outside_a_collection_folder_is_read_as_its_keys_say(tmp_path):
  npz.write_npz(tmp_path / "kernel.npz", _tile_arrays(5))
  assert isinstance(npz.read_graph(tmp_path / "kernel.npz"), graphs.TileGraph)
  unet = npz.read_graph(sample_data.require_sample("npz/layout/xla/default/train/unet3d.npz"))
  npz.write_graph(tmp_path / "program.npz", unet)
  assert isinstance(npz.read_graph(tmp_path / "program.npz"), graphs.LayoutGraph)
  npz.write_npz(tmp_path / "neither.npz", {"node_feat": np.zeros((1, 140), np.float32)})
  with pytest.raises(graphs.GraphFileError, match="cannot tell the collection"):
    npz.read_graph(tmp_path / "neither.npz")


def test_members_are_compressed_readable_by_all_and_carry_a_zip64_header(tmp_path):
  """Deflated by default (stored when asked), mode 0644 when unpacked, and each member's local header
  holds a zip64 extra field, which a streamed array past 4 GiB needs (its size is not known ahead)."""
  npz.write_npz(tmp_path / "x.npz", {"a": np.arange(300), "b": np.ones((20, 2), np.float32)})
  npz.write_npz(tmp_path / "stored.npz", {"a": np.arange(300)}, compress=False)
  content = (tmp_path / "x.npz").read_bytes()
  with zipfile.ZipFile(tmp_path / "x.npz") as archive:
    for info in archive.infolist():
      assert info.compress_type == zipfile.ZIP_DEFLATED and info.external_attr == 0o644 << 16, info
      name_length, extra_length = np.frombuffer(content[info.header_offset + 26:info.header_offset + 30], "<u2")
      extra = content[info.header_offset + 30 + name_length:][:extra_length]
      assert extra[:2] == b"\x01\x00", info  # the zip64 extended information's header id
  with zipfile.ZipFile(tmp_path / "stored.npz") as archive:
    assert [info.compress_type for info in archive.infolist()] == [zipfile.ZIP_STORED]


def test_an_array_of_python_objects_is_never_written(tmp_path):
  with pytest.raises(ValueError, match="allow_pickle"):
    npz.write_npz(tmp_path / "x.npz", {"x": np.array([{"a": 1}], dtype=object)})
  assert not (tmp_path / "x.npz").exists()


def test_a_chunked_array_whose_header_needs_format_2_is_written_in_it(tmp_path):
  # A header past 65,535 bytes (here a record of 6,000 named fields) does not fit format 1.0.
  dtype = np.dtype([(f"field_{i}", np.uint8) for i in range(6000)])
  rows = np.zeros(3, dtype)
  npz.write_npz(tmp_path / "x.npz", {"x": (rows.shape, dtype, lambda: [rows[:2], rows[2:]])})
  with zipfile.ZipFile(tmp_path / "x.npz") as archive, archive.open("x.npy") as stream:
    assert np.lib.format.read_magic(stream) == (2, 0)
  with zipfile.ZipFile(tmp_path / "x.npz") as archive, archive.open("x.npy") as stream:
    loaded = np.lib.format.read_array(stream, max_header_size=1 << 20)
  assert loaded.dtype == dtype and loaded.shape == (3,)


def test_chunked_write_equals_whole_write(tmp_path):
  rng = np.random.default_rng(0)
  big = rng.normal(size=(100, 7, 18)).astype(np.float32)
  chunks = lambda: (big[i:i + 30] for i in range(0, 100, 30))
  npz.write_npz(tmp_path / "chunked.npz", {"x": (big.shape, big.dtype, chunks)})
  npz.write_npz(tmp_path / "whole.npz", {"x": big})
  assert (tmp_path / "chunked.npz").read_bytes() == (tmp_path / "whole.npz").read_bytes()
  with pytest.raises(ValueError, match="promised 101"):
    npz.write_npz(tmp_path / "short.npz", {"x": ((101, 7, 18), np.float32, chunks)})
  assert not (tmp_path / "short.npz").exists()


def test_failed_write_leaves_no_file(tmp_path):
  def failing_chunks():
    yield np.zeros((2, 3), np.float32)
    raise RuntimeError("disk on fire")
  with pytest.raises(RuntimeError):
    npz.write_npz(tmp_path / "x.npz", {"x": ((4, 3), np.float32, failing_chunks)})
  assert list(tmp_path.iterdir()) == []


def _tile_arrays(num_configs: int = 200) -> dict:
  rng = np.random.default_rng(0)
  return {"node_feat": rng.normal(size=(3, 140)).astype(np.float32), "node_opcode": np.array([1, 2, 3], np.uint8),
          "edge_index": np.array([[1, 0], [2, 1]], np.int64),
          "config_feat": rng.normal(size=(num_configs, 24)).astype(np.float32),
          "config_runtime": np.arange(1, num_configs + 1, dtype=np.int64),
          "config_runtime_normalizers": np.ones(num_configs, np.int64)}


@pytest.mark.parametrize("make, problem", [
    (os.mkfifo, "a FIFO"), (lambda path: path.mkdir(), "a directory"),
    (lambda path: path.symlink_to(path.with_name("gone.npz")), "a dangling symbolic link")])
def test_special_files_are_refused_without_opening_them(tmp_path, make, problem):
  make(tmp_path / "x.npz")
  with pytest.raises(graphs.GraphFileError, match=f"x.npz: {problem}"):
    npz.read_graph(tmp_path / "x.npz", collection="tile:xla")


def test_header_promising_more_than_the_member_holds_is_refused_before_allocating(tmp_path):
  arrays = _tile_arrays()
  with zipfile.ZipFile(tmp_path / "huge.npz", "w") as archive:
    for name, array in arrays.items():
      with archive.open(name + ".npy", "w") as stream:
        header = {"descr": "<f4", "fortran_order": False, "shape": (1 << 40, 24)} if name == "config_feat" else None
        if header:
          np.lib.format.write_array_header_1_0(stream, header)
          stream.write(array.tobytes())
        else:
          np.lib.format.write_array(stream, array)
  for stream_configs in (False, True):
    with pytest.raises(graphs.GraphFileError, match=r"'config_feat' header promises a 1099511627776x24 float32 array"):
      npz.read_graph(tmp_path / "huge.npz", collection="tile:xla", stream_configs=stream_configs)


def test_crc_error_found_while_streaming_names_the_file_and_array(tmp_path):
  arrays = _tile_arrays()
  npz.write_npz(tmp_path / "crc.npz", arrays, compress=False)
  content = bytearray((tmp_path / "crc.npz").read_bytes())
  content[bytes(content).find(arrays["config_feat"].tobytes()[-64:]) + 32] ^= 0xFF
  (tmp_path / "crc.npz").write_bytes(bytes(content))
  graph = npz.read_graph(tmp_path / "crc.npz", collection="tile:xla", split="valid", stream_configs=True)
  with pytest.raises(graphs.GraphFileError, match=r"crc.npz: 'config_feat' is unreadable \(BadZipFile: Bad CRC-32"):
    list(graph.config_feat.iter_chunks(50))


def test_infers_collection_and_split_from_path():
  assert npz.infer_collection_and_split("/d/npz/layout/nlp/random/test/x.npz") == ("layout:nlp:random", "test")
  assert npz.infer_collection_and_split("/d/npz/tile/xla/valid/x.npz") == ("tile:xla", "valid")
  assert npz.infer_collection_and_split("/d/x.npz") == (None, None)
  assert npz.infer_collection_and_split("test/x.npz") == (None, "test")  # a relative path: two parts
  assert npz.infer_collection_and_split("/d/tile/xla/x.npz") == ("tile:xla", None)  # no split folder


def test_file_on_an_in_memory_file_system_reads_as_the_local_file():
  local = sample_data.require_sample("npz/layout/xla/default/train/unet3d.npz")
  url = storage.join(memory_file_system.copy_tree(local.parents[4], "npz"), "layout/xla/default/train/unet3d.npz")
  expected, graph = npz.read_graph(local), npz.read_graph(url)
  assert (graph.graph_id, graph.collection, graph.split) == ("unet3d", "layout:xla:default", "train")
  for name, value in graphs.graph_arrays(graph).items():
    np.testing.assert_array_equal(value, getattr(expected, name))
  streamed = npz.read_graph(url, stream_configs=True).node_config_feat
  np.testing.assert_array_equal(np.concatenate(list(streamed.iter_chunks(100))), expected.node_config_feat)


def test_missing_or_corrupt_file_on_an_in_memory_file_system_is_named_by_its_url():
  folder = memory_file_system.fresh_directory("npz")
  missing, corrupt = storage.join(folder, "missing.npz"), storage.join(folder, "corrupt.npz")
  with pytest.raises(graphs.GraphFileError, match=f"^{missing}: no such file$"):
    npz.read_graph(missing, collection="tile:xla")
  storage.write_bytes(corrupt, b"not a zip")
  with pytest.raises(graphs.GraphFileError, match=f"^{corrupt}: not a readable npz archive"):
    npz.read_graph(corrupt, collection="tile:xla")


def test_write_to_an_in_memory_file_system_gives_the_local_bytes(tmp_path):
  arrays = _tile_arrays()
  url = storage.join(memory_file_system.fresh_directory("npz"), "tile/xla/valid/g.npz")
  npz.write_npz(url, arrays)
  npz.write_npz(tmp_path / "g.npz", arrays)
  assert memory_file_system.tree_bytes(storage.parent(url)) == memory_file_system.tree_bytes(tmp_path)


def _with_value(array: np.ndarray, value: float) -> np.ndarray:
  changed = array.astype(np.float64 if abs(value) > 3e38 else array.dtype)
  changed.flat[5] = value
  return changed



@pytest.mark.parametrize("split, replaced, message", [
    ("train", {"node_feat": _with_value(np.zeros((4, 140)), 1e39)}, r"'node_feat' holds 1e\+39, beyond float32's range"),
    ("test", {"node_config_feat": _with_value(layout_test_data.small_layout_arrays()["node_config_feat"], 50)},
     r"'node_config_feat'\[0, 0, 5\] = 50 is not a layout value"),
    ("valid", {"node_config_feat": _with_value(layout_test_data.small_layout_arrays()["node_config_feat"], 2.5)},
     r"'node_config_feat'\[0, 0, 5\] = 2.5 is not a layout value"),
    ("train", {"config_runtime": np.zeros(4, np.int64)}, r"'config_runtime' is all 0 \(nothing measured\) in the training"),
    ("valid", {"config_runtime": np.array([0, 5, 6, 7], np.int64)},
     r"'config_runtime' is 0 at config 0 \(1 of 4 configs\) in labelled split valid, while others are measured"),
    ("train", {"node_config_ids": np.zeros(0, np.int64), "node_config_feat": np.zeros((4, 0, 18), np.float32)},
     r"'node_config_ids' is empty: no node is configurable"),
], ids=["float64_beyond_float32", "layout_value_50", "layout_value_2_5", "unmeasured_training_graph",
        "partly_measured_validation_graph", "no_configurable_node"])
@pytest.mark.parametrize("streamed", [False, True], ids=["loaded", "streamed"])
def test_reader_refuses_values_the_format_does_not_allow(tmp_path, split, replaced, message, streamed):
  path = tmp_path / "layout/xla/default" / split / "g.npz"
  npz.write_npz(path, layout_test_data.small_layout_arrays(**replaced))
  with pytest.raises(graphs.GraphFileError, match=message):
    graph = npz.read_graph(path, stream_configs=streamed)
    np.asarray(graph.node_config_feat)  # a streamed array's values are checked as they are read


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
