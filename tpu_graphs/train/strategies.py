"""The one place that picks a tf.distribute strategy for training, and says where each worker writes.

TPU when a TPU is named (one TPU VM or a whole pod slice), several machines when TF_CONFIG names a
cluster of more than one worker, all local GPUs when there are several, else the default (no-op)
strategy. Whether inputs must have static shapes, and which run directory a worker writes, follow
from the strategy alone.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

import tensorflow as tf

from tpu_graphs.data import storage


def choose_strategy(tpu: Optional[str] = None) -> tf.distribute.Strategy:
  """The strategy for this process.

  * `tpu` given: TPUStrategy over the TPU's cores. "local" is the TPU attached to this TPU VM; a
    TPU name resolves through the Cloud TPU API, and a pod slice's name gives one strategy over
    the cores of all its hosts.
  * else TF_CONFIG naming more than one worker (chief included): MultiWorkerMirroredStrategy, every
    process runs the same program with its own "task" entry. Create it before any other
    TensorFlow op: the collective-op server is configured when the runtime starts.
  * else MirroredStrategy over 2+ local GPUs, else the default strategy.
  """
  if tpu:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  if cluster_workers() > 1:
    return tf.distribute.MultiWorkerMirroredStrategy(
        cluster_resolver=tf.distribute.cluster_resolver.TFConfigClusterResolver())
  if len(tf.config.list_logical_devices("GPU")) > 1:
    return tf.distribute.MirroredStrategy()
  return tf.distribute.get_strategy()


def cluster_workers() -> int:
  """How many processes (chief included) the cluster in TF_CONFIG trains with; 0 without one.
  Reading TF_CONFIG starts no TensorFlow runtime, so a program may ask before choose_strategy."""
  workers = tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec().as_dict()
  return len(workers.get("chief", [])) + len(workers.get("worker", []))


def trains_on_local_cpus() -> bool:
  """Whether choose_strategy(None) trains on this machine's CPUs alone (no cluster, no GPU): only
  then may independent trainings run side by side in separate processes; a cluster's workers and a
  GPU's memory belong to one process."""
  return cluster_workers() <= 1 and not tf.config.list_physical_devices("GPU")


def needs_static_shapes(strategy: tf.distribute.Strategy) -> bool:
  """True for strategies that compile with XLA and so need padded, fixed-size inputs (TPU)."""
  return isinstance(strategy, (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy))


def is_chief(strategy: tf.distribute.Strategy) -> bool:
  """Whether this process writes the run's results: always, except on the non-chief workers of a
  multi-worker cluster (the chief is task "chief", or worker 0 when the cluster has no chief)."""
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return True
  resolver = strategy.cluster_resolver
  if resolver.task_type == "chief":
    return True
  return resolver.task_type == "worker" and resolver.task_id == 0 and "chief" not in resolver.cluster_spec().as_dict()


def worker_directory(strategy: tf.distribute.Strategy, out_dir):
  """The run directory this process writes: `out_dir` for the chief, `out_dir/workers/<task_id>`
  for every other worker of a multi-worker cluster.

  Every worker must write what the chief writes (checkpoints and SavedModels of sync-on-read
  variables, such as batch-norm statistics, are all-reduced across workers while saving, so a
  worker that skipped a save would leave the chief waiting); each writes to its own directory so
  that none clobbers the chief's, and a restarted worker resumes from its own checkpoints.
  """
  if is_chief(strategy):
    return out_dir
  return storage.join(out_dir, "workers", str(strategy.cluster_resolver.task_id))


def finish(strategy: tf.distribute.Strategy) -> None:
  """Ends a program's part in a multi-worker run cleanly; a no-op otherwise.

  TensorFlow's coordination service lives in the chief's process: a worker still sending it
  heartbeats when the chief exits fails its own exit (UNAVAILABLE) although its work is done.
  So every worker first waits for all the others (an all-reduce), then the non-chief workers
  leave at once, before the chief can.
  """
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return
  strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)
  if not is_chief(strategy):
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # pylint: disable=protected-access
