"""Files Bazel builds for the tests (native programs, shared fixtures): in the calling test's
runfiles under Bazel (its data), else in the checkout's bazel-bin/ (after `bazel build`)."""

import os
import pathlib

import pytest


def built(relative: str) -> pathlib.Path:
  """The built file at `relative` (e.g. "native/tools/rank"); fails the test, saying how to build it, where absent."""
  runfiles = pathlib.Path(os.environ.get("TEST_SRCDIR", "/nonexistent")) / "tpu_graphs_workspace" / relative
  checkout = pathlib.Path(__file__).resolve().parents[1] / "bazel-bin" / relative
  for path in (runfiles, checkout):
    if path.exists():
      return path
  pytest.fail(f"{relative} is not built: bazel build //{pathlib.PurePath(relative).parent}:all")
