"""An exponential moving average of a model's trainable weights, the weights a run is judged by.

Late in training the weights wander around a minimum from step to step; their average sits nearer
its middle. On config splits of real programs (benchmarks/real_layout.py) the layout recipe's
averaged weights ranked unseen configs of both programs and a program never trained on better than
its last step's (docs/research.md, "Weight averaging"). The trainer updates the average after every
step, validates and keeps (best/) the averaged weights, and checkpoints the live weights with the
average, so a resumed run continues exactly.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional, Sequence

import tensorflow as tf


def check(momentum: float) -> None:
  """ValueError unless `momentum` can average: 0 (no average) or within (0, 1)."""
  if momentum != 0.0 and not 0.0 < momentum < 1.0:
    raise ValueError(f"the weight average's momentum {momentum} is neither 0 (off) nor within (0, 1)")


class WeightAverage(tf.Module):
  """After step t: sum <- momentum * sum + (1 - momentum) * weights, average = sum / (1 - momentum^t).

  The division (Adam's bias correction) makes the average a weighted mean of the steps' weights
  alone, the newest weighing most, with no share of the initial weights: a short run's average is
  not pulled back to its start, and a long one's is the plain moving average.
  """

  def __init__(self, weights: Sequence[tf.Variable], momentum: float):
    super().__init__(name="weight_average")
    check(momentum)
    self.momentum = momentum
    self.weights = list(weights)
    # Every replica computes the same sums from the same (synchronised) weights.
    replicated = dict(trainable=False, aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    self.sums = [tf.Variable(tf.zeros_like(weight), name="sum", **replicated) for weight in self.weights]
    self.steps = tf.Variable(0.0, name="steps", **replicated)

  def update(self) -> None:
    """One step's move of the average towards the weights (inside the training step)."""
    for total, weight in zip(self.sums, self.weights):
      total.assign(self.momentum * total + (1.0 - self.momentum) * weight)
    self.steps.assign_add(1.0)

  @contextlib.contextmanager
  def in_place(self) -> Iterator[None]:
    """The weights hold the average inside the block (their own values while nothing was averaged
    yet) and their own values again after it."""
    live = [weight.read_value() for weight in self.weights]
    if self.steps.numpy() > 0:
      correction = 1.0 - self.momentum ** self.steps.numpy()
      for weight, total in zip(self.weights, self.sums):
        weight.assign(total / correction)
    try:
      yield
    finally:
      for weight, value in zip(self.weights, live):
        weight.assign(value)


def averaging(weights: Sequence[tf.Variable], momentum: float) -> Optional[WeightAverage]:
  """The average of `weights` a run with this momentum keeps; None for 0 (no average)."""
  return WeightAverage(weights, momentum) if momentum else None
