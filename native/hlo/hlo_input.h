// A serialized XLA proto of any kind the featurizer reads, told apart by its content as
// hlo_input.parse_hlo_proto tells them: the release's ModuleTuningData (a program and its layout
// runs) and TuningData (kernels and their tile runs), a bare HloModuleProto, or an HloProto (what
// XLA's --xla_dump_hlo_as_proto writes), which gives its module.
#ifndef TPU_GRAPHS_NATIVE_HLO_HLO_INPUT_H_
#define TPU_GRAPHS_NATIVE_HLO_HLO_INPUT_H_

#include <string>
#include <string_view>

#include "native/hlo/work_limits.h"
#include "tpu_graphs/hlo/tuning.pb.h"
#include "xla/service/hlo.pb.h"

namespace tpu_graphs {

struct HloInput {
  enum class Kind { kModuleTuningData, kTuningData, kModule };
  Kind kind;
  ModuleTuningData module_tuning_data;  // kModuleTuningData
  TuningData tuning_data;               // kTuningData
  xla::HloModuleProto module;           // kModule (a bare module, or an HloProto's)
  std::string source;                   // what errors name: the file, or "" (then the module)
  bool hlo_proto = false;               // kModule that came in an HloProto (written back in one)
};

// Parses `bytes` as whichever kind fits. Throws HloError naming `source` for empty bytes or bytes
// that are none of them (not a protocol buffer, truncated, another message, or missing the
// computations, configurable nodes or runs each kind carries).
HloInput ParseHloInput(std::string_view bytes, const std::string& source);

// The bytes of a file; HloError naming it where it cannot be read, WorkLimitError where it holds
// more than limits.max_module_bytes (read no further).
std::string ReadHloFile(const std::string& path, const WorkLimits& limits);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_HLO_INPUT_H_
