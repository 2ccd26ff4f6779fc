#include "native/hlo/graph.h"

#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "native/hlo/hlo_error.h"

namespace tpu_graphs {
namespace {

constexpr int kLayoutValues = 18;
constexpr float kLowestLayoutValue = -1, kHighestLayoutValue = 5;  // graphs.LAYOUT_VALUE_RANGE

bool IsGraphIdCharacter(char c) {
  return !(c == ' ' || (c >= '\t' && c <= '\r') || c == ':' || c == ',' || c == ';' || c == '"' || c == '\'');
}

std::string Shown(float value) {  // Python's f"{value:g}"
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

}  // namespace

void ValidateGraph(const Graph& graph, const std::string& source, bool no_configs_allowed) {
  bool id_ok = !graph.graph_id.empty();
  for (const char c : graph.graph_id) id_ok = id_ok && IsGraphIdCharacter(c);
  if (!id_ok) {
    throw HloError(source, "graph id " + Quoted(graph.graph_id) + " (the file name) cannot be part of a submission ID "
                           "'<collection>:<graph id>': rename the file without ':', ',', ';', quotes or spaces");
  }
  for (const auto* floats : {&graph.node_feat, &graph.config_feat}) {
    for (const float value : *floats) {
      if (!std::isfinite(value)) {
        throw HloError(source, std::string(floats == &graph.node_feat ? "'node_feat'" : "'config_feat'") +
                                   " holds NaN or infinite values");
      }
    }
  }
  const int64_t nc = graph.num_configurable();
  for (int64_t i = 0; i < static_cast<int64_t>(graph.node_config_feat.size()); ++i) {
    const float value = graph.node_config_feat[i];
    if (!(value >= kLowestLayoutValue && value <= kHighestLayoutValue && value == std::round(value))) {
      const int64_t row = i / kLayoutValues;
      throw HloError(source, "'node_config_feat'[" + std::to_string(row / nc) + ", " + std::to_string(row % nc) +
                                 ", " + std::to_string(i % kLayoutValues) + "] = " + Shown(value) +
                                 " is not a layout value (an integer dimension index in [-1, 5], -1 unset)");
    }
  }
  if (graph.num_nodes() == 0) throw HloError(source, "the graph has no nodes");
  if (!graph.is_tile() && graph.node_config_ids.empty()) {
    throw HloError(source, "'node_config_ids' is empty: no node is configurable, so the configs cannot differ and "
                           "there is nothing to rank");
  }
  if (graph.num_configs == 0 && !no_configs_allowed) throw HloError(source, "the file has zero configs");
  std::unordered_set<int64_t> seen;
  for (size_t j = 0; j < graph.node_config_ids.size(); ++j) {
    const int64_t id = graph.node_config_ids[j];
    if (id < 0 || id >= graph.num_nodes()) {
      throw HloError(source, "'node_config_ids' entry " + std::to_string(j) + " = " + std::to_string(id) +
                                 " is out of range for " + std::to_string(graph.num_nodes()) + " nodes");
    }
    if (!seen.insert(id).second) throw HloError(source, "'node_config_ids' lists a node more than once");
  }
}

}  // namespace tpu_graphs
