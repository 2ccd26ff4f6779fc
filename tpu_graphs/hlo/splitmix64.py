"""The random draws of candidate configs (candidates.py): Steele, Lea and Flood's SplitMix64.

A generator simple enough to write identically in C++ (native/hlo/splitmix64.h), so that the
Python and the native featurizer draw the same candidates for the same seed, which numpy's own
generators would not allow. Draw i (counting from 1) is mix(seed + i * 0x9E3779B97F4A7C15 mod
2^64); a uniform double is the draw's 53 high bits times 2^-53, an integer below n
floor(uniform * n). It offers the two methods of numpy's Generator that candidates.py calls, so
its sampling functions take either.
"""

from __future__ import annotations

from typing import Optional, Union

import numpy as np

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MULTIPLIERS = (np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


class SplitMix64:
  """A stream of draws from `seed` (an integer in [0, 2^64))."""

  def __init__(self, seed: int):
    if not 0 <= seed < 2**64:
      raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    self._seed = np.uint64(seed)
    self._drawn = 0

  def _next(self, count: int) -> np.ndarray:
    """The next `count` draws, (count,) uint64."""
    with np.errstate(over="ignore"):
      z = self._seed + np.arange(self._drawn + 1, self._drawn + count + 1, dtype=np.uint64) * _GAMMA
      z = (z ^ (z >> np.uint64(30))) * _MULTIPLIERS[0]
      z = (z ^ (z >> np.uint64(27))) * _MULTIPLIERS[1]
    self._drawn += count
    return z ^ (z >> np.uint64(31))

  def random(self, size: Optional[Union[int, tuple]] = None) -> Union[float, np.ndarray]:
    """Uniform doubles in [0, 1) of shape `size` (row-major draws), or one float."""
    shape = () if size is None else (size,) if isinstance(size, int) else tuple(size)
    values = (self._next(int(np.prod(shape, dtype=np.int64))) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return float(values[0]) if size is None else values.reshape(shape)

  def integers(self, high: int) -> int:
    """An integer in [0, high), 0 < high <= 2^32."""
    return int(self.random() * high)
