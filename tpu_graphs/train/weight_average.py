"""An exponential moving average of a model's trainable weights, the weights a run is judged by.

Late in training the weights wander around a minimum from step to step; their average sits nearer
its middle, and ranks configs of one program and of programs never trained on more steadily than
any one step's weights (docs/real-data.md, "Weight averaging"). The trainer updates the average
after every step, validates and keeps (best/) the averaged weights, and checkpoints both the live
weights and the average, so a resumed run continues exactly.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Sequence

import tensorflow as tf


def check(momentum: float) -> None:
  """ValueError unless `momentum` can average: 0 (no average) or within (0, 1)."""
  if momentum != 0.0 and not 0.0 < momentum < 1.0:
    raise ValueError(f"the weight average's momentum {momentum} is neither 0 (off) nor within (0, 1)")


class WeightAverage(tf.Module):
  """average <- momentum * average + (1 - momentum) * weights, after every training step.

  The average starts at the initial weights, so early epochs judge weights pulled towards them; the
  recipe's warmup keeps those epochs from being the best ones anyway.
  """

  def __init__(self, weights: Sequence[tf.Variable], momentum: float):
    super().__init__(name="weight_average")
    check(momentum)
    self.momentum = momentum
    self.weights = list(weights)
    # Every replica computes the same average from the same (synchronised) weights.
    self.averages = [tf.Variable(weight.read_value(), trainable=False, name="average",
                                 aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                     for weight in self.weights]

  def update(self) -> None:
    """One step's move of the average towards the weights (inside the training step)."""
    for average, weight in zip(self.averages, self.weights):
      average.assign(self.momentum * average + (1.0 - self.momentum) * weight)

  @contextlib.contextmanager
  def in_place(self) -> Iterator[None]:
    """The weights hold the average inside the block and their own values again after it."""
    live = [weight.read_value() for weight in self.weights]
    for weight, average in zip(self.weights, self.averages):
      weight.assign(average)
    try:
      yield
    finally:
      for weight, value in zip(self.weights, live):
        weight.assign(value)
