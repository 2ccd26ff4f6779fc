"""The real TpuGraphs sample for tests that read it: found by tpu_graphs.data.locations (as the
benchmarks find it), skipping the calling test where it is absent."""

import pathlib

import pytest

from tpu_graphs.data import locations

sample_dir = locations.sample_dir


def require_sample(relative_path: str = "") -> pathlib.Path:
  """Returns sample_dir() / relative_path; skips the calling test when that path is absent."""
  path = locations.sample_dir() / relative_path
  if not path.exists():
    pytest.skip(locations.missing_sample(path))
  return path
