"""The real TpuGraphs sample for tests that read it, found by tpu_graphs.data.locations (as the
benchmarks find it).

Where a file is absent the calling test is skipped, saying where it looked, and scripts/test's tally
counts the skip. Under CI (CI=true, which scripts/test passes into the tests) it fails instead: a
CI whose sample went missing must not be green with a quarter of the suite unrun.
"""

import os
import pathlib

import pytest

from tpu_graphs.data import locations

sample_dir = locations.sample_dir


def required() -> bool:
  """Whether an absent sample fails the tests rather than skipping them: under CI."""
  return os.environ.get("CI") == "true"


def require_sample(relative_path: str = "") -> pathlib.Path:
  """Returns sample_dir() / relative_path; where that path is absent, skips the calling test (fails
  it under CI) with one line naming the path."""
  path = locations.sample_dir() / relative_path
  if not path.exists():
    if required():
      pytest.fail(f"CI=true: {locations.missing_sample(path)}", pytrace=False)
    pytest.skip(locations.missing_sample(path))
  return path


def files(pattern: str) -> list:
  """The sample's files matching `pattern` (a glob below sample_dir(), e.g. "npz/**/*.npz"), to
  parametrize a test over. Where none matches, one parameter whose test require_sample(pattern)
  skips, or fails under CI (conftest.py), so that the absence is counted and named."""
  found = sorted(locations.sample_dir().glob(pattern))
  return found or [pytest.param(None, marks=pytest.mark.sample(pattern), id="sample-absent")]
