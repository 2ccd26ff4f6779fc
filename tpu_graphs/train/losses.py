"""Ranking losses from TF-Ranking, mixed by weight from a spec such as "listmle:1,mse:0.02".

Inputs of every loss, one row per graph (list), k = list size:
  labels (b, k): relevance, higher = faster; -1 marks a padded slot (TF-Ranking's mask).
  predictions (b, k): ranking logits, higher = faster (the negated model scores).

Every loss is a function of its inputs alone, so a run resumed from a checkpoint in a new process
takes the same steps as an uninterrupted one (see PositionTieListMLELoss).
"""

from __future__ import annotations

import math

import tensorflow as tf
import tensorflow_ranking as tfr


def _tie_free_labels(labels: tf.Tensor) -> tf.Tensor:
  """(b, k) labels -> (b, k) labels ordering the lists alike, without ties: valid labels (>= 0)
  become k - their position in a stable sort (ties: the earlier slot first), masked ones stay -1."""
  order = tf.argsort(labels, axis=1, direction="DESCENDING", stable=True)
  position = tf.argsort(order, axis=1, stable=True)
  return tf.where(labels >= 0, tf.cast(tf.shape(labels)[1] - position, labels.dtype), -1.0)


class PositionTieListMLELoss(tfr.keras.losses.ListMLELoss):
  """TF-Ranking's ListMLE with ties between labels broken by list position, not at random.

  TF-Ranking breaks ties with a stateful random op whose state no checkpoint holds: a run resumed
  in a new process would draw other tie orders than an uninterrupted run and end with other
  weights. The trainer's lists are in the order the seeded config sampling drew them, so position
  is as random a tie-breaker, and a function of seed, epoch and step. ListMLE uses labels only to
  order each list, so replacing them by tie-free ranks changes nothing else.
  """

  def call(self, y_true, y_pred):
    return super().call(_tie_free_labels(tf.convert_to_tensor(y_true, tf.float32)), y_pred)


RANKING_LOSSES = {
    "listmle": PositionTieListMLELoss,
    "pairwise_hinge": tfr.keras.losses.PairwiseHingeLoss,
    "mse": tfr.keras.losses.MeanSquaredLoss,
}


def parse_loss_spec(spec: str) -> dict[str, float]:
  """{"listmle": 1.0, "mse": 0.02} from "listmle:1,mse:0.02"; a bare name has weight 1.

  Raises ValueError for an unknown name, or a weight that is not a finite number >= 0 (a negative
  weight would train the model to rank backwards; NaN or infinity, to NaN), or all weights 0.
  """
  weights = {}
  for part in spec.split(","):
    name, _, weight = part.strip().partition(":")
    if name not in RANKING_LOSSES:
      raise ValueError(f"unknown ranking loss {name!r} in {spec!r}; known: {sorted(RANKING_LOSSES)}")
    try:
      weights[name] = float(weight) if weight else 1.0
    except ValueError:
      raise ValueError(f"loss weight {weight!r} of {name!r} in {spec!r} is not a number") from None
    if not math.isfinite(weights[name]) or weights[name] < 0:
      raise ValueError(f"loss weight {weight!r} of {name!r} in {spec!r} is not a finite number >= 0")
  if not any(weights.values()):
    raise ValueError(f"every loss weight in {spec!r} is 0: nothing would be trained")
  return weights


class WeightedRankingLoss(tf.keras.losses.Loss):
  """Sum of weighted TF-Ranking losses, one value per list (reduced by Keras over lists).

  Each TF-Ranking loss runs unreduced and is summed over its list, so padded lists and slots
  (label -1) contribute nothing and the mix behaves the same under any distribution strategy.
  """

  def __init__(self, spec: str = "listmle:1", name: str = "ranking_loss"):
    super().__init__(name=name)
    self.spec = spec
    self._weighted = [(RANKING_LOSSES[loss](reduction=tf.keras.losses.Reduction.NONE), weight)
                      for loss, weight in parse_loss_spec(spec).items()]

  def call(self, labels, predictions):
    """(b, k) labels and predictions -> (b,) loss per list; 0 for lists with no valid slot."""
    per_list = [weight * tf.reduce_sum(tf.reshape(loss(labels, predictions), [tf.shape(labels)[0], -1]), axis=1)
                for loss, weight in self._weighted]
    # ListMLE gives an all-padded list (e.g. TPU padding's filler graph) a constant log(k!).
    return tf.where(tf.reduce_any(labels >= 0, axis=1), tf.add_n(per_list), 0.0)

  def get_config(self):
    return {"spec": self.spec, "name": self.name}
