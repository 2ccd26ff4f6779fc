#include "native/tools/graph_arrays.h"

#include "native/hlo/features.h"

namespace tpu_graphs {
namespace {

template <class T>
std::pair<std::string, Array> Named(std::string name, std::string dtype, std::vector<int64_t> shape,
                                    const std::vector<T>& values) {
  const char* bytes = reinterpret_cast<const char*>(values.data());
  return {std::move(name), Array{std::move(dtype), std::move(shape),
                                 std::vector<char>(bytes, bytes + values.size() * sizeof(T))}};
}

}  // namespace

std::vector<std::pair<std::string, Array>> GraphArrays(const Graph& graph) {
  const int64_t n = graph.num_nodes(), c = graph.num_configs;
  std::vector<std::pair<std::string, Array>> arrays = {
      Named("node_feat", "<f4", {n, kNodeFeatures}, graph.node_feat),
      Named("node_opcode", "|u1", {n}, graph.node_opcode),
      Named("edge_index", "<i8", {graph.num_edges(), 2}, graph.edge_index)};
  if (graph.is_tile()) {
    arrays.push_back(Named("config_feat", "<f4", {c, kTileConfigFeatures}, graph.config_feat));
    arrays.push_back(Named("config_runtime", "<i8", {c}, graph.config_runtime));
    arrays.push_back(Named("config_runtime_normalizers", "<i8", {c}, graph.config_runtime_normalizers));
  } else {
    arrays.push_back(Named("node_config_ids", "<i8", {graph.num_configurable()}, graph.node_config_ids));
    arrays.push_back(Named("node_config_feat", "<f4", {c, graph.num_configurable(), kLayoutConfigFeatures},
                           graph.node_config_feat));
    arrays.push_back(Named("config_runtime", "<i8", {c}, graph.config_runtime));
    arrays.push_back(Named("node_splits", "<i8", {1, static_cast<int64_t>(graph.node_splits.size())},
                           graph.node_splits));
  }
  return arrays;
}

}  // namespace tpu_graphs
