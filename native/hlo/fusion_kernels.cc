#include "native/hlo/fusion_kernels.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "native/hlo/hlo_error.h"
#include "native/hlo/module_check.h"
#include "native/hlo/module_graph.h"

namespace tpu_graphs {
namespace {

using Computations = std::unordered_map<int64_t, const xla::HloComputationProto*>;

// Ids of the computations `roots` call, transitively, each after every computation it calls.
void AppendCalled(const Computations& computations, int64_t computation_id, std::vector<int64_t>* ordered) {
  if (std::find(ordered->begin(), ordered->end(), computation_id) != ordered->end()) return;
  for (const xla::HloInstructionProto& instruction : computations.at(computation_id)->instructions()) {
    for (const int64_t callee : instruction.called_computation_ids()) AppendCalled(computations, callee, ordered);
  }
  ordered->push_back(computation_id);
}

template <class Ids>
std::vector<int64_t> CalledComputations(const Computations& computations, const Ids& roots) {
  std::vector<int64_t> ordered;
  for (const int64_t root : roots) AppendCalled(computations, root, &ordered);
  return ordered;
}

}  // namespace

std::vector<xla::HloModuleProto> KernelModules(const xla::HloModuleProto& module, const std::string& given_source) {
  const std::string source = given_source.empty() ? ModuleSource(module) : given_source;
  CheckModule(module, source);
  Computations computations;
  std::unordered_map<int64_t, const xla::HloInstructionProto*> instructions;
  std::vector<std::pair<int64_t, const xla::HloInstructionProto*>> fusions;  // (its computation, the fusion)
  int64_t largest_id = 0;
  bool any = false;
  for (const xla::HloComputationProto& computation : module.computations()) {
    computations[computation.id()] = &computation;
    for (const xla::HloInstructionProto& instruction : computation.instructions()) {
      instructions[instruction.id()] = &instruction;
      largest_id = any ? std::max(largest_id, instruction.id()) : instruction.id();
      any = true;
      if (instruction.opcode() == "fusion") fusions.emplace_back(computation.id(), &instruction);
    }
  }
  std::vector<int64_t> fusion_callees;
  for (const auto& [computation_id, fusion] : fusions) {
    fusion_callees.insert(fusion_callees.end(), fusion->called_computation_ids().begin(),
                          fusion->called_computation_ids().end());
  }
  const std::vector<int64_t> fused_list = CalledComputations(computations, fusion_callees);
  const std::unordered_set<int64_t> fused(fused_list.begin(), fused_list.end());
  std::vector<const xla::HloInstructionProto*> outermost;
  for (const auto& [computation_id, fusion] : fusions) {
    if (fused.count(computation_id) == 0) outermost.push_back(fusion);
  }
  if (outermost.empty()) {
    const std::string named = source.find(Quoted(module.name())) != std::string::npos
                                  ? ""
                                  : "module " + Quoted(module.name()) + " ";
    throw HloError(source, named + "has no fusion instruction to make a kernel of: kernels need the optimized HLO "
                                   "(stage='optimized_hlo_serialized', or XLA's *after_optimizations.hlo.pb dump), "
                                   "not the unoptimized one (stage='hlo_serialized')");
  }
  const int64_t next_id = largest_id + 1;
  std::vector<xla::HloModuleProto> kernels;
  for (const xla::HloInstructionProto* fusion : outermost) {
    xla::HloModuleProto& kernel = kernels.emplace_back();
    kernel.set_name(fusion->name());
    kernel.set_entry_computation_name(fusion->name());
    for (const int64_t called : CalledComputations(computations, fusion->called_computation_ids())) {
      *kernel.add_computations() = *computations.at(called);
    }
    xla::HloComputationProto& entry = *kernel.add_computations();
    entry.set_name(fusion->name());
    entry.set_id(next_id);
    std::unordered_map<int64_t, int64_t> parameter_ids;  // operand id -> its parameter's id
    for (const int64_t operand_id : fusion->operand_ids()) {
      if (parameter_ids.count(operand_id)) continue;
      const int64_t number = static_cast<int64_t>(parameter_ids.size());
      xla::HloInstructionProto& parameter = *entry.add_instructions();
      parameter.set_name("parameter." + std::to_string(number));
      parameter.set_opcode("parameter");
      parameter.set_id(next_id + 1 + number);
      parameter.set_parameter_number(number);
      *parameter.mutable_shape() = instructions.at(operand_id)->shape();
      parameter_ids[operand_id] = parameter.id();
    }
    xla::HloInstructionProto& root = *entry.add_instructions();
    root = *fusion;
    root.clear_operand_ids();
    for (const int64_t operand_id : fusion->operand_ids()) root.add_operand_ids(parameter_ids.at(operand_id));
    entry.set_root_id(root.id());
    kernel.set_entry_computation_id(entry.id());
  }
  return kernels;
}

}  // namespace tpu_graphs
