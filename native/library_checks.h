// What both model libraries (model_library.cc: tile, layout_library.cc: layout) need besides
// their compiled classes: the error message of a refused call, the check of finite features and
// of the CPU a library was compiled for. Header-only: each library is one g++ call
// (tpu_graphs/export/native_library.py).
#ifndef TPU_GRAPHS_NATIVE_LIBRARY_CHECKS_H_
#define TPU_GRAPHS_NATIVE_LIBRARY_CHECKS_H_

#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace tpu_graphs_library {

// Writes the message (printf format) if the caller gave room for one; returns `status`.
inline int Fail(int status, char* message, size_t message_size, const char* format, ...) {
  if (message != nullptr && message_size > 0) {
    va_list arguments;
    va_start(arguments, format);
    std::vsnprintf(message, message_size, format, arguments);
    va_end(arguments);
  }
  return status;
}

// A library compiled for x86-64-v3 (baselines/compile_native.py --cpu) runs AVX2 and FMA code.
inline bool CpuCanRun() {
#ifdef TPU_GRAPHS_REQUIRES_X86_64_V3
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return true;
#endif
}

// The index of the first non-finite value of values[0, count), or -1.
inline int64_t FirstNonFinite(const float* values, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) return i;
  }
  return -1;
}

}  // namespace tpu_graphs_library

#endif  // TPU_GRAPHS_NATIVE_LIBRARY_CHECKS_H_
