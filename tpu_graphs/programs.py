"""What every program in baselines/ shares: start in the caller's directory, quiet logs, absl flags.

`bazel run` starts a program inside its runfiles tree; relative paths on the command line are
meant relative to where the user typed the command, which Bazel passes as
BUILD_WORKING_DIRECTORY. TensorFlow's INFO chatter (SavedModel assets, retracing notes) would
bury the programs' own progress lines, so it is limited to warnings unless asked for.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # before TensorFlow loads its C++ runtime

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top


def run(main) -> None:
  """absl's app.run, after moving to the directory `bazel run` was called from (if any)."""
  user_directory = os.environ.get("BUILD_WORKING_DIRECTORY")
  if user_directory:
    os.chdir(user_directory)

  def quiet_main(argv):
    if not flags.FLAGS["verbosity"].present:
      logging.set_verbosity(logging.WARNING)
    return main(argv)

  app.run(quiet_main)
