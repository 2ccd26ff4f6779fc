"""Strategy choice: default strategy on a machine without accelerators; only TPUs need padding.

Two real workers under TF_CONFIG: tests/train/test_multi_worker.py.
"""

import json
import sys

import pytest
import tensorflow as tf

from tpu_graphs.train import strategies


def test_without_tpu_or_gpus_the_default_strategy_is_used():
  if len(tf.config.list_logical_devices("GPU")) > 1:
    pytest.skip("several GPUs visible: MirroredStrategy is the right choice here")
  strategy = strategies.choose_strategy()
  assert strategy is tf.distribute.get_strategy()
  assert strategy.num_replicas_in_sync == 1


def test_a_tf_config_of_one_worker_keeps_the_local_strategy_and_its_run_directory(monkeypatch, tmp_path):
  if len(tf.config.list_logical_devices("GPU")) > 1:
    pytest.skip("several GPUs visible: MirroredStrategy is the right choice here")
  monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["127.0.0.1:2222"]},
                                              "task": {"type": "worker", "index": 0}}))
  strategy = strategies.choose_strategy()
  assert strategy is tf.distribute.get_strategy()
  assert strategies.is_chief(strategy) and strategies.worker_directory(strategy, tmp_path) == tmp_path


def test_only_a_machine_without_cluster_or_gpu_lets_trainings_share_its_cpus(monkeypatch):
  if tf.config.list_physical_devices("GPU"):
    pytest.skip("a GPU is visible: trainings must not share it")
  monkeypatch.delenv("TF_CONFIG", raising=False)
  assert strategies.cluster_workers() == 0 and strategies.trains_on_local_cpus()
  monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["127.0.0.1:2222"]},
                                              "task": {"type": "worker", "index": 0}}))
  assert strategies.cluster_workers() == 1 and strategies.trains_on_local_cpus()
  monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"chief": ["127.0.0.1:2222"],
                                                          "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]},
                                              "task": {"type": "chief", "index": 0}}))
  assert strategies.cluster_workers() == 3 and not strategies.trains_on_local_cpus()


def test_only_tpu_strategies_need_static_shapes():
  # A TPU strategy cannot be built without a TPU; the choice follows the strategy's type alone, so
  # instances made without their constructor stand in for the real ones.
  for tpu_strategy in (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy):
    assert strategies.needs_static_shapes(object.__new__(tpu_strategy))
  assert not strategies.needs_static_shapes(tf.distribute.get_strategy())
  assert not strategies.needs_static_shapes(tf.distribute.MirroredStrategy(["/cpu:0"]))


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
