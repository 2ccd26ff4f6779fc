"""The training inputs provider: epochs of sampled, merged batches from one read of the manifest."""

import sys

import pytest
import tensorflow as tf

import tile_test_data
from tpu_graphs.data import errors
from tpu_graphs.train import inputs, padding, tasks


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  return tile_test_data.tile_records(tmp_path_factory.mktemp("tile"), {"train": 16})


def test_one_pass_over_the_chunks_in_full_batches_by_default(records):
  provider = inputs.TrainingInputs(records / "train", tasks.TileTask(), batch_size=4, configs_per_graph=8)
  assert provider.chunks == inputs.chunk_count(records / "train") == 16
  assert provider.steps_per_epoch == 4 and provider.passes == 1
  batches = list(provider.get_dataset(first_epoch=0, epochs=1))
  assert len(batches) == 4
  for graph, labels in batches:
    assert int(graph.num_components) == 4 and labels.shape == (4, 8)


def test_fixed_steps_per_epoch_outlast_one_pass_over_the_chunks(records):
  provider = inputs.TrainingInputs(records / "train", tasks.TileTask(), batch_size=4, configs_per_graph=8,
                                   steps_per_epoch=7)
  assert provider.steps_per_epoch == 7 and provider.passes == 2
  batches = list(provider.get_dataset(first_epoch=0, epochs=2))
  assert len(batches) == 14
  assert len({tuple(graph.node_sets["config"]["config_index"].numpy()) for graph, _ in batches}) == 14


def test_resumed_epochs_are_the_epochs_of_an_uninterrupted_run(records):
  provider = inputs.TrainingInputs(records / "train", tasks.TileTask(), batch_size=4, configs_per_graph=8, seed=3)
  whole = [tuple(g.node_sets["config"]["config_index"].numpy()) for g, _ in provider.get_dataset(0, 3)]
  resumed = [tuple(g.node_sets["config"]["config_index"].numpy()) for g, _ in provider.get_dataset(2, 3)]
  assert resumed == whole[-4:] and whole[:4] != resumed


def test_too_few_chunks_for_one_pass_are_refused_naming_the_directory(records):
  with pytest.raises(errors.InputError, match=r"train: 16 graph chunks cannot fill one batch of 32"):
    inputs.TrainingInputs(records / "train", tasks.TileTask(), batch_size=32, configs_per_graph=8)


def test_padded_batches_have_the_static_spec_the_model_is_built_on(records):
  provider = inputs.TrainingInputs(records / "train", tasks.TileTask(), batch_size=4, configs_per_graph=8)
  static_padding = padding.Padding.fitting(provider.sampled_graphs(0), batch_size=2)
  spec = provider.graph_spec(replicas=2, static_padding=static_padding)
  assert spec.total_num_components == 3
  two_replicas = tf.distribute.InputContext(num_replicas_in_sync=2)
  batches = list(provider.get_dataset(0, 1, two_replicas, static_padding))
  assert len(batches) == 8  # 4 steps of 2 replicas
  for graph, _ in batches:
    assert spec.is_compatible_with(graph.spec)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
