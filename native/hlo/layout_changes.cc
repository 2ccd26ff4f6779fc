#include "native/hlo/layout_changes.h"

#include <unordered_set>
#include <vector>

namespace tpu_graphs {

std::unordered_map<int64_t, std::string> ChangeKinds(const xla::HloModuleProto& module) {
  std::unordered_map<int64_t, std::string> kinds;
  const xla::HloComputationProto* entry = nullptr;
  for (const xla::HloComputationProto& computation : module.computations()) {
    if (entry == nullptr && computation.id() == module.entry_computation_id()) entry = &computation;
  }
  if (entry != nullptr) {
    std::unordered_map<int64_t, const xla::HloInstructionProto*> by_id;
    for (const xla::HloInstructionProto& instruction : entry->instructions()) by_id[instruction.id()] = &instruction;
    // layout_changes.entry_results: the root and the tensors it forwards through tuples.
    std::vector<int64_t> pending = {entry->root_id()};
    std::unordered_set<int64_t> found;
    while (!pending.empty()) {
      const auto instruction = by_id.find(pending.back());
      pending.pop_back();
      if (instruction == by_id.end() || !found.insert(instruction->first).second) continue;
      kinds[instruction->first] = kEntryResultChange;
      const xla::HloInstructionProto& forwarding = *instruction->second;
      if (forwarding.opcode() == "tuple") {
        pending.insert(pending.end(), forwarding.operand_ids().begin(), forwarding.operand_ids().end());
      } else if (forwarding.opcode() == "get-tuple-element" && forwarding.operand_ids_size() > 0) {
        const auto tuple = by_id.find(forwarding.operand_ids(0));
        if (tuple != by_id.end() && tuple->second->opcode() == "tuple" && forwarding.tuple_index() >= 0 &&
            forwarding.tuple_index() < tuple->second->operand_ids_size()) {
          pending.push_back(tuple->second->operand_ids(forwarding.tuple_index()));
        }
      }
    }
    for (const xla::HloInstructionProto& instruction : entry->instructions()) {
      bool parameter = instruction.opcode() == "parameter";
      if (instruction.opcode() == "get-tuple-element" && instruction.operand_ids_size() > 0) {
        const auto operand = by_id.find(instruction.operand_ids(0));
        parameter = operand != by_id.end() && operand->second->opcode() == "parameter";
      }
      if (parameter) kinds[instruction.id()] = kEntryParameterChange;
    }
  }
  for (const xla::HloComputationProto& computation : module.computations()) {
    for (const xla::HloInstructionProto& instruction : computation.instructions()) {
      if (instruction.opcode() != "custom-call" || instruction.operand_shapes_with_layout_size() == 0) continue;
      kinds[instruction.id()] = kCustomCallChange;
      for (const int64_t operand : instruction.operand_ids()) kinds[operand] = kCustomCallChange;
    }
  }
  return kinds;
}

bool MayChange(const std::string& kind, bool change_entry_layouts) {
  return kind == kInternalChange ||
         (change_entry_layouts && (kind == kEntryParameterChange || kind == kEntryResultChange));
}

}  // namespace tpu_graphs
