// What both model libraries (tile_library.cc: tile, layout_library.cc: layout) need besides
// their compiled classes: the error message of a refused call, the checks of features and edges,
// and the choice among the CPU levels a library was compiled for. Header-only: each library is
// one g++ call (tpu_graphs/export/aot/native_library.py).
#ifndef TPU_GRAPHS_NATIVE_LIBRARY_LIBRARY_CHECKS_H_
#define TPU_GRAPHS_NATIVE_LIBRARY_LIBRARY_CHECKS_H_

#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "native/library/tpu_graphs_model.h"

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

// Whether this CPU (and its operating system) has x86-64-v3's vector and bit instructions: AVX,
// AVX2, FMA, BMI1, BMI2. Asked feature by feature because Debian's Clang 14, which builds the fuzz
// targets (benchmarks/fuzz.py), names no level; F16C, LZCNT and MOVBE, which it does not name
// either, come with these on every CPU that has them (Intel Haswell and AMD Excavator onwards).
inline bool CpuRunsX86_64V3() {
  return __builtin_cpu_supports("avx") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
}

// Whether this CPU (and its operating system) runs code of an x86-64 level: "x86-64" (any),
// "x86-64-v3" (AVX2, FMA, BMI2, ...), "x86-64-v4" (x86-64-v3 and AVX-512 F, BW, CD, DQ, VL).
inline bool CpuRuns(const char* level) {
  __builtin_cpu_init();
  if (std::strcmp(level, "x86-64-v4") == 0) {
    return CpuRunsX86_64V3() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
  }
  if (std::strcmp(level, "x86-64-v3") == 0) return CpuRunsX86_64V3();
  return std::strcmp(level, "x86-64") == 0;
}

// The level to run among a library's compiled `levels` (names, oldest first): the newest this CPU
// runs, or the one the environment variable TPU_GRAPHS_CPU_LEVEL names (benchmarks compare levels).
// -1 with `error` saying why where none can run.
inline int ChooseCpuLevel(const char* const* levels, int count, std::string* error) {
  const char* wanted = std::getenv("TPU_GRAPHS_CPU_LEVEL");
  std::string compiled;
  for (int i = 0; i < count; ++i) compiled += (i ? ", " : "") + std::string(levels[i]);
  for (int i = count - 1; i >= 0; --i) {
    if ((wanted == nullptr || std::strcmp(wanted, levels[i]) == 0) && CpuRuns(levels[i])) return i;
  }
  *error = wanted != nullptr
               ? "TPU_GRAPHS_CPU_LEVEL=" + std::string(wanted) + " names no level this library was compiled for (" +
                     compiled + ") that this CPU runs"
               : "this library was compiled for " + compiled + " CPUs only and this CPU runs none of them; compile "
                 "the model with baselines/compile_native.py --cpus=x86-64";
  return -1;
}

// The level of `levels` (a library's compiled levels, oldest first) this process runs, chosen once
// by ChooseCpuLevel at the first call, or -1 with the reason in `error`.
template <int N>
int ChosenCpuLevel(const char* const (&levels)[N], std::string* error) {
  static std::string reason;
  static const int level = ChooseCpuLevel(levels, N, &reason);
  *error = reason;
  return level;
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

#endif  // TPU_GRAPHS_NATIVE_LIBRARY_LIBRARY_CHECKS_H_
