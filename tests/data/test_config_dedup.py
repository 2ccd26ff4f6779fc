"""Config deduplication: identical feature rows merge into their first occurrence, runtimes averaged."""

import dataclasses
import sys

import numpy as np
import pytest

import memory_file_system
from tpu_graphs.data import config_dedup, graphs, npz


def _graph(split: str = "train") -> graphs.LayoutGraph:
  rng = np.random.default_rng(0)
  distinct = rng.integers(-1, 4, (4, 3, 18)).astype(np.float32)
  order = np.array([0, 1, 0, 2, 1, 3, 0])
  runtime = np.array([10, 20, 13, 40, 25, 50, 16]) if split != "test" else np.zeros(7, np.int64)
  arrays = {"node_feat": rng.uniform(0, 1, (5, 140)).astype(np.float32), "node_opcode": np.arange(5, dtype=np.uint8),
            "edge_index": np.array([[1, 0], [2, 1], [3, 2], [4, 3]]), "node_config_ids": np.array([0, 2, 4]),
            "node_config_feat": distinct[order], "config_runtime": runtime, "node_splits": np.array([[0]])}
  return graphs.validate_graph("test", "g", "layout:xla:random", split, arrays)


def test_duplicates_point_to_their_first_occurrence():
  np.testing.assert_array_equal(config_dedup.duplicate_groups(_graph(), configs_per_chunk=2), [0, 1, 0, 3, 1, 5, 0])


def test_written_file_keeps_first_occurrences_with_mean_runtimes(tmp_path):
  graph = _graph()
  path = tmp_path / "layout/xla/random/train/g.npz"
  path.parent.mkdir(parents=True)
  assert config_dedup.write_deduplicated(graph, path, configs_per_chunk=3) == (7, 4)
  merged = npz.read_graph(path)
  np.testing.assert_array_equal(merged.node_config_feat, graph.node_config_feat[[0, 1, 3, 5]])
  np.testing.assert_array_equal(merged.config_runtime, [13, 22, 40, 50])  # 10,13,16 -> 13; 20,25 -> 22.5 -> 22
  np.testing.assert_array_equal(merged.node_feat, graph.node_feat)


@pytest.mark.parametrize("node, column", [(0, 0), (2, 17), (1, 9), (2, 0), (0, 17)])
def test_configs_that_differ_in_one_value_stay_apart(node, column):
  # Config 1 differs from config 0 at one node and one column only; config 2 repeats config 0.
  rows = np.full((3, 3, 18), 2, np.float32)
  rows[1, node, column] = -1
  arrays = {"node_feat": np.zeros((5, 140), np.float32), "node_opcode": np.zeros(5, np.uint8),
            "edge_index": np.array([[1, 0], [2, 1]]), "node_config_ids": np.array([0, 2, 4]),
            "node_config_feat": rows, "config_runtime": np.array([10, 20, 30]), "node_splits": np.array([[0]])}
  graph = graphs.validate_graph("test", "g", "layout:xla:random", "train", arrays)
  for configs_per_chunk in (1, 2, 3):
    np.testing.assert_array_equal(config_dedup.duplicate_groups(graph, configs_per_chunk), [0, 1, 0])


def test_graphs_without_runtimes_are_refused(tmp_path):
  with pytest.raises(ValueError, match="without runtimes"):
    config_dedup.write_deduplicated(_graph("test"), tmp_path / "g.npz")
  # A validation file may hold no measured runtime (graphs._check_measured): not one to deduplicate either.
  unmeasured = dataclasses.replace(_graph("valid"), config_runtime=np.zeros(7, np.int64))
  with pytest.raises(ValueError, match=r"without runtimes cannot be deduplicated \(split valid\)"):
    config_dedup.write_deduplicated(unmeasured, tmp_path / "g.npz")
  assert not (tmp_path / "g.npz").exists()


def test_a_runtime_of_one_is_a_runtime(tmp_path):
  graph = dataclasses.replace(_graph(), config_runtime=np.array([1, 1, 3, 1, 1, 1, 1]))
  assert config_dedup.write_deduplicated(graph, tmp_path / "g.npz") == (7, 4)
  np.testing.assert_array_equal(npz.read_graph(tmp_path / "g.npz").config_runtime, [2, 1, 1, 1])  # 1,3,1 -> 1.67


def test_a_rerun_writes_the_files_missing_after_those_kept(tmp_path):
  for name in ("a", "b", "c"):
    npz.write_graph(tmp_path / f"npz/layout/xla/random/train/{name}.npz", _graph())
  assert len(config_dedup.deduplicate_directory(tmp_path / "npz", tmp_path / "dedup")) == 3
  (tmp_path / "dedup/layout/xla/random/train/c.npz").unlink()
  assert config_dedup.deduplicate_directory(tmp_path / "npz", tmp_path / "dedup") == {
      "layout/xla/random/train/c.npz": (7, 4)}


def test_deduplicating_on_an_in_memory_file_system_gives_the_local_bytes(tmp_path):
  npz.write_graph(tmp_path / "npz/layout/xla/random/train/g.npz", _graph())
  url = memory_file_system.copy_tree(tmp_path / "npz", "npz")
  local = config_dedup.deduplicate_directory(tmp_path / "npz", tmp_path / "dedup")
  remote = config_dedup.deduplicate_directory(url, url + "-dedup")
  assert local == remote == {"layout/xla/random/train/g.npz": (7, 4)}
  assert memory_file_system.tree_bytes(url + "-dedup") == memory_file_system.tree_bytes(tmp_path / "dedup")
  assert config_dedup.deduplicate_directory(url, url + "-dedup") == {}  # a rerun keeps the files written


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
