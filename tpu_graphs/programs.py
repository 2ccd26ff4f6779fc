"""What every program in baselines/ shares: start in the caller's directory, parse absl flags.

`bazel run` starts a program inside its runfiles tree; relative paths on the command line are
meant relative to where the user typed the command, which Bazel passes as
BUILD_WORKING_DIRECTORY.
"""

import os

from absl import app


def run(main) -> None:
  """absl's app.run, after moving to the directory `bazel run` was called from (if any)."""
  user_directory = os.environ.get("BUILD_WORKING_DIRECTORY")
  if user_directory:
    os.chdir(user_directory)
  app.run(main)
