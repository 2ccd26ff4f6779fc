// What both model libraries (model_library.cc: tile, layout_library.cc: layout) need besides
// their compiled classes: the error message of a refused call, the checks of features, edges and
// of the CPU a library was compiled for. Header-only: each library is one g++ call
// (tpu_graphs/export/native_library.py).
#ifndef TPU_GRAPHS_NATIVE_LIBRARY_CHECKS_H_
#define TPU_GRAPHS_NATIVE_LIBRARY_CHECKS_H_

#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "tpu_graphs_model.h"

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

// Refuses a count of rows of `row_bytes` bytes that no array holds (more than PTRDIFF_MAX bytes): a
// caller's bug (an uninitialized or negative size read as unsigned), refused before any size is
// multiplied out or any array read. `name` names the array.
inline int CheckArrayLength(const char* name, int64_t rows, int64_t row_bytes, char* message, size_t message_size) {
  if (rows > PTRDIFF_MAX / row_bytes) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size,
                "%s would hold %lld rows of %lld bytes, more than any array holds: a count is wrong", name,
                static_cast<long long>(rows), static_cast<long long>(row_bytes));
  }
  return TPU_GRAPHS_OK;
}

// The index of the first non-finite value of values[0, count), or -1.
inline int64_t FirstNonFinite(const float* values, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) return i;
  }
  return -1;
}

// The checks of a graph's ops and edges both kinds make (saved_model.checked_arrays): finite
// node_feat [num_nodes][140], edge_index [num_edges][2] naming ops in [0, num_nodes).
inline int CheckOpsAndEdges(int64_t num_nodes, const float* node_feat, int64_t num_edges, const int64_t* edge_index,
                            char* message, size_t message_size) {
  constexpr int64_t kNodeFeatures = 140;
  const int64_t bad = FirstNonFinite(node_feat, num_nodes * kNodeFeatures);
  if (bad >= 0) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "node_feat holds NaN or infinite values (op %lld, feature %lld)",
                static_cast<long long>(bad / kNodeFeatures), static_cast<long long>(bad % kNodeFeatures));
  }
  for (int64_t i = 0; i < 2 * num_edges; ++i) {
    if (edge_index[i] < 0 || edge_index[i] >= num_nodes) {
      return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "edge_index row %lld names op %lld, outside [0, %lld)",
                  static_cast<long long>(i / 2), static_cast<long long>(edge_index[i]), static_cast<long long>(num_nodes));
    }
  }
  return TPU_GRAPHS_OK;
}

}  // namespace tpu_graphs_library

#endif  // TPU_GRAPHS_NATIVE_LIBRARY_CHECKS_H_
