"""The one place that picks a tf.distribute strategy for training.

TPU when a TPU address is given, all local GPUs when there are several, else the default
(no-op) strategy. Whether inputs must have static shapes follows from the strategy alone.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf


def choose_strategy(tpu: Optional[str] = None) -> tf.distribute.Strategy:
  """TPUStrategy for `tpu` (a name, grpc:// address or "local"), MirroredStrategy over 2+ GPUs,
  else the default strategy."""
  if tpu:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  if len(tf.config.list_logical_devices("GPU")) > 1:
    return tf.distribute.MirroredStrategy()
  return tf.distribute.get_strategy()


def needs_static_shapes(strategy: tf.distribute.Strategy) -> bool:
  """True for strategies that compile with XLA and so need padded, fixed-size inputs (TPU)."""
  return isinstance(strategy, (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy))
