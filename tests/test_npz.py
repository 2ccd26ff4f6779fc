"""npz I/O: exact reads of the real release, streamed config arrays, deterministic atomic writes."""

import sys

import numpy as np
import pytest

import sample_data
from tpu_graphs.data import graphs, npz


def sample_files():
  root = sample_data.sample_dir() / "npz"
  return sorted(root.rglob("*.npz")) if root.exists() else []


def config_array_name(graph):
  return "config_feat" if isinstance(graph, graphs.TileGraph) else "node_config_feat"


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.parent.name + "/" + p.name[:20])
def test_reads_real_files_exactly(path):
  graph = npz.read_graph(path)
  raw = np.load(path)
  arrays = graphs.graph_arrays(graph)
  assert sorted(arrays) == sorted(raw.files)
  for name, value in arrays.items():
    assert value.dtype == raw[name].dtype and np.array_equal(value, raw[name]), name


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.parent.name + "/" + p.name[:20])
def test_streamed_config_array_equals_loaded(path):
  streamed = npz.read_graph(path, stream_configs=True)
  name = config_array_name(streamed)
  chunks = list(getattr(streamed, name).iter_chunks(64))
  assert all(chunk.shape[0] <= 64 for chunk in chunks)
  np.testing.assert_array_equal(np.concatenate(chunks), np.load(path)[name])


def test_sample_present_or_skipped():
  sample_data.require_sample("npz")
  assert len(sample_files()) == 14


def test_write_is_deterministic_and_round_trips(tmp_path):
  path = sample_data.require_sample("npz/layout/xla/default/train/unet3d.npz")
  graph = npz.read_graph(path)
  npz.write_graph(tmp_path / "a.npz", graph)
  npz.write_graph(tmp_path / "b.npz", graph)
  assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
  again = npz.read_graph(tmp_path / "a.npz", collection=graph.collection, split=graph.split)
  for name, value in graphs.graph_arrays(again).items():
    np.testing.assert_array_equal(value, getattr(graph, name))


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


def test_infers_collection_and_split_from_path():
  assert npz.infer_collection_and_split("/d/npz/layout/nlp/random/test/x.npz") == ("layout:nlp:random", "test")
  assert npz.infer_collection_and_split("/d/npz/tile/xla/valid/x.npz") == ("tile:xla", "valid")
  assert npz.infer_collection_and_split("/d/x.npz") == (None, None)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
