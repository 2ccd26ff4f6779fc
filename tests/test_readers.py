"""tf.data readers: evaluation sees every config once; training samples k per chunk, reproducibly."""

import shutil
import sys

import pytest
import tensorflow as tf

import sample_data
from tpu_graphs.data import convert, readers


@pytest.fixture(scope="module")
def records_root(tmp_path_factory):
  source = sample_data.require_sample("npz")
  root = tmp_path_factory.mktemp("records")
  npz_root = root / "npz"
  for relative in ["tile/xla/test", "layout/xla/default/valid", "layout/nlp/random/test"]:
    shutil.copytree(source / relative, npz_root / relative)
  convert.convert_directory(npz_root, root / "records", configs_per_chunk=400, shard_bytes=5000, progress=False)
  return root / "records"


def test_evaluation_covers_every_config_exactly_once(records_root):
  for relative, expected in [("tile/xla/test", {"0a1c5dcfa9f1f4ebcc1282a1d1ca8ecb": 32,
                                                "0a3585c3e686065389227fa374175e48": 1282,
                                                "0a8a2b247d7a20b9dcab1daf50066a4d": 807,
                                                "0abaea94d7b0a1c1f1b0bd23b73ce38c": 52,
                                                "0ac539372cc77cc6791794b369b984e1": 2951,
                                                "d6f5f54247bd1e58a10b9e7062c636ab": 25}),
                             ("layout/xla/default/valid", {"unet_3d.4x4.bf16": 1965})]:
    seen = {}
    for graph in readers.evaluation_dataset(records_root / relative):
      graph_id = graph.context["graph_id"][0].numpy().decode()
      seen.setdefault(graph_id, []).extend(graph.node_sets["config"]["config_index"].numpy().tolist())
      assert graph.node_sets["config"].total_size <= 400
    assert {g: sorted(i) for g, i in seen.items()} == {g: list(range(c)) for g, c in expected.items()}


def test_training_samples_k_distinct_configs_per_chunk(records_root):
  elements = list(readers.training_dataset(records_root / "layout/xla/default/valid", 16, seed=7))
  assert len(elements) == 5  # ceil(1965 / 400) chunks
  for graph in elements:
    indices = graph.node_sets["config"]["config_index"].numpy()
    assert len(indices) == 16 and len(set(indices)) == 16
    nc = int(graph.node_sets["node_config"].total_size) // 16
    assert nc == 62 and int(graph.node_sets["op"].total_size) == 3163


def test_training_order_is_a_function_of_the_seed(records_root):
  directory = records_root / "tile/xla/test"
  draw = lambda seed: [g.node_sets["config"]["config_index"].numpy().tolist()
                       for g in readers.training_dataset(directory, 8, seed=seed)]
  assert draw(3) == draw(3)
  assert draw(3) != draw(4)


def _config_draws(dataset, threads=None) -> list:
  """[(graph id, config indices)] of every element, read with a private pool of `threads` threads."""
  if threads:
    options = tf.data.Options()
    options.threading.private_threadpool_size = threads
    dataset = dataset.with_options(options)
  return [(g.context["graph_id"].numpy()[0], g.node_sets["config"]["config_index"].numpy().tolist()) for g in dataset]


def test_interleaved_parallel_reading_gives_the_same_elements_in_the_same_order(records_root):
  directory = records_root / "tile/xla/test"
  assert len(readers.read_manifest(directory)["shards"]) > 1  # interleaved: several shards read at a time
  parallel = _config_draws(readers.training_dataset(directory, 8, seed=3))
  assert parallel == _config_draws(readers.training_dataset(directory, 8, seed=3))
  assert parallel == _config_draws(readers.training_dataset(directory, 8, seed=3), threads=1)
  assert len(parallel) == sum(g["chunks"] for shard in readers.read_manifest(directory)["shards"] for g in shard["graphs"])


def test_evaluation_reads_graphs_in_file_order(records_root):
  directory = records_root / "tile/xla/test"
  in_files = [g["graph_id"] for shard in readers.read_manifest(directory)["shards"] for g in shard["graphs"]]
  read = [graph_id.decode() for graph_id, _ in _config_draws(readers.evaluation_dataset(directory))]
  assert list(dict.fromkeys(read)) == in_files


def test_repeated_passes_sample_fresh_configs_from_every_chunk(records_root):
  directory = records_root / "layout/xla/default/valid"
  elements = list(readers.training_dataset(directory, 16, seed=7, passes=3))
  assert len(elements) == 15  # 5 chunks, 3 passes
  samples = [tuple(sorted(g.node_sets["config"]["config_index"].numpy())) for g in elements]
  assert len(set(samples)) == 15
  chunk_of = lambda sample: sample[0] // 400
  assert sorted(chunk_of(s) for s in samples) == sorted(list(range(5)) * 3)


def test_missing_records_directory_says_what_to_do(tmp_path):
  with pytest.raises(FileNotFoundError, match="convert the npz files first"):
    readers.evaluation_dataset(tmp_path)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
