"""Weighted TF-Ranking loss mixes: spec parsing, masking of padded slots, per-list values."""

import math
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_ranking as tfr

from tpu_graphs.train import losses


def test_spec_gives_weights_and_bare_names_weigh_one():
  assert losses.parse_loss_spec("listmle:1,mse:0.02") == {"listmle": 1.0, "mse": 0.02}
  assert losses.parse_loss_spec("pairwise_hinge") == {"pairwise_hinge": 1.0}


def test_unknown_loss_and_bad_weight_are_named():
  with pytest.raises(ValueError, match="'softmax'"):
    losses.parse_loss_spec("softmax:1")
  with pytest.raises(ValueError, match="'x'"):
    losses.parse_loss_spec("mse:x")
  for weight in ("-0.5", "nan", "inf"):
    with pytest.raises(ValueError, match=f"loss weight '{weight}' of 'mse' .* is not a finite number >= 0"):
      losses.parse_loss_spec(f"listmle:1,mse:{weight}")
  with pytest.raises(ValueError, match="every loss weight in 'listmle:0,mse:0' is 0"):
    losses.parse_loss_spec("listmle:0,mse:0")
  assert losses.parse_loss_spec("listmle:0, mse:0.5") == {"listmle": 0.0, "mse": 0.5}  # one weight 0 is fine


def test_padded_slots_and_lists_do_not_change_the_loss():
  labels = tf.constant([[2.0, 0.0, 1.0]])
  logits = tf.constant([[0.3, -0.2, 0.9]])
  padded_labels = tf.constant([[2.0, 0.0, 1.0, -1.0], [-1.0, -1.0, -1.0, -1.0]])
  padded_logits = tf.constant([[0.3, -0.2, 0.9, 5.0], [1.0, 2.0, 3.0, 4.0]])
  loss = losses.WeightedRankingLoss("listmle:1,pairwise_hinge:0.5,mse:0.1").call
  per_list = loss(labels, logits).numpy()
  padded = loss(padded_labels, padded_logits).numpy()
  assert padded[0] == pytest.approx(per_list[0], rel=1e-5)
  assert padded[1] == pytest.approx(0.0, abs=1e-6)


def _plackett_luce_negative_log_likelihood(scores_best_first):
  """-log P(this order) under Plackett-Luce, written out: sum_i log(sum_{j >= i} e^s_j) - s_i."""
  return sum(math.log(sum(math.exp(s) for s in scores_best_first[i:])) - scores_best_first[i]
             for i in range(len(scores_best_first)))


def test_listmle_is_the_negative_log_likelihood_of_the_label_order():
  labels = tf.constant([[2.0, 0.0, 1.0, -1.0], [0.0, 3.0, 1.0, 2.0]])
  logits = tf.constant([[0.3, -0.2, 0.9, 5.0], [0.5, 0.1, -0.7, 1.2]])
  per_list = losses.WeightedRankingLoss("listmle:1").call(labels, logits).numpy()
  # Slots by label, highest first (the padded slot left out): [0, 2, 1] and [1, 3, 2, 0].
  expected = [_plackett_luce_negative_log_likelihood([0.3, 0.9, -0.2]),
              _plackett_luce_negative_log_likelihood([0.1, 1.2, -0.7, 0.5])]
  np.testing.assert_allclose(per_list, expected, rtol=1e-5)
  # By hand: log(e^0.3 + e^0.9 + e^-0.2) - 0.3 + log(e^0.9 + e^-0.2) - 0.9 + 0 = 1.2322 + 0.2873.
  assert expected[0] == pytest.approx(1.5195, abs=1e-4)


def test_a_list_whose_valid_labels_are_all_zero_still_has_a_loss():
  # Label 0 is a valid (slowest) slot, not padding; ties in slot order: slot 0 first, then slot 2.
  per_list = losses.WeightedRankingLoss("listmle:1").call(tf.constant([[0.0, -1.0, 0.0]]),
                                                          tf.constant([[0.4, 3.0, 1.1]])).numpy()
  np.testing.assert_allclose(per_list, [_plackett_luce_negative_log_likelihood([0.4, 1.1])], rtol=1e-5)


def test_a_loss_rebuilt_from_its_config_is_the_same_mix():
  loss = losses.WeightedRankingLoss("pairwise_hinge:0.5,mse:2", name="mix")
  assert loss.get_config() == {"spec": "pairwise_hinge:0.5,mse:2", "name": "mix"}
  labels, logits = tf.constant([[2.0, 0.0, 1.0]]), tf.constant([[0.3, -0.2, 0.9]])
  rebuilt = losses.WeightedRankingLoss.from_config(loss.get_config())
  assert rebuilt.call(labels, logits).numpy() == pytest.approx(loss.call(labels, logits).numpy())
  assert losses.WeightedRankingLoss().spec == "listmle:1"


def test_mix_is_weighted_sum_of_tf_ranking_losses_per_list():
  labels = tf.constant([[2.0, 0.0, 1.0], [0.0, 1.0, -1.0]])
  logits = tf.constant([[0.3, -0.2, 0.9], [0.5, 0.1, 0.0]])
  mix = losses.WeightedRankingLoss("pairwise_hinge:0.5,mse:2")(labels, logits).numpy()
  # TF-Ranking's own sums over both lists, divided by 2 lists.
  hinge = tfr.keras.losses.PairwiseHingeLoss(reduction="sum")(labels, logits).numpy()
  mse = tfr.keras.losses.MeanSquaredLoss(reduction="sum")(labels, logits).numpy()
  assert mix == pytest.approx((0.5 * hinge + 2 * mse) / 2, rel=1e-5)


def test_listmle_breaks_ties_by_position_whatever_the_random_state():
  labels = tf.constant([[1.0, 1.0, 0.0, 1.0, -1.0], [0.5, 0.5, 0.5, 0.5, 0.5]])
  logits = tf.constant([[0.3, -0.2, 0.9, 0.1, 2.0], [0.5, -1.0, 0.2, 0.0, 1.0]])
  loss = losses.WeightedRankingLoss("listmle:1").call
  values = []
  for seed in (0, 1, 2):
    tf.random.set_seed(seed)
    values.append(loss(labels, logits).numpy())
  np.testing.assert_array_equal(values[0], values[1])
  np.testing.assert_array_equal(values[0], values[2])
  # Slots tied at the same label rank in slot order, as if the labels had been:
  untied = tf.constant([[4.0, 3.0, 1.0, 2.0, -1.0], [5.0, 4.0, 3.0, 2.0, 1.0]])
  expected = tfr.keras.losses.ListMLELoss(reduction="none")(untied, logits).numpy().reshape(-1)
  np.testing.assert_allclose(values[0], expected, rtol=1e-6)


@pytest.mark.parametrize("spec, message", [("listmle:-1", "not a finite number >= 0"), ("mse:nan", "not a finite number"),
                                           ("listmle:inf", "not a finite number"), ("listmle:0,mse:0", "every loss weight")])
def test_loss_weights_that_would_train_to_nan_or_backwards_are_refused(spec, message):
  with pytest.raises(ValueError, match=message):
    losses.parse_loss_spec(spec)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
