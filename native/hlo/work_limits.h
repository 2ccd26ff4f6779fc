// How much work ranking a module takes on, checked before anything large is allocated: a compiler
// calling the library with a careless count or a huge module gets a refusal, not a process grown
// until the machine kills it. tpu_graphs/hlo/work_limits.py holds the same limits and refuses
// with the same words; the C interface passes them in tpu_graphs_rank_options.
#ifndef TPU_GRAPHS_NATIVE_HLO_WORK_LIMITS_H_
#define TPU_GRAPHS_NATIVE_HLO_WORK_LIMITS_H_

#include <cstdint>
#include <string>

#include "native/hlo/hlo_error.h"

namespace tpu_graphs {

// The defaults (TPU_GRAPHS_DEFAULT_* of tpu_graphs_model.h), sized for a compiler's process on a
// small machine (docs/compiler.md#bounded-work).
inline constexpr int64_t kDefaultMaxCandidates = 100000;
inline constexpr int64_t kDefaultMaxModuleBytes = int64_t{64} << 20;
inline constexpr int64_t kDefaultMaxConfigBytes = int64_t{128} << 20;

struct WorkLimits {
  int64_t max_candidates = kDefaultMaxCandidates;    // candidate configs asked for
  int64_t max_module_bytes = kDefaultMaxModuleBytes;  // a serialized module
  int64_t max_config_bytes = kDefaultMaxConfigBytes;  // config features of one graph's candidates (float32)
};

// Work beyond a limit: refused (the C interface's TPU_GRAPHS_TOO_LARGE), not cut.
class WorkLimitError : public HloError {
 public:
  using HloError::HloError;
};

// Refuses more candidates than limits.max_candidates.
void CheckCandidateCount(int64_t num_candidates, const WorkLimits& limits);

// Refuses a serialized module of more than limits.max_module_bytes, naming `source`.
void CheckModuleBytes(int64_t bytes, const WorkLimits& limits, const std::string& source);

// Refuses `configs` candidates of `values_per_config` float32 config features each when they take
// more than limits.max_config_bytes, naming `source`.
void CheckConfigBytes(int64_t configs, int64_t values_per_config, const WorkLimits& limits, const std::string& source);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_WORK_LIMITS_H_
