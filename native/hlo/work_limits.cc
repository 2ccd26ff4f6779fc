#include "native/hlo/work_limits.h"

namespace tpu_graphs {

void CheckCandidateCount(int64_t num_candidates, const WorkLimits& limits) {
  if (num_candidates > limits.max_candidates) {
    throw WorkLimitError("", std::to_string(num_candidates) + " candidates asked for, more than the limit of " +
                                 std::to_string(limits.max_candidates) +
                                 " (max_candidates); ask for fewer or raise the limit");
  }
}

void CheckModuleBytes(int64_t bytes, const WorkLimits& limits, const std::string& source) {
  if (bytes > limits.max_module_bytes) {
    throw WorkLimitError(source, "holds more than " + std::to_string(limits.max_module_bytes) +
                                     " bytes, the limit of a module (max_module_bytes)");
  }
}

void CheckConfigBytes(int64_t configs, int64_t values_per_config, const WorkLimits& limits,
                      const std::string& source) {
  int64_t bytes = 0;
  if (__builtin_mul_overflow(configs, values_per_config * 4, &bytes) || bytes > limits.max_config_bytes) {
    throw WorkLimitError(source, std::to_string(configs) + " candidates of " + std::to_string(values_per_config) +
                                     " config features each would take more than " +
                                     std::to_string(limits.max_config_bytes) +
                                     " bytes, the limit (max_config_bytes); ask for fewer candidates or raise the limit");
  }
}

}  // namespace tpu_graphs
