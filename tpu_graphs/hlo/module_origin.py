"""Which XLA backend a module was compiled for, as far as the module shows it: the models are
trained on TPU measurements, so a module another backend (CPU, GPU) compiled is ranked with one
line saying so (rank.py, //native:rank, the C call's `backend_note`).

An HloModuleProto names no backend; what a backend's passes write into it does:
* a tiled layout (Layout.tiles, e.g. T(8,128)): TPU's layout assignment tiles arrays; CPU's and
  GPU's do not. A module with one is a TPU module, and nothing is said.
* a custom call to a backend's library or runtime: `__onednn$`, `__xla_cpu_` (CPU); `__cublas`,
  `__cudnn$`, `__cusolver`, `__triton`, `__gpu$` (GPU).
* fusions without any tiled layout: fused by a backend other than TPU (a TPU module is laid out,
  and tiled, before it is fused).
A module with none of these (no fusion, no tile, no backend's custom call: a module before
optimizations, as `*.before_optimizations.hlo.pb` and `stage='hlo'` give it) is the same for every
backend, and nothing is said. native/hlo/module_origin.cc applies the same rule.
"""

from __future__ import annotations

from typing import Iterable, Optional

from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.hlo import hlo_input
from tpu_graphs.hlo import tuning_pb2

# Custom-call target prefixes of the CPU and GPU backends' libraries and runtimes.
BACKEND_CUSTOM_CALLS = (("__onednn$", "CPU"), ("__xla_cpu_", "CPU"), ("__cublas", "GPU"), ("__cudnn$", "GPU"),
                        ("__cusolver", "GPU"), ("__triton", "GPU"), ("__gpu$", "GPU"))


def _is_tiled(shape) -> bool:
  return bool(shape.layout.tiles) or any(_is_tiled(element) for element in shape.tuple_shapes)


def _modules(proto: hlo_input.HloProto) -> list[hlo_pb2.HloModuleProto]:
  if isinstance(proto, tuning_pb2.TuningData):
    return [kernel.module for kernel in proto.modules]
  return [proto.module if isinstance(proto, tuning_pb2.ModuleTuningData) else proto]


def other_backend(modules: Iterable[hlo_pb2.HloModuleProto]) -> Optional[str]:
  """The backend other than TPU the modules were compiled for, with the evidence ('CPU (a custom
  call to __onednn$matmul)'), or None: a TPU module, or one no backend has compiled yet."""
  instructions = [i for module in modules for c in module.computations for i in c.instructions]
  if any(_is_tiled(i.shape) for i in instructions):
    return None
  for instruction in instructions:
    if instruction.opcode == "custom-call":
      for prefix, backend in BACKEND_CUSTOM_CALLS:
        if instruction.custom_call_target.startswith(prefix):
          return f"{backend} (a custom call to {instruction.custom_call_target})"
  if any(i.opcode == "fusion" for i in instructions):
    return "a backend other than TPU (fusions, and no tiled layout as TPU's layout assignment writes)"
  return None


def backend_note(proto: hlo_input.HloProto) -> Optional[str]:
  """One line saying the model was trained on TPU measurements, for a module another backend
  compiled (other_backend); None otherwise."""
  backend = other_backend(_modules(proto))
  if backend is None:
    return None
  return (f"note: this module was compiled for {backend}; the model was trained on TPU measurements, so its "
          "ranking says what would be fast on a TPU, not on that backend")
