// What a config of a graph sets, read back from its config features as
// tpu_graphs/hlo/descriptions.py reads them: a tile config's output and kernel tile sizes; a layout
// config's minor-to-major orders on the instructions it moves from the module's own layouts.
#ifndef TPU_GRAPHS_NATIVE_HLO_DESCRIPTIONS_H_
#define TPU_GRAPHS_NATIVE_HLO_DESCRIPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "native/hlo/graph.h"

namespace tpu_graphs {

// The order a config sets on one tensor of an instruction: `dims` are its minor-most dimensions,
// minor-most first; the tensor's other dimensions are free (a partial order).
struct TensorLayout {
  int tensor;                 // 0: the result; k > 0: operand k - 1
  std::vector<int64_t> dims;
  std::string change;         // "kept" (its own layout), else whose layout it is (layout_changes.h)
};

// The kinds of change in the order of the C interface's tpu_graphs_layout_change values.
extern const char* const kLayoutChangeKinds[6];

struct InstructionLayouts {
  std::string instruction;  // its name ("node <i>" where the graph knows no names)
  std::vector<TensorLayout> tensors;
};

struct ConfigDescription {
  std::vector<int64_t> output_tile, kernel_tile;  // tile graphs
  std::vector<InstructionLayouts> layouts;        // layout graphs, in node order
};

// What the layout JSON says its "layouts" mean (the same text in rank.py's JSON).
extern const char kLayoutsMeaning[];

// "result", "operand 0", "operand 1": the name of tensor slot `tensor`.
std::string TensorRole(int tensor);

// What a tile config sets: its 24 features' output and kernel bounds (the positive ones of the 6).
ConfigDescription DescribeTileConfig(const float* config_feat);

// What a layout config sets, from its [nc][18] features: every instruction one of whose tensors it
// sets to other minor-most dims than the module's own layout, with all the tensors it sets there
// and the kind of change each is; where `configurable` is empty (no module known), every
// configurable node it sets anything on, of kind "unknown".
ConfigDescription DescribeLayoutConfig(const float* node_config_feat, const std::vector<int64_t>& node_config_ids,
                                       const std::vector<ConfigurableTensors>& configurable);

// What config `config` of `graph` sets.
ConfigDescription Describe(const Graph& graph, int64_t config);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_DESCRIPTIONS_H_
