"""The TPU path on this CPU: padded static inputs, no strings, and XLA-compiled steps that equal eager ones."""

import dataclasses
import json
import pathlib
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf

import tile_test_data
from tpu_graphs.data import convert, locations, readers
from tpu_graphs.models import tile_model
from tpu_graphs.train import experiments, inputs, padding, tasks, trainer, xla

LAYOUT_COLLECTION = "layout:nlp:default"
# Two real programs of the embedded generated data: enough for a padded batch of two graphs.
LAYOUT_FILES = ("gru.b1.f32.npz", "gru.b4.bf16.npz")


@pytest.fixture(scope="module")
def tile_records(tmp_path_factory):
  return tile_test_data.tile_records(tmp_path_factory.mktemp("tile"), {"train": 12, "valid": 4, "test": 2})


@pytest.fixture(scope="module")
def layout_records(tmp_path_factory):
  root = tmp_path_factory.mktemp("layout")
  train_npz = root / "npz" / "layout" / "nlp" / "default" / "train"
  train_npz.mkdir(parents=True)
  for name in LAYOUT_FILES:
    shutil.copy(locations.EMBEDDED_NPZ / "layout" / "nlp" / "default" / "train" / name, train_npz / name)
  convert.convert_directory(root / "npz", root / "records", configs_per_chunk=32, progress=False)
  return root / "records" / "layout" / "nlp" / "default", train_npz


def _padded_batch(task, records_dir, batch_size, list_size):
  """The trainer's first padded (graph, labels) batch, as a compiled step receives it."""
  training_inputs = inputs.TrainingInputs(str(records_dir / "train"), task, batch_size, list_size, steps_per_epoch=1)
  static_padding = padding.Padding.fitting(training_inputs.sampled_graphs(0), batch_size)
  batches = training_inputs.get_dataset(0, 1, static_padding=static_padding)
  return next(iter(batches)), batches.element_spec[0]


def _one_step(build, task, loss, batch, spec, list_size, jit_compile):
  """Loss and weights after one SGD step of the trainer's ranking model, compiled or eager."""
  tf.keras.utils.set_random_seed(0)
  model = trainer.RankingModel(build(spec.relax(num_components=True, num_nodes=True, num_edges=True)),
                               task, list_size)
  model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=task.loss(loss), jit_compile=jit_compile,
                run_eagerly=not jit_compile)
  history = model.fit(tf.data.Dataset.from_tensors(batch), verbose=0).history
  return history["loss"][0], [w.numpy() for w in model.weights]


def _assert_compiled_step_equals_eager_step(build, task, loss, batch, spec, list_size):
  eager_loss, eager_weights = _one_step(build, task, loss, batch, spec, list_size, jit_compile=False)
  compiled_loss, compiled_weights = _one_step(build, task, loss, batch, spec, list_size, jit_compile=True)
  assert np.isfinite(eager_loss) and eager_loss > 0
  np.testing.assert_allclose(compiled_loss, eager_loss, rtol=1e-5)
  assert len(compiled_weights) == len(eager_weights)
  for compiled, eager in zip(compiled_weights, eager_weights):
    np.testing.assert_allclose(compiled, eager, rtol=1e-4, atol=1e-5)


def test_model_features_leave_out_the_strings_and_keep_everything_else(tile_records):
  graph = next(iter(readers.evaluation_dataset(tile_records / "valid")))
  features = xla.model_features(graph)
  assert {name for name, value in graph.context.features.items() if value.dtype == tf.string} == \
      {"graph_id", "collection"}
  assert set(features.context.features) == set(graph.context.features) - {"graph_id", "collection"}
  for name, node_set in graph.node_sets.items():
    for feature, value in node_set.features.items():
      np.testing.assert_array_equal(features.node_sets[name][feature].numpy(), value.numpy())
  assert xla.graph_keys(graph).numpy()[0].decode() == "tile:xla:" + graph.context["graph_id"].numpy()[0].decode()


def test_padded_training_batches_carry_no_strings_and_have_static_shapes(tile_records):
  (graph, labels), spec = _padded_batch(tasks.TileTask(), tile_records, batch_size=4, list_size=8)
  assert all(value.dtype != tf.string for value in graph.context.features.values())
  assert spec.node_sets_spec["op"].total_size is not None
  assert spec.node_sets_spec["config"].total_size is not None
  assert labels.shape == (5, 8)  # 4 graphs and the padding component, whose slots are all masked
  np.testing.assert_array_equal(labels.numpy()[4], -1.0)


@pytest.mark.parametrize("join", tile_model.JOINS)
def test_compiled_tile_train_step_equals_the_eager_step(tile_records, join):
  task = tasks.TileTask()
  batch, spec = _padded_batch(task, tile_records, batch_size=4, list_size=8)
  build = lambda s: tile_model.build_tile_model(s, join, "sage", units=16, num_layers=2)
  _assert_compiled_step_equals_eager_step(build, task, "listmle:1,mse:0.02", batch, spec, list_size=8)


def test_compiled_layout_train_step_equals_the_eager_step(layout_records):
  records_dir, train_npz = layout_records
  settings = dataclasses.replace(experiments.experiment("layout", LAYOUT_COLLECTION).model, units=16, layers=2)
  task = settings.task()
  batch, spec = _padded_batch(task, records_dir, batch_size=2, list_size=16)
  graph = batch[0]
  # TF-GNN's padding adds filler node_config nodes that no edge reaches: the model pairs features
  # with configs and ops along the edges, not by node position.
  assert int(graph.node_sets["node_config"].total_size) > int(graph.edge_sets["configures"].total_size)
  build = settings.model_builder(experiments.DataDerived(feature_statistics=settings.feature_statistics(train_npz)))
  _assert_compiled_step_equals_eager_step(build, task, "pairwise_hinge:1", batch, spec, list_size=16)


def test_short_jit_compile_run_trains_and_records_it(tile_records, tmp_path):
  config = trainer.TrainingConfig(
      train_dir=str(tile_records / "train"), valid_dir=str(tile_records / "valid"), test_dir=str(tile_records / "test"),
      out_dir=str(tmp_path / "run"), epochs=2, batch_size=4, configs_per_graph=8, learning_rate=3e-3, verbose=0,
      jit_compile=True)
  result = trainer.run(tasks.TileTask(), lambda s: tile_model.build_tile_model(s, "late", units=16, num_layers=1),
                       config)
  run_dir = pathlib.Path(config.out_dir)
  assert json.loads((run_dir / "config.json").read_text())["jit_compile"] is True
  assert json.loads((run_dir / "metrics.json").read_text())["epochs_run"] == 2
  losses = [epoch["loss"] for epoch in result["history"]]
  assert all(np.isfinite(losses)) and losses[1] < losses[0]
  rows = (run_dir / "predictions.csv").read_text().splitlines()
  assert rows[0] == "ID,TopConfigs" and sorted(row.split(",")[0] for row in rows[1:]) == \
      ["tile:xla:test_kernel_000", "tile:xla:test_kernel_001"]


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
