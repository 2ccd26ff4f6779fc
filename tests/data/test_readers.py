"""tf.data readers: evaluation sees every config once; training samples k per chunk, reproducibly."""

import json
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf

import layout_test_data
import sample_data
import tile_test_data
from tpu_graphs.data import convert, errors, npz, readers

# The small collections below, converted with 2 configs per chunk and one graph per shard: tile
# kernel_<i> has 2 i + 1 configs, so i + 1 chunks (the last of one config).
SMALL_CHUNK = 2


def _kernel_chunks(index: int) -> int:
  return index + 1


@pytest.fixture(scope="module")
def small_records(tmp_path_factory):
  """Converted records of small generated graphs: tile/xla/train (6 one-graph shards), tile/xla/valid
  (2) and layout/xla/random/train (graphs of 1 and 3 configurable ops, 3 configs each)."""
  root = tmp_path_factory.mktemp("small")
  rng = np.random.default_rng(0)
  for split, count in [("train", 6), ("valid", 2)]:
    directory = root / "npz/tile/xla" / split
    directory.mkdir(parents=True)
    for index in range(count):
      graph_id = f"kernel_{index}"
      num_configs = SMALL_CHUNK * _kernel_chunks(index) - 1
      npz.write_graph(directory / f"{graph_id}.npz", tile_test_data.tile_graph(rng, graph_id, split, num_configs))
  directory = root / "npz/layout/xla/random/train"
  directory.mkdir(parents=True)
  for graph_id, slots in [("ops_1", 1), ("ops_3", 3)]:
    npz.write_graph(directory / f"{graph_id}.npz",
                    layout_test_data.layout_graph(rng.integers(-1, 6, size=(3, slots, 18)), runtimes=[5, 7, 6]))
  convert.convert_directory(root / "npz", root / "records", configs_per_chunk=SMALL_CHUNK, shard_bytes=1,
                            progress=False)
  return root


def _graph_ids(dataset) -> list[str]:
  return [graph.context["graph_id"][0].numpy().decode() for graph in dataset]


def _interleaved(sources: list[list], cycle_length: int) -> list:
  """tf.data's interleave with block length 1, written out: `cycle_length` sources open at a time,
  one element from each in turn; a finished source's place goes to the next source, which is read
  from when that place comes round again."""
  pending, slots, out, position = iter(sources), [None] * cycle_length, [], 0
  exhausted = False
  while not exhausted or any(slot is not None for slot in slots):
    if slots[position] is None and not exhausted:
      source = next(pending, None)
      if source is None:
        exhausted = True
        continue
      slots[position] = iter(source)
    if slots[position] is not None:
      element = next(slots[position], None)
      if element is None:
        slots[position] = None
      else:
        out.append(element)
    position = (position + 1) % cycle_length
  return out


def test_evaluation_reads_every_chunk_of_every_shard_in_file_order(small_records):
  read = _graph_ids(readers.evaluation_dataset(small_records / "records/tile/xla/train"))
  assert read == [f"kernel_{i}" for i in range(6) for _ in range(_kernel_chunks(i))]


def test_training_reads_four_shards_at_a_time_one_element_from_each_in_turn(small_records):
  # The shard order of seed 5, recorded: a resumed run replays its epochs only if it stays the same.
  shard_order = [5, 1, 3, 4, 0, 2]
  expected = _interleaved([[f"kernel_{i}"] * _kernel_chunks(i) for i in shard_order], cycle_length=4)
  assert expected[:6] == ["kernel_5", "kernel_1", "kernel_3", "kernel_4", "kernel_5", "kernel_1"]
  dataset = readers.training_dataset(small_records / "records/tile/xla/train", 1, seed=5, shuffle_buffer=1)
  assert _graph_ids(dataset) == expected


def test_training_interleaves_two_shards_too(small_records):
  # Seed 5 reads kernel_1 (2 chunks) before kernel_0 (1 chunk).
  dataset = readers.training_dataset(small_records / "records/tile/xla/valid", 1, seed=5, shuffle_buffer=1)
  assert _graph_ids(dataset) == ["kernel_1", "kernel_0", "kernel_1"]


def test_one_shard_is_read_whole(small_records, tmp_path):
  records_dir = tmp_path / "one"
  shutil.copytree(small_records / "records/tile/xla/train", records_dir)
  manifest = json.loads((records_dir / "manifest.json").read_text())
  manifest["shards"] = manifest["shards"][2:3]
  (records_dir / "manifest.json").write_text(json.dumps(manifest))
  assert _graph_ids(readers.evaluation_dataset(records_dir)) == ["kernel_2"] * 3
  assert _graph_ids(readers.training_dataset(records_dir, 1, seed=5, shuffle_buffer=1)) == ["kernel_2"] * 3


def test_the_same_training_dataset_iterated_twice_gives_the_same_order(small_records):
  dataset = readers.training_dataset(small_records / "records/tile/xla/train", 1, seed=3, passes=2)
  first = _config_draws(dataset)
  assert first == _config_draws(dataset)
  assert [graph_id for graph_id, _ in first] != sorted(graph_id for graph_id, _ in first)  # shuffled


def test_the_default_shuffle_buffer_holds_64_elements(small_records):
  directory = small_records / "records/tile/xla/valid"  # 3 chunks
  draw = lambda **buffer: _config_draws(readers.training_dataset(directory, 1, seed=3, passes=22, **buffer))
  default = draw()
  assert len(default) == 66  # more than the buffer holds: its size shapes the order
  assert default == draw(shuffle_buffer=64)


def test_training_samples_k_configs_of_a_chunk_or_all_if_fewer(small_records):
  elements = list(readers.training_dataset(small_records / "records/tile/xla/train", 2, seed=1, shuffle_buffer=1))
  assert len(elements) == sum(map(_kernel_chunks, range(6)))  # one pass by default
  counts = {}
  for graph in elements:
    graph_id = graph.context["graph_id"][0].numpy().decode()
    indices = graph.node_sets["config"]["config_index"].numpy().tolist()
    counts.setdefault(graph_id, []).append(len(indices))
    assert len(set(indices)) == len(indices)
  assert counts == {f"kernel_{i}": [2] * (_kernel_chunks(i) - 1) + [1] for i in range(6)}


def test_sampled_layout_configs_keep_their_node_config_features(small_records):
  sources = {graph_id: npz.read_graph(small_records / f"npz/layout/xla/random/train/{graph_id}.npz")
             for graph_id in ("ops_1", "ops_3")}
  seen = {}
  for graph in readers.training_dataset(small_records / "records/layout/xla/random/train", 2, seed=4):
    source = sources[graph.context["graph_id"][0].numpy().decode()]
    picked = graph.node_sets["config"]["config_index"].numpy()
    slots = source.node_config_feat.shape[1]
    np.testing.assert_allclose(graph.node_sets["node_config"]["feat"].numpy(),
                               source.node_config_feat[picked].reshape(-1, 18))
    # One graph: every node and edge set has one size, as each structure's does.
    assert graph.node_sets["node_config"].sizes.numpy().tolist() == [len(picked) * slots]
    assert graph.edge_sets["belongs_to"].sizes.numpy().tolist() == [len(picked) * slots]
    belongs_to = graph.edge_sets["belongs_to"].adjacency
    assert belongs_to.source.numpy().tolist() == list(range(len(picked) * slots))
    assert belongs_to.target.numpy().tolist() == [c for c in range(len(picked)) for _ in range(slots)]
    seen.setdefault(source.graph_id, []).append(len(picked))
  assert {g: sorted(n) for g, n in seen.items()} == {"ops_1": [1, 2], "ops_3": [1, 2]}


def _zeroed_ops(graph):
  op = graph.node_sets["op"]
  return graph.replace_features(node_sets={"op": {**op.features, "feat": tf.zeros_like(op["feat"])}})


def test_the_structure_transform_shapes_every_element(small_records):
  directory = small_records / "records/tile/xla/valid"
  untransformed = next(iter(readers.evaluation_dataset(directory)))
  assert np.any(untransformed.node_sets["op"]["feat"].numpy() != 0)
  for dataset in (readers.evaluation_dataset(directory, structure_transform=_zeroed_ops),
                  readers.training_dataset(directory, 1, seed=5, structure_transform=_zeroed_ops)):
    elements = list(dataset)
    assert len(elements) == 3
    assert all(not np.any(graph.node_sets["op"]["feat"].numpy()) for graph in elements)


@pytest.mark.parametrize("shards", [None, "shards", [1, 2], [{}, "a shard"]])
def test_a_manifest_without_a_list_of_shard_entries_is_refused(small_records, tmp_path, shards):
  records_dir = tmp_path / "records"
  shutil.copytree(small_records / "records/tile/xla/valid", records_dir)
  manifest = json.loads((records_dir / "manifest.json").read_text())
  manifest["shards"] = shards
  (records_dir / "manifest.json").write_text(json.dumps(manifest))
  with pytest.raises(errors.InputError, match=r"manifest.json: damaged \(no list of shards\)"):
    readers.read_manifest(records_dir)


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


def test_training_order_is_a_function_of_the_seed(small_records):
  directory = small_records / "records/tile/xla/train"
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


def test_interleaved_parallel_reading_gives_the_same_elements_in_the_same_order(small_records):
  directory = small_records / "records/tile/xla/train"
  assert len(readers.read_manifest(directory)["shards"]) > 1  # interleaved: several shards read at a time
  parallel = _config_draws(readers.training_dataset(directory, 8, seed=3))
  assert parallel == _config_draws(readers.training_dataset(directory, 8, seed=3))
  assert parallel == _config_draws(readers.training_dataset(directory, 8, seed=3), threads=1)
  assert len(parallel) == sum(g["chunks"] for shard in readers.read_manifest(directory)["shards"] for g in shard["graphs"])


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


def test_edited_manifest_is_refused_when_records_are_read(tmp_path):
  npz_root = tile_test_data.write_tile_tree(tmp_path, {"valid": 2}, num_configs=8)
  convert.convert_directory(npz_root, tmp_path / "records", progress=False)
  records_dir = tmp_path / "records/tile/xla/valid"
  manifest = json.loads((records_dir / "manifest.json").read_text())
  manifest["shards"][0]["graphs"][0]["chunks"] += 1  # readers would pair structures with wrong chunks
  (records_dir / "manifest.json").write_text(json.dumps(manifest))
  with pytest.raises(errors.InputError, match=r"manifest.json: shard 0 was edited since it was converted"):
    readers.read_manifest(records_dir)
  (records_dir / "manifest.json").write_text("{")
  with pytest.raises(errors.InputError, match=r"manifest.json: damaged \(JSONDecodeError"):
    readers.read_manifest(records_dir)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
