"""Compiles a trained tile or layout model into a native library a compiler links or loads: no
Python, no TensorFlow runtime (tpu_graphs/export/aot/native_library.py, docs/compiler.md).

  bazel build //native:all                 # once: the XLA AOT runtime from the wheel's sources
  python baselines/compile_native.py --model out/tiles/export [--cpus x86-64,x86-64-v4]
  bazel run //native:rank -- --mode=aot --model=$PWD/out/tiles/export --input=kernel.npz
  python baselines/compile_native.py --model out/layout/export   # layout: models that prune (prune_hops set)

writes <model>/native/: libtpu_graphs_model.so (the C interface of native/library/tpu_graphs_model.h),
the header, the AOT-compiled classes and buckets.json.
"""

import pathlib
import time

from absl import flags

from baselines import program
from tpu_graphs.export import ranker
from tpu_graphs.export.aot import native_library

_REPOSITORY = pathlib.Path(__file__).resolve().parents[1]
_MODEL = flags.DEFINE_string("model", None, "A tile or layout model's serving SavedModel (a run's export/).", required=True)
_CPUS = flags.DEFINE_list("cpus", list(native_library.CPUS),
                          "The CPU levels the model is compiled for, of x86-64 (any), x86-64-v3 (AVX2, FMA) and "
                          "x86-64-v4 (AVX-512); a call runs the newest the CPU has, and the library runs on CPUs of "
                          "the oldest (benchmarks/results/native.md). Fewer compile faster.")
_RUNTIME_DIR = flags.DEFINE_string("runtime_dir", str(_REPOSITORY / "bazel-bin" / "native"),
                                   "Where the XLA AOT runtime archive is (bazel build //native:all).")


def main(argv):
  del argv
  ranker.check_export_dir(pathlib.Path(_MODEL.value))
  started = time.time()
  library = native_library.compile_model_library(_MODEL.value, _RUNTIME_DIR.value, _CPUS.value,
                                                 progress=program.progress_bar(started))
  print(f"wrote {library} ({library.stat().st_size / 1e6:.1f} MB) in {time.time() - started:.0f} s")


if __name__ == "__main__":
  program.run(main)
