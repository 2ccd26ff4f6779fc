#include "native/hlo/descriptions.h"

#include <algorithm>

#include "native/hlo/features.h"
#include "native/hlo/layout_changes.h"

namespace tpu_graphs {

const char kLayoutsMeaning[] =
    "layouts: for each instruction the config moves from the module's own layouts (named as in the module; "
    "'node <i>' where the input names none), the minor_to_major order it sets on the instruction's result and "
    "operands: the listed dims are the tensor's minor-most dims, minor-most first, and its other dims are free "
    "(a partial order, as XLA's layout assignment may complete it); 'change' says what kind of change it is: "
    "'kept' (the tensor's own layout), 'internal' (a layout XLA's layout assignment chooses), 'entry parameter' or "
    "'entry result' (the entry computation layout's, fixed by the program's caller), 'custom call' (fixed by a "
    "layout-constrained custom call), 'unknown' (no module)";

const char* const kLayoutChangeKinds[6] = {kKeptLayout,        kInternalChange,   kEntryParameterChange,
                                           kEntryResultChange, kCustomCallChange, kUnknownChange};

std::string TensorRole(int tensor) { return tensor == 0 ? "result" : "operand " + std::to_string(tensor - 1); }

ConfigDescription DescribeTileConfig(const float* row) {
  ConfigDescription description;
  for (int i = 0; i < 6; ++i) {
    if (row[8 + i] > 0) description.output_tile.push_back(static_cast<int64_t>(row[8 + i]));
    if (row[i] > 0) description.kernel_tile.push_back(static_cast<int64_t>(row[i]));
  }
  return description;
}

ConfigDescription DescribeLayoutConfig(const float* node_config_feat, const std::vector<int64_t>& node_config_ids,
                                       const std::vector<ConfigurableTensors>& configurable) {
  ConfigDescription description;
  for (size_t j = 0; j < node_config_ids.size(); ++j) {
    const float* row = node_config_feat + j * kLayoutConfigFeatures;
    const ConfigurableTensors* known = j < configurable.size() ? &configurable[j] : nullptr;
    InstructionLayouts set{known ? known->name : "node " + std::to_string(node_config_ids[j]), {}};
    bool moved = false;
    for (int t = 0; t < kLayoutMaxTensors; ++t) {
      std::vector<int64_t> dims;
      for (int i = 0; i < kLayoutMaxDims; ++i) {
        if (row[t * kLayoutMaxDims + i] >= 0) dims.push_back(static_cast<int64_t>(row[t * kLayoutMaxDims + i]));
      }
      if (dims.empty()) continue;
      const bool own_known = known && t < static_cast<int>(known->own_layouts.size()) &&
                             known->own_layouts[t].size() >= dims.size();
      const bool tensor_moved = !own_known || !std::equal(dims.begin(), dims.end(), known->own_layouts[t].begin());
      moved = moved || tensor_moved;
      const bool kind_known = known && t < static_cast<int>(known->changes.size());
      set.tensors.push_back({t, std::move(dims),
                             !tensor_moved ? kKeptLayout : kind_known ? known->changes[t] : kUnknownChange});
    }
    if (moved) description.layouts.push_back(std::move(set));
  }
  return description;
}

ConfigDescription Describe(const Graph& graph, int64_t config) {
  if (graph.is_tile()) return DescribeTileConfig(graph.config_feat.data() + config * kTileConfigFeatures);
  return DescribeLayoutConfig(graph.node_config_feat.data() + config * graph.num_configurable() * kLayoutConfigFeatures,
                              graph.node_config_ids, graph.configurable);
}

}  // namespace tpu_graphs
