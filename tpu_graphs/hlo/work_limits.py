"""How much work ranking a module takes on, checked before anything large is allocated: a careless
count (`--num_candidates 100000000`) or a huge module is refused in one line, not answered with a
process grown until the machine kills it. native/hlo/work_limits.h holds the same limits, with the
same defaults and words, and the C interface passes them in tpu_graphs_rank_options.

    limits = WorkLimits(max_candidates=1000)
    check_candidate_count(num_candidates, limits)   # WorkLimitError beyond it
"""

from __future__ import annotations

import dataclasses

from tpu_graphs.data import errors

# The defaults (TPU_GRAPHS_DEFAULT_* of native/library/tpu_graphs_model.h), sized for a compiler's process
# on a small machine (docs/compiler.md#bounded-work).
MAX_CANDIDATES = 100_000
MAX_MODULE_BYTES = 64 << 20
MAX_CONFIG_BYTES = 128 << 20
# Bytes of one config feature (float32).
_FEATURE_BYTES = 4


@dataclasses.dataclass(frozen=True)
class WorkLimits:
  """max_candidates: candidate configs asked for; max_module_bytes: a serialized module;
  max_config_bytes: the float32 config features of one graph's candidates."""

  max_candidates: int = MAX_CANDIDATES
  max_module_bytes: int = MAX_MODULE_BYTES
  max_config_bytes: int = MAX_CONFIG_BYTES


class WorkLimitError(errors.InputError):
  """Work beyond a limit: refused, not cut (the C interface's TPU_GRAPHS_TOO_LARGE)."""


def _named(source: str, problem: str) -> str:
  return f"{source}: {problem}" if source else problem


def check_candidate_count(num_candidates: int, limits: WorkLimits) -> None:
  """Refuses more candidates than limits.max_candidates."""
  if num_candidates > limits.max_candidates:
    raise WorkLimitError(f"{num_candidates} candidates asked for, more than the limit of {limits.max_candidates} "
                         "(max_candidates); ask for fewer or raise the limit")


def check_module_bytes(size: int, limits: WorkLimits, source: str) -> None:
  """Refuses a serialized module of more than limits.max_module_bytes, naming `source`."""
  if size > limits.max_module_bytes:
    raise WorkLimitError(_named(source, f"holds more than {limits.max_module_bytes} bytes, the limit of a module "
                                "(max_module_bytes)"))


def check_config_bytes(configs: int, values_per_config: int, limits: WorkLimits, source: str) -> None:
  """Refuses `configs` candidates of `values_per_config` float32 config features each where they
  would take more than limits.max_config_bytes, naming `source`."""
  if configs * values_per_config * _FEATURE_BYTES > limits.max_config_bytes:
    raise WorkLimitError(_named(source, f"{configs} candidates of {values_per_config} config features each would "
                                f"take more than {limits.max_config_bytes} bytes, the limit (max_config_bytes); ask "
                                "for fewer candidates or raise the limit"))
