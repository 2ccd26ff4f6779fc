#include "native/hlo/module_graph.h"

#include <algorithm>
#include <set>
#include <utility>

#include "native/hlo/features.h"
#include "native/hlo/hlo_error.h"
#include "native/hlo/module_check.h"
#include "native/hlo/opcodes.h"

namespace tpu_graphs {
namespace {

// Computations whose names contain these words end a node_splits segment (the release marks the
// boundaries of the program's major computations, not of fusion bodies or reducers).
constexpr const char* kSplitComputationWords[] = {"cluster", "while", "cond"};

bool EndsSplit(const std::string& computation_name) {
  for (const char* word : kSplitComputationWords) {
    if (computation_name.find(word) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

std::string ModuleSource(const xla::HloModuleProto& module) { return "HLO module " + Quoted(module.name()); }

ModuleGraph FeaturizeModule(const xla::HloModuleProto& module, const std::string& given_source) {
  const std::string source = given_source.empty() ? ModuleSource(module) : given_source;
  CheckModule(module, source);
  ModuleGraph graph;
  std::vector<bool> is_root;
  std::unordered_map<int64_t, int64_t> root_of_computation;
  graph.node_splits.push_back(0);
  for (const xla::HloComputationProto& computation : module.computations()) {
    root_of_computation[computation.id()] = computation.root_id();
    for (const xla::HloInstructionProto& instruction : computation.instructions()) {
      graph.instructions.push_back(&instruction);
      is_root.push_back(instruction.id() == computation.root_id());
    }
    if (EndsSplit(computation.name())) graph.node_splits.push_back(graph.num_nodes());
  }
  if (graph.node_splits.back() < graph.num_nodes()) graph.node_splits.push_back(graph.num_nodes());

  const int64_t n = graph.num_nodes();
  for (int64_t i = 0; i < n; ++i) graph.node_by_instruction_id[graph.instructions[i]->id()] = i;
  graph.node_opcode.resize(n);
  graph.node_feat.resize(n * kNodeFeatures);
  std::set<std::pair<int64_t, int64_t>> edges;  // sorted and distinct, as np.unique(axis=0) leaves them
  for (int64_t i = 0; i < n; ++i) {
    const xla::HloInstructionProto& instruction = *graph.instructions[i];
    const int opcode = OpcodeId(instruction.opcode());
    if (opcode < 0) {
      throw HloError(source, "instruction " + Quoted(instruction.name()) + " has opcode " +
                                 Quoted(instruction.opcode()) + ", which the TpuGraphs opcode numbering does not know");
    }
    graph.node_opcode[i] = static_cast<uint8_t>(opcode);
    NodeFeatures(instruction, is_root[i], graph.node_feat.data() + i * kNodeFeatures);
    for (const int64_t operand_id : instruction.operand_ids()) {
      edges.emplace(i, graph.node_by_instruction_id.at(operand_id));  // CheckModule: every operand exists
    }
    for (const int64_t computation_id : instruction.called_computation_ids()) {
      const auto root = graph.node_by_instruction_id.find(root_of_computation.at(computation_id));
      if (root == graph.node_by_instruction_id.end()) {
        throw HloError(source, "instruction " + Quoted(instruction.name()) + " calls computation id " +
                                   std::to_string(computation_id) + ", which the module lacks or which has no root");
      }
      edges.emplace(i, root->second);
    }
  }
  graph.edge_index.reserve(edges.size() * 2);
  for (const auto& [consumer, producer] : edges) {
    graph.edge_index.push_back(consumer);
    graph.edge_index.push_back(producer);
  }
  return graph;
}

}  // namespace tpu_graphs
