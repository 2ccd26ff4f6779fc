"""SplitMix64 draws the reference sequence, so C++ and Python candidates can be drawn alike."""

import sys

import numpy as np
import pytest

from tpu_graphs.hlo import splitmix64


def test_draws_are_the_reference_sequence_of_seed_0():
  # The first outputs of Vigna's reference splitmix64.c seeded with 0.
  assert [hex(int(v)) for v in splitmix64.SplitMix64(0)._next(4)] == [
      "0xe220a8397b1dcdaf", "0x6e789e6aa1b965f4", "0x6c45d188009454f", "0xf88bb8a8724c81ec"]


def test_uniform_doubles_are_the_53_high_bits_and_integers_their_floor():
  draws = splitmix64.SplitMix64(42)._next(3)
  stream = splitmix64.SplitMix64(42)
  expected = (draws >> np.uint64(11)).astype(np.float64) * 2.0**-53
  np.testing.assert_array_equal(stream.random(2), expected[:2])
  assert stream.integers(1000) == int(expected[2] * 1000)


def test_shaped_draws_continue_the_stream_row_major():
  whole = splitmix64.SplitMix64(7).random(12)
  parts = splitmix64.SplitMix64(7)
  np.testing.assert_array_equal(np.concatenate([parts.random((2, 3)).ravel(), parts.random(6)]), whole)


def test_a_seed_outside_64_bits_is_refused():
  with pytest.raises(ValueError, match="seed must be in"):
    splitmix64.SplitMix64(-1)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
