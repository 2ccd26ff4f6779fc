"""benchmarks/release_scale.py takes the scoring rates it extrapolates with from the result files
that measured them, at run time: change a figure there and the estimate follows."""

import sys

import pytest
import sample_data

from benchmarks import release_scale
from tpu_graphs.data import errors

LAYOUT_RESULT = """Layout model speed and memory (`benchmarks/train_layout.py`), 2026-12-01, on a machine.
Command: `python benchmarks/train_layout.py all --parts=score`
Commit: {commit}

| graph | ops | configs | prune hops | seconds | configs/s | peak RSS |
|---|---:|---:|---:|---:|---:|---:|
| unet_3d.4x4.bf16 | 3,163 | 1,965 | 0 | 13.1 | {small_rate} | 0.55 GB |
| 3a0c5517a87df8d82fd637b83298a3ba | 21,918 | 1,001 | 0 | 21.7 | 46 | 0.88 GB |
"""
TILE_RESULT = """Serving (`benchmarks/serve.py`), 2026-12-01, on a machine.
Command: `python benchmarks/serve.py`
Commit: def456

| measure | value |
|---|---:|
| tile: warm kernels/s | 445 |
| tile: warm configs/s | 1,000 |
"""


@pytest.fixture
def result_files(tmp_path):
  sample_data.require_sample("npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz")
  sample_data.require_sample("npz/layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz")
  layout, tile = tmp_path / "train_layout_score.md", tmp_path / "serve.md"
  layout.write_text(LAYOUT_RESULT.format(commit="abc123 (the commit that recorded this result)", small_rate=150))
  tile.write_text(TILE_RESULT)
  return layout, tile


def test_rates_are_the_figures_of_the_result_files_with_their_commits(result_files):
  rates = release_scale.scoring_rates(*result_files)
  # 62 and 848: the configurable ops of the two sample files the rows name.
  assert rates.layout == ((62, 150.0), (848, 46.0)) and rates.tile == 1000.0
  assert rates.peak == "0.88 GB on the 21,918-op graph 3a0c5517a87df8d82fd637b83298a3ba"
  assert rates.sources == ("`train_layout_score.md` at abc123", "`serve.md` at def456")
  assert rates.layout_seconds_per_config(62) == pytest.approx(1 / 150)
  assert rates.layout_seconds_per_config(848) == pytest.approx(1 / 46)


def test_a_changed_figure_changes_the_estimate(result_files):
  layout, tile = result_files
  before = release_scale.scoring_rates(layout, tile).layout_seconds_per_config(62)
  layout.write_text(LAYOUT_RESULT.format(commit="abc123", small_rate=300))
  assert release_scale.scoring_rates(layout, tile).layout_seconds_per_config(62) == pytest.approx(before / 2)


def test_a_result_file_without_the_figure_is_named(result_files):
  layout, tile = result_files
  tile.write_text(TILE_RESULT.replace("tile: warm configs/s", "tile: configs/s"))
  with pytest.raises(errors.InputError, match=r"serve\.md: no row 'tile: warm configs/s'"):
    release_scale.scoring_rates(layout, tile)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
