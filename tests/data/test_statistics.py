"""Statistics of TpuGraphs directories: checked against the sample's MANIFEST and hand-built files."""

import csv
import sys

import numpy as np
import pytest

import sample_data
from tpu_graphs.data import graphs
from tpu_graphs.data import npz
from tpu_graphs.data import statistics

SAMPLE_DIR = sample_data.sample_dir()


def _manifest_npz_rows():
  with open(SAMPLE_DIR / "MANIFEST.tsv") as manifest:
    return [row for row in csv.DictReader(manifest, delimiter="\t")
            if row["staged_path"].startswith("npz/")]


def _layout_graph(num_nodes: int, configurable: list[int]) -> graphs.LayoutGraph:
  arrays = {
      "node_feat": np.zeros((num_nodes, graphs.NODE_FEATURE_WIDTH), np.float32),
      "node_opcode": np.ones(num_nodes, np.uint8),
      "edge_index": np.array([[i + 1, i] for i in range(num_nodes - 1)], np.int64).reshape(-1, 2),
      "node_config_ids": np.array(configurable, np.int64),
      "node_config_feat": np.zeros((3, len(configurable), graphs.LAYOUT_CONFIG_FEATURE_WIDTH), np.float32),
      "config_runtime": np.array([5, 6, 7], np.int64),
      "node_splits": np.array([[0]], np.int64),
  }
  return graphs.validate_graph("built", "built", "layout:xla:random", "train", arrays)


def test_sample_rows_match_the_manifest():
  sample_data.require_sample("MANIFEST.tsv")
  rows = {(row.collection, row.split): row for row in statistics.directory_statistics(SAMPLE_DIR)}
  expected = {}
  for entry in _manifest_npz_rows():
    collection, split = npz.infer_collection_and_split(entry["staged_path"])
    expected.setdefault((collection, split), []).append(entry)
  assert set(rows) == set(expected)
  for key, entries in expected.items():
    nodes = [int(entry["n_nodes"]) for entry in entries]
    row = rows[key]
    assert row.graphs == len(entries)
    assert (row.nodes_min, row.nodes_median, row.nodes_max) == (min(nodes), np.median(nodes), max(nodes))
    assert row.edges_max == max(int(entry["m_edges"]) for entry in entries)
    assert row.configs_total == sum(int(entry["c_configs"]) for entry in entries)


def test_rows_are_ordered_tile_first_then_by_split():
  sample_data.require_sample("npz")
  keys = [(row.collection, row.split) for row in statistics.directory_statistics(SAMPLE_DIR)]
  assert keys[:3] == [("tile:xla", "train"), ("tile:xla", "valid"), ("tile:xla", "test")]
  assert keys[3:6] == [("layout:xla:default", split) for split in ("train", "valid", "test")]


def test_configurable_fraction_is_the_median_over_layout_graphs(tmp_path):
  split_dir = tmp_path / "release" / "npz" / "layout" / "xla" / "random" / "train"
  npz.write_graph(split_dir / "a.npz", _layout_graph(4, [1]))        # 0.25
  npz.write_graph(split_dir / "b.npz", _layout_graph(10, [0, 5]))    # 0.2
  npz.write_graph(split_dir / "c.npz", _layout_graph(2, [0, 1]))     # 1.0
  [row] = statistics.directory_statistics(tmp_path)
  assert (row.collection, row.split, row.graphs) == ("layout:xla:random", "train", 3)
  assert row.configurable_fraction_median == pytest.approx(0.25)
  assert (row.nodes_min, row.nodes_median, row.nodes_max) == (2, 4, 10)
  assert (row.configs_median, row.configs_max, row.configs_total) == (3, 3, 9)
  assert row.bytes_total == sum(path.stat().st_size for path in split_dir.iterdir())


def test_invalid_file_is_reported_by_name(tmp_path):
  bad = tmp_path / "npz" / "tile" / "xla" / "train" / "broken.npz"
  bad.parent.mkdir(parents=True)
  bad.write_bytes(b"not a zip archive")
  with pytest.raises(graphs.GraphFileError, match="broken.npz"):
    statistics.directory_statistics(tmp_path)


def test_table_has_aligned_markdown_rows(tmp_path):
  npz.write_graph(tmp_path / "npz" / "layout" / "xla" / "random" / "valid" / "a.npz", _layout_graph(4, [1]))
  table = statistics.format_table(statistics.directory_statistics(tmp_path)).splitlines()
  assert len(table) == 3
  assert table[1].startswith("|---")
  assert len({len(line) for line in table}) == 1
  assert [cell.strip() for cell in table[2].strip("|").split("|")][:3] == ["layout:xla:random", "valid", "1"]
  assert "25.0%" in table[2]


def test_bytes_are_formatted_in_decimal_units():
  assert [statistics.format_bytes(n) for n in (999, 1000, 12_345_678, 2.5e9)] == \
      ["999 B", "1.0 KB", "12.3 MB", "2.5 GB"]


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
