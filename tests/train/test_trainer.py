"""The trainer end to end on small learnable tile data: learning, resume, strategies, outputs."""

import csv
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import memory_file_system
import tile_test_data
from tpu_graphs.export import run_export, saved_model
from tpu_graphs.models import tile_model
from tpu_graphs.data import convert, errors, locations, npz, storage
from tpu_graphs.train import experiments, metrics, run_directory, run_experiment, scoring, tasks, trainer

try:  # Must happen before TensorFlow starts its runtime; fails if another test module did first.
  tf.config.set_logical_device_configuration(
      tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)
except RuntimeError:
  pass


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  return tile_test_data.tile_records(tmp_path_factory.mktemp("tile"), {"train": 16, "valid": 6, "test": 2})


def _config(records, out_dir, **overrides):
  settings = dict(train_dir=str(records / "train"), valid_dir=str(records / "valid"), out_dir=str(out_dir),
                  epochs=3, batch_size=4, configs_per_graph=8, learning_rate=3e-3, verbose=0)
  return trainer.TrainingConfig(**{**settings, **overrides})


def _build(spec):
  return tile_model.build_tile_model(spec, "late", "sage", units=16, num_layers=1)


def _best_scorer(run_dir):
  """The scorer of a run of _build with the run's best weights (best/), as exporting a run rebuilds it."""
  scorer = _build(saved_model.model_input_spec("tile"))
  run_directory.initialise_from_run(scorer, run_dir)
  return scorer


def test_short_run_lowers_loss_beats_random_and_fills_run_directory(records, tmp_path):
  config = _config(records, tmp_path / "run", epochs=6, test_dir=str(records / "test"))
  result = trainer.run(tasks.TileTask(), _build, config)
  losses = [epoch["loss"] for epoch in result["history"]]
  assert losses[-1] < losses[0]
  rng = np.random.default_rng(0)
  scored = scoring.score_records(tasks.TileTask(), _best_scorer(tmp_path / "run"),
                                 records / "valid")
  random_score = np.mean([metrics.tile_score(runtimes, rng.random(runtimes.size))
                          for runtimes, _ in scored.values() for _ in range(200)])
  assert result["valid"]["mean"]["tile_score"] > random_score
  assert result["valid"]["mean"]["opa"] > 0.6
  saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
  assert saved["valid"]["graphs"] == 6 and len(saved["valid"]["per_graph"]) == 6
  assert json.loads((tmp_path / "run" / "config.json").read_text())["epochs"] == 6
  with open(tmp_path / "run" / "predictions.csv") as stream:
    rows = list(csv.reader(stream))
  assert rows[0] == ["ID", "TopConfigs"] and len(rows) == 3
  for graph_key, top in rows[1:]:
    assert graph_key.startswith("tile:xla:test_kernel_")
    indices = [int(i) for i in top.split(";")]
    assert len(indices) == 5 == len(set(indices)) and all(0 <= i < 24 for i in indices)


def test_run_reads_records_and_writes_its_directory_on_an_in_memory_file_system(tmp_path):
  npz_root = tile_test_data.write_tile_tree(tmp_path, {"train": 8, "valid": 3, "test": 2})
  url = memory_file_system.fresh_directory("run")
  convert.convert_directory(npz_root, storage.join(url, "records"), progress=False)
  records = storage.join(url, "records", "tile", "xla")
  config = trainer.TrainingConfig(train_dir=storage.join(records, "train"), valid_dir=storage.join(records, "valid"),
                                  test_dir=storage.join(records, "test"), out_dir=storage.join(url, "tiles"),
                                  epochs=2, batch_size=4, configs_per_graph=8, verbose=0)
  result = trainer.run(tasks.TileTask(), _build, config, exporters=[run_export.export_to_run_directory])
  run_dir = config.out_dir
  assert json.loads(storage.read_text(storage.join(run_dir, "metrics.json")))["epochs_run"] == 2 == result["epochs_run"]
  assert storage.read_text(storage.join(run_dir, "predictions.csv")).startswith("ID,TopConfigs\ntile:xla:test_kernel_")
  assert {"config.json", "history.json", "checkpoints", "logs", "best", "export"} <= {
      name.rstrip("/") for name in tf.io.gfile.listdir(run_dir)}
  served = tf.saved_model.load(storage.join(run_dir, "export")).signatures[saved_model.PLAIN_SIGNATURE]
  graph = npz.read_graph(sorted((npz_root / "tile/xla/valid").glob("*.npz"))[0])
  scores = served(node_feat=tf.constant(graph.node_feat), node_opcode=tf.constant(graph.node_opcode),
                  edge_index=tf.constant(graph.edge_index), config_feat=tf.constant(graph.config_feat))["scores"]
  assert scores.shape == (graph.num_configs,)
  again = trainer.run(tasks.TileTask(), _build, config)  # resumes: nothing left to train
  assert again["epochs_run"] == 2 and again["history"] == result["history"]


def test_layout_training_reads_its_npz_tree_from_an_in_memory_file_system(tmp_path):
  # Deduplication and the op feature statistics read the npz tree itself, not only records.
  local_root = tmp_path / "npz"
  for split, count in (("train", 2), ("valid", 1), ("test", 1)):  # a few graphs: the runs read every one alike
    (local_root / "layout/nlp/default" / split).mkdir(parents=True)
    for path in sorted((locations.EMBEDDED_NPZ / "layout/nlp/default" / split).glob("*.npz"))[:count]:
      shutil.copy(path, local_root / "layout/nlp/default" / split)
  url = memory_file_system.copy_tree(local_root, "npz")
  experiment = experiments.experiment("smallest", "layout:nlp:default").overridden(
      training={"verbose": 0}, model={"dedup": True, "normalize": True})
  local = run_experiment.train(experiment, local_root, tmp_path / "run")
  remote_run = storage.join(url, "run")
  remote = run_experiment.train(experiment, url, remote_run)
  assert remote["history"] == local["history"]
  assert storage.read_text(storage.join(remote_run, "predictions.csv")) == (tmp_path / "run/predictions.csv").read_text()
  assert tf.io.gfile.glob(storage.join(remote_run, "dedup/layout/nlp/default/train/*.npz"))


def test_short_run_on_the_embedded_generated_data_beats_a_random_ranker(tmp_path):
  experiment = experiments.experiment("tile", "tile:xla").overridden(
      training={"epochs": 3, "learning_rate": 3e-3, "verbose": 0}, model={"units": 32, "layers": 2})
  result = run_experiment.train(experiment, locations.EMBEDDED_NPZ, tmp_path / "run")
  losses = [epoch["loss"] for epoch in result["history"]]
  assert losses[-1] < losses[0]
  valid = [npz.read_graph(path).runtimes() for path in sorted((locations.EMBEDDED_NPZ / "tile/xla/valid").glob("*.npz"))]
  rng = np.random.default_rng(0)
  random_score = np.mean([metrics.tile_score(runtimes, rng.random(runtimes.size)) for runtimes in valid for _ in range(50)])
  assert result["valid"]["graphs"] == len(valid)
  assert result["valid"]["mean"]["tile_score"] > random_score + 0.2
  assert result["valid"]["mean"]["opa"] > 0.6


class _KillAfterEpoch(tf.keras.callbacks.Callback):
  def __init__(self, epoch):
    super().__init__()
    self.epoch = epoch

  def on_epoch_end(self, epoch, logs=None):
    if epoch == self.epoch:
      raise KeyboardInterrupt("simulated kill")


@pytest.fixture(scope="module")
def uninterrupted(records, tmp_path_factory):
  """(run directory, metrics) of a 3-epoch run of the default config and strategy, which the killed
  and the mirrored runs are compared with and the initialised runs start from."""
  run_dir = tmp_path_factory.mktemp("uninterrupted")
  return run_dir, trainer.run(tasks.TileTask(), _build, _config(records, run_dir))


def test_killed_run_resumes_to_the_weights_of_an_uninterrupted_run(records, uninterrupted, tmp_path):
  task = tasks.TileTask()
  with pytest.raises(KeyboardInterrupt):
    trainer.run(task, _build, _config(records, tmp_path / "killed"), callbacks=[_KillAfterEpoch(1)])
  assert not (tmp_path / "killed" / "metrics.json").exists()
  resumed = trainer.run(task, _build, _config(records, tmp_path / "killed"))
  assert [h["epoch"] for h in resumed["history"]] == [0, 1, 2]
  whole = _best_scorer(uninterrupted[0])
  after_kill = _best_scorer(tmp_path / "killed")
  for expected, actual in zip(whole.get_weights(), after_kill.get_weights()):
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


def test_a_weight_averaged_run_keeps_the_average_and_resumes_to_it(records, tmp_path):
  task = tasks.TileTask()
  whole = trainer.run(task, _build, _config(records, tmp_path / "whole", epochs=2, weight_average=0.5))
  # The checkpoint after the best epoch holds the weights and their average; best/ keeps the average.
  reader = tf.train.load_checkpoint(str(tmp_path / "whole" / "checkpoints" / f"ckpt-{whole['best_epoch'] + 1}"))
  names = reader.get_variable_to_shape_map()
  steps = reader.get_tensor("model/average/steps/.ATTRIBUTES/VARIABLE_VALUE")
  averages = [reader.get_tensor(f"model/average/sums/{i}/.ATTRIBUTES/VARIABLE_VALUE") / (1 - 0.5 ** steps)
              for i in range(sum(name.startswith("model/average/sums/") for name in names))]
  live = [reader.get_tensor(f"model/average/weights/{i}/.ATTRIBUTES/VARIABLE_VALUE") for i in range(len(averages))]
  kept = _best_scorer(tmp_path / "whole")
  assert steps > 1 and len(averages) == len(kept.trainable_weights) > 0
  for average, weight in zip(averages, kept.trainable_weights):
    np.testing.assert_allclose(weight.numpy(), average, rtol=1e-6, atol=1e-7)
  assert any(not np.array_equal(average, value) for average, value in zip(averages, live))
  with pytest.raises(KeyboardInterrupt):
    trainer.run(task, _build, _config(records, tmp_path / "killed", epochs=2, weight_average=0.5),
                callbacks=[_KillAfterEpoch(0)])
  resumed = trainer.run(task, _build, _config(records, tmp_path / "killed", epochs=2, weight_average=0.5))
  assert resumed["history"][1]["val_tile_score"] == pytest.approx(whole["history"][1]["val_tile_score"], abs=1e-6)
  after_kill = _best_scorer(tmp_path / "killed")
  for expected, actual in zip(kept.get_weights(), after_kill.get_weights()):
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
  with pytest.raises(errors.InputError, match="weight average's momentum 1.5"):
    trainer.run(task, _build, _config(records, tmp_path / "refused", weight_average=1.5))
  assert not (tmp_path / "refused").exists()


class _WeightsAtStart(tf.keras.callbacks.Callback):
  """Keeps the model's weights as training begins."""

  def on_train_begin(self, logs=None):
    self.weights = self.model.get_weights()


def test_run_initialised_from_another_run_starts_from_its_best_weights(records, uninterrupted, tmp_path):
  pretrained, _ = uninterrupted  # any finished run of this model
  task = tasks.TileTask()
  fresh = trainer.run(task, _build, _config(records, tmp_path / "fresh", epochs=1))
  at_start = _WeightsAtStart()
  finetuned = trainer.run(task, _build, _config(records, tmp_path / "finetuned", epochs=1, init_from=str(pretrained)),
                          callbacks=[at_start])
  best = _best_scorer(pretrained)
  assert len(at_start.weights) == len(best.get_weights())
  for expected, actual in zip(best.get_weights(), at_start.weights):
    np.testing.assert_array_equal(actual, expected)
  assert finetuned["history"][0]["loss"] < fresh["history"][0]["loss"]
  assert json.loads((tmp_path / "finetuned" / "config.json").read_text())["init_from"] == str(pretrained)


def test_initialising_from_a_run_without_best_weights_or_of_another_model_is_refused(records, uninterrupted, tmp_path):
  pretrained, _ = uninterrupted
  task = tasks.TileTask()
  with pytest.raises(run_directory.RunDirectoryError, match=r"nowhere/best/weights: cannot initialise from it \(missing"):
    trainer.run(task, _build, _config(records, tmp_path / "run", init_from=str(tmp_path / "nowhere")))
  assert not (tmp_path / "run").exists()
  wider = lambda spec: tile_model.build_tile_model(spec, "late", "sage", units=32, num_layers=1)
  with pytest.raises(run_directory.RunDirectoryError, match=r"best/weights: cannot initialise from it, its model "
                     r"differs from this run's"):
    trainer.run(task, wider, _config(records, tmp_path / "wider", init_from=str(pretrained)))


def test_mirrored_strategy_on_two_cpus_follows_the_default_loss_curve(records, uninterrupted, tmp_path):
  if len(tf.config.list_logical_devices("CPU")) < 2:  # TensorFlow started before this module
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
                                "-k", "mirrored"], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stdout[-3000:]
    return
  _, default = uninterrupted  # the default strategy's run
  task = tasks.TileTask()
  mirrored_strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  mirrored = trainer.run(task, _build, _config(records, tmp_path / "mirrored"), strategy=mirrored_strategy)
  assert json.loads((tmp_path / "mirrored" / "config.json").read_text())["replicas"] == 2
  np.testing.assert_allclose([h["loss"] for h in mirrored["history"]], [h["loss"] for h in default["history"]],
                             rtol=1e-3)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
