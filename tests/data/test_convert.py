"""The converter: sharded, byte-deterministic, resumable after a kill, and strict on bad input."""

import json
import multiprocessing
import os
import shutil
import signal
import sys
import threading
import time

import numpy as np
import pytest

import memory_file_system
import sample_data
import tile_test_data
from tpu_graphs.data import convert, graphs, storage


def copy_sample_subset(destination):
  """A small tree of real files: two collections, several splits."""
  source = sample_data.require_sample("npz")
  for relative in ["tile/xla/test", "tile/xla/train", "tile/xla/valid", "layout/xla/default/train",
                   "layout/xla/default/valid"]:
    shutil.copytree(source / relative, destination / relative)
  return destination


def tree_bytes(root):
  return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_two_conversions_give_identical_bytes(tmp_path):
  source = copy_sample_subset(tmp_path / "npz")
  convert.convert_directory(source, tmp_path / "a", configs_per_chunk=300, shard_bytes=4000, progress=False)
  convert.convert_directory(source, tmp_path / "b", configs_per_chunk=300, shard_bytes=4000, progress=False)
  first, second = tree_bytes(tmp_path / "a"), tree_bytes(tmp_path / "b")
  assert first == second
  assert "tile/xla/test/structure-00003-of-00004.tfrecord.gz" in first  # 4 kB shards: 4 for tile test


def test_manifest_counts_every_graph_and_config(tmp_path):
  source = copy_sample_subset(tmp_path / "npz")
  summary = convert.convert_directory(source, tmp_path / "out", configs_per_chunk=500, progress=False)
  manifest = json.loads((tmp_path / "out/layout/xla/default/valid/manifest.json").read_text())
  [entry] = [g for s in manifest["shards"] for g in s["graphs"]]
  assert entry["graph_id"] == "unet_3d.4x4.bf16"
  assert (entry["nodes"], entry["edges"], entry["configs"], entry["chunks"]) == (3163, 5112, 1965, 4)
  assert entry["source_sha256"] == storage.sha256(source / "layout/xla/default/valid/unet_3d.4x4.bf16.npz")
  assert {(g["collection"], g["split"]) for g in summary.groups} == {
      ("tile:xla", "test"), ("tile:xla", "train"), ("tile:xla", "valid"),
      ("layout:xla:default", "train"), ("layout:xla:default", "valid")}
  assert summary.graphs_written == 10 and summary.graphs_skipped == 0


def test_rerun_skips_finished_shards(tmp_path):
  source = copy_sample_subset(tmp_path / "npz")
  convert.convert_directory(source, tmp_path / "out", shard_bytes=4000, progress=False)
  before = tree_bytes(tmp_path / "out")
  again = convert.convert_directory(source, tmp_path / "out", shard_bytes=4000, progress=False)
  assert again.graphs_written == 0 and again.graphs_skipped == 10
  assert tree_bytes(tmp_path / "out") == before


def test_conversion_into_an_in_memory_file_system_writes_the_local_bytes_and_resumes(tmp_path):
  source = copy_sample_subset(tmp_path / "npz")
  convert.convert_directory(source, tmp_path / "local", configs_per_chunk=300, shard_bytes=4000, progress=False)
  url = memory_file_system.fresh_directory("records")
  summary = convert.convert_directory(source, url, configs_per_chunk=300, shard_bytes=4000, progress=False)
  assert memory_file_system.tree_bytes(url) == memory_file_system.tree_bytes(tmp_path / "local")
  assert summary.groups[0]["directory"].startswith(url + "/")
  again = convert.convert_directory(source, url, configs_per_chunk=300, shard_bytes=4000, progress=False)
  assert again.graphs_written == 0 and again.graphs_skipped == 10


def test_input_on_an_in_memory_file_system_gives_the_local_bytes(tmp_path):
  source = copy_sample_subset(tmp_path / "npz")
  local = convert.convert_directory(source, tmp_path / "local", configs_per_chunk=300, shard_bytes=4000, progress=False)
  url = memory_file_system.copy_tree(source, "npz")
  remote = convert.convert_directory(url, tmp_path / "remote", configs_per_chunk=300, shard_bytes=4000, progress=False)
  assert memory_file_system.tree_bytes(tmp_path / "remote") == memory_file_system.tree_bytes(tmp_path / "local")
  assert [g["npz_bytes"] for g in remote.groups] == [g["npz_bytes"] for g in local.groups]


def test_missing_input_folder_on_an_in_memory_file_system_is_named():
  url = storage.join(memory_file_system.fresh_directory("npz"), "none")
  with pytest.raises(FileNotFoundError, match=f"{url}: input directory not found"):
    convert.convert_directory(url, url + "-out", progress=False)


def test_rerun_from_a_narrower_root_reuses_the_shards(tmp_path):
  source = copy_sample_subset(tmp_path / "npz")
  convert.convert_directory(source, tmp_path / "out", progress=False)
  again = convert.convert_directory(source / "layout/xla/default/valid", tmp_path / "out", progress=False)
  assert again.graphs_written == 0 and again.graphs_skipped == 1


def _convert_forever(source, output):
  convert.convert_directory(source, output, configs_per_chunk=50, shard_bytes=1, progress=False)


def test_resume_after_kill_redoes_only_the_unfinished_shard(tmp_path):
  source = copy_sample_subset(tmp_path / "npz")
  reference = tmp_path / "reference"
  convert.convert_directory(source, reference, configs_per_chunk=50, shard_bytes=1, progress=False)
  output = tmp_path / "out"
  process = multiprocessing.get_context("spawn").Process(target=_convert_forever, args=(source, output))
  process.start()
  shard_jsons = lambda: list(output.rglob("shard-*.json"))
  deadline = time.time() + 120
  while len(shard_jsons()) < 2 and time.time() < deadline and process.is_alive():
    time.sleep(0.05)
  os.kill(process.pid, signal.SIGKILL)
  process.join()
  finished = len(shard_jsons())
  assert 2 <= finished < 10, "kill should land mid-conversion"
  resumed = convert.convert_directory(source, output, configs_per_chunk=50, shard_bytes=1, progress=False)
  assert resumed.graphs_skipped >= finished and resumed.graphs_written == 10 - resumed.graphs_skipped
  assert tree_bytes(output) == tree_bytes(reference)
  assert not list(output.rglob("*.tmp"))


def test_changed_settings_redo_the_shards(tmp_path):
  source = copy_sample_subset(tmp_path / "npz")
  convert.convert_directory(source, tmp_path / "out", configs_per_chunk=500, progress=False)
  again = convert.convert_directory(source, tmp_path / "out", configs_per_chunk=300, progress=False)
  assert again.graphs_written == 10


def test_bad_input_file_is_named(tmp_path):
  source = copy_sample_subset(tmp_path / "npz")
  bad = source / "tile/xla/train/broken.npz"
  bad.write_bytes(b"not a zip")
  with pytest.raises(graphs.GraphFileError, match="broken.npz: not a readable npz archive"):
    convert.convert_directory(source, tmp_path / "out", progress=False)


def test_file_outside_the_standard_tree_is_named(tmp_path):
  (tmp_path / "npz").mkdir()
  np.savez(tmp_path / "npz/stray.npz", x=np.zeros(3))
  with pytest.raises(graphs.GraphFileError, match="stray.npz: cannot tell collection and split"):
    convert.convert_directory(tmp_path / "npz", tmp_path / "out", progress=False)


@pytest.mark.parametrize("damage", ["truncate", "overwrite"])
def test_damaged_record_file_of_a_finished_shard_is_converted_again(tmp_path, damage):
  source = tile_test_data.write_tile_tree(tmp_path, {"train": 6, "valid": 2})
  convert.convert_directory(source, tmp_path / "out", progress=False)
  intact = tree_bytes(tmp_path / "out")
  damaged = tmp_path / "out/tile/xla/train/configs-00000-of-00001.tfrecord.gz"
  content = damaged.read_bytes()
  damaged.write_bytes(content[:len(content) // 2] if damage == "truncate" else content[:-8] + bytes(8))
  again = convert.convert_directory(source, tmp_path / "out", progress=False)
  assert (again.graphs_written, again.graphs_skipped) == (6, 2)
  assert tree_bytes(tmp_path / "out") == intact


def test_a_second_converter_waits_for_the_first_instead_of_deleting_its_temporaries(tmp_path):
  source = tile_test_data.write_tile_tree(tmp_path, {"valid": 2})
  folder = tmp_path / "out/tile/xla/valid"
  with convert.exclusive_shard_dir(folder):  # another converter is writing
    (folder / ".configs-00000-of-00001.tfrecord.gz.x.tmp").write_text("being written")
    second = threading.Thread(target=convert.convert_directory, args=(source, tmp_path / "out"), kwargs={"progress": False})
    second.start()
    second.join(timeout=2)
    assert second.is_alive() and (folder / ".configs-00000-of-00001.tfrecord.gz.x.tmp").exists()
  second.join(timeout=60)
  assert not second.is_alive() and (folder / "manifest.json").exists()


def test_edited_shard_json_is_not_believed_and_the_shard_is_converted_again(tmp_path):
  npz_root = tile_test_data.write_tile_tree(tmp_path, {"valid": 2}, num_configs=8)
  convert.convert_directory(npz_root, tmp_path / "records", progress=False)
  shard_json = tmp_path / "records/tile/xla/valid/shard-00000-of-00001.json"
  written = shard_json.read_text()
  shard = json.loads(written)
  shard["graphs"][0]["configs"] += 100  # readers would believe this count
  shard_json.write_text(json.dumps(shard))
  summary = convert.convert_directory(npz_root, tmp_path / "records", progress=False)
  assert summary.graphs_written == 2 and shard_json.read_text() == written


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
