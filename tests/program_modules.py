"""The programs of baselines/ as modules, for tests that call a program's own functions in-process."""

import functools
import importlib.util
import pathlib
from types import ModuleType

BASELINES = pathlib.Path(__file__).resolve().parents[1] / "baselines"


@functools.cache
def load(program: str) -> ModuleType:
  """baselines/<program>.py as a module, loaded once per process: its flags can be defined only once."""
  spec = importlib.util.spec_from_file_location(f"{program}_program", BASELINES / f"{program}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module
