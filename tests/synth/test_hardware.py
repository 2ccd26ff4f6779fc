"""The machine the cost models price on: (8, 128) tiling and measurement noise."""

import sys

import numpy as np
import pytest

from tpu_graphs.synth import hardware


def test_padding_follows_the_8_by_128_tiling_of_the_two_minor_dims():
  assert hardware.padded_elements([4, 128, 256], [2, 1, 0]) == 4 * 128 * 256
  # 3 elements minor-most pad to 128 lanes; 5 second-minor pad to 8 sublanes.
  assert hardware.padded_elements([2, 5, 3], [2, 1, 0]) == 2 * 8 * 128
  assert hardware.padded_elements([2, 5, 3], [1, 2, 0]) == 2 * 128 * 8
  assert hardware.padded_elements([300], [0]) == 384


def test_lane_utilisation_is_the_share_of_the_128_lane_tiles_a_dimension_fills():
  np.testing.assert_allclose(hardware.lane_utilisation([1, 4, 64, 128, 129, 192, 256]),
                             [1 / 128, 4 / 128, 64 / 128, 1.0, 129 / 256, 192 / 256, 1.0], rtol=1e-12)
  assert hardware.lane_utilisation(0) == 1 / 128  # an empty dimension still takes a tile


def test_measurement_noise_is_noise_fraction_and_seeded():
  true = np.full(20000, 1e-3)
  measured = hardware.measure(true, np.random.default_rng(3))
  assert measured.std() / measured.mean() == pytest.approx(hardware.NOISE_FRACTION, rel=0.05)
  assert (measured == hardware.measure(true, np.random.default_rng(3))).all()


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
