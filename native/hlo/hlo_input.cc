#include "native/hlo/hlo_input.h"

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "google/protobuf/stubs/logging.h"
#include "native/hlo/hlo_error.h"

namespace tpu_graphs {
namespace {

// Protobuf parsing accepts the bytes of another message whenever the wire types happen to agree,
// so each kind must carry what its producer always writes.
bool LooksLikeModule(const xla::HloModuleProto& module) {
  if (module.computations_size() == 0) return false;
  for (const xla::HloComputationProto& computation : module.computations()) {
    if (computation.instructions_size() == 0) return false;
    for (const xla::HloInstructionProto& instruction : computation.instructions()) {
      if (instruction.opcode().empty()) return false;
    }
  }
  return true;
}

// A program's tuning data, measured or not yet (no runs): its module and configurable nodes.
bool IsModuleTuningData(const ModuleTuningData& tuning) {
  if (!LooksLikeModule(tuning.module()) || tuning.config_index_to_node_size() == 0) return false;
  for (const ConfigProfile& run : tuning.runs()) {
    if (run.config_case() != ConfigProfile::kModuleConfig) return false;
  }
  return true;
}

// Kernels' tuning data: modules, and tile runs (all of them without runs: nothing measured yet).
bool IsTuningData(const TuningData& tuning) {
  if (tuning.modules_size() == 0) return false;
  for (const ModuleTuningData& kernel : tuning.modules()) {
    if (!LooksLikeModule(kernel.module())) return false;
    for (const ConfigProfile& run : kernel.runs()) {
      if (run.config_case() != ConfigProfile::kOpConfig) return false;
    }
  }
  return true;
}

}  // namespace

HloInput ParseHloInput(std::string_view bytes, const std::string& source) {
  if (bytes.empty()) throw HloError(source, "the file is empty");
  const size_t text_start = bytes.find_first_not_of(" \t\r\n\f\v");  // Python's bytes.lstrip()
  if (text_start != std::string_view::npos && bytes.substr(text_start).rfind("HloModule ", 0) == 0) {
    throw HloError(source, "holds HLO text (it starts with 'HloModule'), not a serialized proto; pass the module as "
                           "a proto: XLA writes one per module with --xla_dump_hlo_as_proto (*.hlo.pb)");
  }
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    throw HloError(source, "holds " + std::to_string(bytes.size()) + " bytes, more than protobuf parses (2 GiB)");
  }
  HloInput input;
  input.source = source;
  // Bytes of another kind may fail a trial parse; protobuf would log each failure.
  const google::protobuf::LogSilencer quiet;
  if (input.module_tuning_data.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) &&
      IsModuleTuningData(input.module_tuning_data)) {
    input.kind = HloInput::Kind::kModuleTuningData;
    return input;
  }
  input.module_tuning_data.Clear();
  if (input.tuning_data.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) &&
      IsTuningData(input.tuning_data)) {
    input.kind = HloInput::Kind::kTuningData;
    return input;
  }
  input.tuning_data.Clear();
  input.kind = HloInput::Kind::kModule;
  if (input.module.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) && LooksLikeModule(input.module)) {
    return input;
  }
  xla::HloProto dump;
  if (dump.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) && LooksLikeModule(dump.hlo_module())) {
    input.module = std::move(*dump.mutable_hlo_module());
    input.hlo_proto = true;
    return input;
  }
  throw HloError(source, "not a serialized ModuleTuningData, TuningData, HloModuleProto or HloProto (not a protocol "
                         "buffer, truncated, or missing computations / configurable nodes / runs)");
}

std::string ReadHloFile(const std::string& path, const WorkLimits& limits) {
  std::error_code status;
  if (std::filesystem::is_directory(path, status)) throw HloError(path, "a directory, not a file");
  if (!std::filesystem::exists(path, status)) throw HloError(path, "no such file");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw HloError(path, std::string("cannot read the file (") + std::strerror(errno) + ")");
  std::string bytes;
  char block[1 << 16];
  while (file.read(block, sizeof(block)) || file.gcount() > 0) {
    bytes.append(block, static_cast<size_t>(file.gcount()));
    CheckModuleBytes(static_cast<int64_t>(bytes.size()), limits, path);
  }
  if (file.bad()) throw HloError(path, "cannot read the file");
  return bytes;
}

}  // namespace tpu_graphs
