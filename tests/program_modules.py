"""The programs of baselines/ as modules, for tests that call a program's own functions in-process."""

import functools
import importlib.util
import pathlib
from types import ModuleType

from absl import flags

BASELINES = pathlib.Path(__file__).resolve().parents[1] / "baselines"


@functools.cache
def load(program: str) -> ModuleType:
  """baselines/<program>.py as a module, loaded once per process: its flags can be defined only once."""
  spec = importlib.util.spec_from_file_location(f"{program}_program", BASELINES / f"{program}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def run_main(program: str, flag_values: list[str]) -> None:
  """baselines/<program>.py's main with these flags, parsed as absl's app.run would parse them, in
  this process (so that a test can read what it left in an in-memory file system)."""
  module = load(program)
  try:
    flags.FLAGS([program, *flag_values])
    module.main([])
  finally:
    flags.FLAGS.unparse_flags()
