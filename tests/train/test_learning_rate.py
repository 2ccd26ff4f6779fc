"""The optimizer's learning rate: the values refused and the schedules."""

import sys

import numpy as np
import pytest

from tpu_graphs.train import learning_rate


def test_cosine_schedule_warms_up_then_decays_to_zero_at_the_last_step():
  schedule = learning_rate.schedule(3e-3, "cosine", warmup_steps=10, total_steps=100)
  rates = [float(schedule(step)) for step in (0, 5, 10, 55, 100)]
  np.testing.assert_allclose(rates, [0.0, 1.5e-3, 3e-3, 1.5e-3, 0.0], atol=1e-9)


def test_constant_schedule_is_the_rate_itself_and_unknown_schedules_are_refused():
  assert learning_rate.schedule(3e-3, "constant", warmup_steps=10, total_steps=100) == 3e-3
  with pytest.raises(ValueError, match="unknown learning rate schedule 'linear': expected constant or cosine"):
    learning_rate.schedule(3e-3, "linear", warmup_steps=0, total_steps=100)


@pytest.mark.parametrize("value", [0.0, -1e-3, float("nan"), float("inf")])
def test_rates_that_cannot_train_are_refused(value):
  with pytest.raises(ValueError, match=f"learning rate {value} is not a positive finite number"):
    learning_rate.check(value)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
