#include "native/hlo/module_origin.h"

#include <utility>
#include <vector>

namespace tpu_graphs {
namespace {

// Custom-call target prefixes of the CPU and GPU backends' libraries and runtimes.
const std::pair<const char*, const char*> kBackendCustomCalls[] = {
    {"__onednn$", "CPU"}, {"__xla_cpu_", "CPU"}, {"__cublas", "GPU"}, {"__cudnn$", "GPU"},
    {"__cusolver", "GPU"}, {"__triton", "GPU"},  {"__gpu$", "GPU"}};

bool IsTiled(const xla::ShapeProto& shape) {
  if (shape.layout().tiles_size() > 0) return true;
  for (const xla::ShapeProto& element : shape.tuple_shapes()) {
    if (IsTiled(element)) return true;
  }
  return false;
}

std::vector<const xla::HloModuleProto*> ModulesOf(const HloInput& input) {
  switch (input.kind) {
    case HloInput::Kind::kTuningData: {
      std::vector<const xla::HloModuleProto*> modules;
      for (const ModuleTuningData& kernel : input.tuning_data.modules()) modules.push_back(&kernel.module());
      return modules;
    }
    case HloInput::Kind::kModuleTuningData:
      return {&input.module_tuning_data.module()};
    default:
      return {&input.module};
  }
}

// module_origin.other_backend: the backend other than TPU with its evidence, or "".
std::string OtherBackend(const std::vector<const xla::HloModuleProto*>& modules) {
  std::vector<const xla::HloInstructionProto*> instructions;
  for (const xla::HloModuleProto* module : modules) {
    for (const xla::HloComputationProto& computation : module->computations()) {
      for (const xla::HloInstructionProto& instruction : computation.instructions()) {
        if (IsTiled(instruction.shape())) return "";
        instructions.push_back(&instruction);
      }
    }
  }
  for (const xla::HloInstructionProto* instruction : instructions) {
    if (instruction->opcode() != "custom-call") continue;
    for (const auto& [prefix, backend] : kBackendCustomCalls) {
      if (instruction->custom_call_target().rfind(prefix, 0) == 0) {
        return std::string(backend) + " (a custom call to " + instruction->custom_call_target() + ")";
      }
    }
  }
  for (const xla::HloInstructionProto* instruction : instructions) {
    if (instruction->opcode() == "fusion") {
      return "a backend other than TPU (fusions, and no tiled layout as TPU's layout assignment writes)";
    }
  }
  return "";
}

}  // namespace

std::string BackendNote(const HloInput& input) {
  const std::string backend = OtherBackend(ModulesOf(input));
  if (backend.empty()) return "";
  return "note: this module was compiled for " + backend +
         "; the model was trained on TPU measurements, so its ranking says what would be fast on a TPU, not on that "
         "backend";
}

}  // namespace tpu_graphs
