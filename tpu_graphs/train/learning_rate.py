"""The optimizer's learning rate: which values can train, and the schedules a run may ask for."""

from __future__ import annotations

import math

import tensorflow as tf

def check(value: float) -> None:
  """Raises ValueError for a learning rate that would train to NaN, backwards or not at all."""
  if not math.isfinite(value) or value <= 0:
    raise ValueError(f"learning rate {value} is not a positive finite number")


def schedule(peak: float, name: str, warmup_steps: int, total_steps: int):
  """The optimizer's learning rate over a run of `total_steps` steps: `peak` itself ("constant"), or
  ("cosine") a linear warmup from 0 over `warmup_steps`, then cosine decay to 0 at the last step."""
  if name == "constant":
    return peak
  if name == "cosine":
    warmup = min(warmup_steps, total_steps - 1)
    return tf.keras.optimizers.schedules.CosineDecay(
        0.0 if warmup else peak, decay_steps=total_steps - warmup,
        warmup_target=peak if warmup else None, warmup_steps=warmup)
  raise ValueError(f"unknown learning rate schedule {name!r}: expected constant or cosine")
