// The graph of one HLO module before any configuration is attached (featurize.module_features):
// one node per instruction, computations in module order and instructions in computation order;
// edges [consumer, producer], one per distinct operand and one from an instruction to the root of
// each computation it calls, sorted and distinct.
#ifndef TPU_GRAPHS_NATIVE_HLO_MODULE_GRAPH_H_
#define TPU_GRAPHS_NATIVE_HLO_MODULE_GRAPH_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "xla/service/hlo.pb.h"

namespace tpu_graphs {

struct ModuleGraph {
  std::vector<float> node_feat;       // [n][140]
  std::vector<uint8_t> node_opcode;   // [n]
  std::vector<int64_t> edge_index;    // [m][2]
  std::vector<int64_t> node_splits;   // [k]: node offsets where the program's major computations end
  // The n instructions in node order; they point into the module, which must outlive the graph.
  std::vector<const xla::HloInstructionProto*> instructions;
  std::unordered_map<int64_t, int64_t> node_by_instruction_id;

  int64_t num_nodes() const { return static_cast<int64_t>(instructions.size()); }
};

// Featurizes every instruction of `module`. Throws HloError naming `source` (a file; "" names the
// module) for a malformed module (CheckModule) or an opcode the dataset's numbering lacks.
ModuleGraph FeaturizeModule(const xla::HloModuleProto& module, const std::string& source);

// What errors about a module name by default: "HLO module '<name>'".
std::string ModuleSource(const xla::HloModuleProto& module);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_MODULE_GRAPH_H_
