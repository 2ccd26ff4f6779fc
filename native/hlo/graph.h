// A featurized graph as a TpuGraphs file holds it (tile or layout collection), with what a
// description of its configs needs: the name and own layouts of each configurable instruction.
#ifndef TPU_GRAPHS_NATIVE_HLO_GRAPH_H_
#define TPU_GRAPHS_NATIVE_HLO_GRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tpu_graphs {

// A configurable node as a description names it: its instruction's name ("node <i>" where no
// module is known, as for an npz file), and per tensor a layout config may set (result, operand 0,
// operand 1) the minor-to-major order the module gives it and the kind of a change to it
// (layout_changes.h); empty where unknown.
struct ConfigurableTensors {
  std::string name;
  std::vector<std::vector<int64_t>> own_layouts;
  std::vector<std::string> changes;
};

struct Graph {
  std::string graph_id;
  std::string collection;  // "tile:xla", "layout:xla:default", ...
  std::string split;       // "test" for graphs nobody measured, else ""
  std::vector<float> node_feat;      // [n][140]
  std::vector<uint8_t> node_opcode;  // [n]
  std::vector<int64_t> edge_index;   // [m][2] consumer, producer
  int64_t num_configs = 0;
  std::vector<int64_t> config_runtime;  // [c]
  // tile
  std::vector<float> config_feat;                   // [c][24]
  std::vector<int64_t> config_runtime_normalizers;  // [c]
  // layout
  std::vector<int64_t> node_config_ids;  // [nc]
  std::vector<float> node_config_feat;   // [c][nc][18]
  std::vector<int64_t> node_splits;      // [1][k]
  std::vector<ConfigurableTensors> configurable;  // [nc] (layout)

  bool is_tile() const { return collection.rfind("tile", 0) == 0; }
  int64_t num_nodes() const { return static_cast<int64_t>(node_opcode.size()); }
  int64_t num_edges() const { return static_cast<int64_t>(edge_index.size() / 2); }
  int64_t num_configurable() const { return static_cast<int64_t>(node_config_ids.size()); }
};

// The checks of tpu_graphs.data.graphs.validate_graph a featurized graph can fail: its id, node
// features that overflow float32, configurable ids and layout values. Throws HloError naming
// `source`. A graph without configs passes only where `no_configs_allowed` (nothing measured yet).
void ValidateGraph(const Graph& graph, const std::string& source, bool no_configs_allowed = false);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_GRAPH_H_
