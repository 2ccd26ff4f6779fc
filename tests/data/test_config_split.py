"""Config splits of one real program: disjoint seeded partitions, rows as in the original, test
runtimes hidden."""

import sys

import numpy as np
import pytest

import layout_test_data
import sample_data
from tpu_graphs.data import config_split, npz


def test_rows_partition_the_configs_by_fraction_and_seed():
  rows = config_split.split_rows(1159, seed=0)
  assert [len(rows[s]) for s in ("train", "valid", "test")] == [580, 289, 290]
  assert np.array_equal(np.sort(np.concatenate(list(rows.values()))), np.arange(1159))
  assert np.array_equal(config_split.split_rows(1159, seed=0)["test"], rows["test"])
  assert not np.array_equal(config_split.split_rows(1159, seed=1)["test"], rows["test"])
  with pytest.raises(ValueError, match="do not sum to 1"):
    config_split.split_rows(10, 0, {"train": 0.5, "test": 0.4})


def test_split_files_hold_the_original_rows_and_hide_test_runtimes(tmp_path):
  path = sample_data.require_sample("npz") / "layout/xla/default/train/unet3d.npz"
  graph = npz.read_graph(path)
  rows = config_split.write_config_split(graph, tmp_path, seed=2)
  for split in ("train", "valid", "test"):
    part = npz.read_graph(tmp_path / "layout/xla/default" / split / "unet3d.npz")
    assert part.split == split and part.collection == "layout:xla:default"
    np.testing.assert_array_equal(part.node_config_feat, graph.node_config_feat[rows[split]])
    np.testing.assert_array_equal(part.node_feat, graph.node_feat)
    expected = np.zeros(len(rows[split])) if split == "test" else graph.config_runtime[rows[split]]
    np.testing.assert_array_equal(part.config_runtime, expected)


def test_a_program_whose_fastest_config_takes_one_unit_is_labelled(tmp_path):
  # Runtimes are positive integers: 1 is the smallest measured one.
  graph = layout_test_data.layout_graph(np.zeros((8, 2, 18)), runtimes=[1, 2, 3, 4, 5, 6, 7, 8])
  rows = config_split.write_config_split(graph, tmp_path / "split", seed=0)
  assert sorted(np.concatenate(list(rows.values()))) == list(range(8))
  npz.write_graph(tmp_path / "tree/layout/xla/random/train/built.npz", graph)
  assert config_split.labelled_layout_files(tmp_path / "tree") == [tmp_path / "tree/layout/xla/random/train/built.npz"]


def test_unlabelled_files_cannot_be_split(tmp_path):
  path = next((sample_data.require_sample("npz") / "layout/xla/random/test").glob("*.npz"))
  with pytest.raises(ValueError, match="needs measured runtimes"):
    config_split.write_config_split(npz.read_graph(path), tmp_path, seed=0)


def test_only_layout_files_with_every_runtime_measured_count_as_labelled(tmp_path):
  sample = sample_data.require_sample("npz")
  found = config_split.labelled_layout_files(sample)
  # The sample's layout test files carry zero runtimes; its tile files are no layout files.
  assert [path.stem for path in found] == ["unet3d", "unet_3d.4x4.bf16"]
  assert config_split.labelled_layout_files(tmp_path) == []


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
