// The layout half of tpu_graphs_model.h over the classes saved_model_cli aot_compile_cpu wrote for
// one layout model, one class per size bucket (tpu_graphs/export/static_layout.py). Compiled per
// model by baselines/compile_native.py, which generates TPU_GRAPHS_BUCKETS_HEADER: it includes
// every bucket's header and defines TPU_GRAPHS_FOR_EACH_LAYOUT_BUCKET(X) as
// X(class, hops, nodes, edges, configurable, configs) per bucket, smallest first.
//
// A call checks the input as the SavedModel's plain signature does inside its graph
// (saved_model.checked_arrays), prunes the graph as its graph does (layout_pruning.cc), and
// scores the pruned graph in the smallest bucket it fits.

#include <cmath>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "hlo/library_ranking.h"
#include "layout_pruning.h"
#include "library_checks.h"
#include "tpu_graphs_model.h"
#include TPU_GRAPHS_BUCKETS_HEADER

namespace {

using tpu_graphs_library::CheckArrayLength;
using tpu_graphs_library::CheckOpsAndEdges;
using tpu_graphs_library::CpuCanRun;
using tpu_graphs_library::Fail;

constexpr int64_t kNodeFeatures = 140;
constexpr int64_t kLayoutValues = 18;
constexpr float kLowestLayoutValue = -1, kHighestLayoutValue = 5;  // graphs.LAYOUT_VALUE_RANGE


int CheckInput(int64_t num_nodes, const float* node_feat, const uint8_t* node_opcode, int64_t num_edges,
               const int64_t* edge_index, int64_t num_configurable, const int64_t* node_config_ids,
               int64_t num_configs, const float* node_config_feat, const float* scores, char* message,
               size_t message_size) {
  if (num_nodes < 1) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "num_nodes is %lld: a graph needs at least one op",
                static_cast<long long>(num_nodes));
  }
  if (num_edges < 0 || num_configs < 0) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "num_edges (%lld) and num_configs (%lld) must be >= 0",
                static_cast<long long>(num_edges), static_cast<long long>(num_configs));
  }
  if (num_configurable < 1) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size,
                "node_config_ids is empty: no node is configurable, so the configs cannot differ and there is "
                "nothing to rank");
  }
  // node_config_feat [num_configs][num_configurable][18]: each count against the bytes it multiplies.
  const int64_t config_row_bytes = sizeof(float) * kLayoutValues;
  int length = CheckArrayLength("node_feat", num_nodes, sizeof(float) * kNodeFeatures, message, message_size);
  if (length == TPU_GRAPHS_OK) length = CheckArrayLength("edge_index", num_edges, 2 * sizeof(int64_t), message, message_size);
  if (length == TPU_GRAPHS_OK) {
    length = CheckArrayLength("node_config_feat", num_configurable, config_row_bytes, message, message_size);
  }
  if (length == TPU_GRAPHS_OK) {
    length = CheckArrayLength("node_config_feat", num_configs, config_row_bytes * num_configurable, message, message_size);
  }
  if (length != TPU_GRAPHS_OK) return length;
  if (node_feat == nullptr || node_opcode == nullptr || node_config_ids == nullptr ||
      (num_edges > 0 && edge_index == nullptr) ||
      (num_configs > 0 && (node_config_feat == nullptr || scores == nullptr))) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "a null array with a positive count");
  }
  const int graph = CheckOpsAndEdges(num_nodes, node_feat, num_edges, edge_index, message, message_size);
  if (graph != TPU_GRAPHS_OK) return graph;
  std::vector<char> configurable(num_nodes, 0);
  for (int64_t j = 0; j < num_configurable; ++j) {
    const int64_t id = node_config_ids[j];
    if (id < 0 || id >= num_nodes) {
      return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "node_config_ids entry %lld names op %lld, outside [0, %lld)",
                  static_cast<long long>(j), static_cast<long long>(id), static_cast<long long>(num_nodes));
    }
    if (configurable[id]++) {
      return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "node_config_ids lists op %lld more than once",
                  static_cast<long long>(id));
    }
  }
  const int64_t values = num_configs * num_configurable * kLayoutValues;
  for (int64_t i = 0; i < values; ++i) {
    const float value = node_config_feat[i];
    if (!(value >= kLowestLayoutValue && value <= kHighestLayoutValue && value == std::round(value))) {
      const int64_t row = i / kLayoutValues;
      return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size,
                  "node_config_feat holds %g (config %lld, configurable op %lld, value %lld): not a layout value (an "
                  "integer dimension index in [-1, 5], -1 unset)",
                  value, static_cast<long long>(row / num_configurable), static_cast<long long>(row % num_configurable),
                  static_cast<long long>(i % kLayoutValues));
    }
  }
  return TPU_GRAPHS_OK;
}

// Scores the pruned graph in the bucket of `Model`: its arrays are copied into the bucket's
// argument buffers once, then the configs `configs` at a time, the last call filled up with
// copies of the last config (as the plain signature fills its last chunk). Rows past the counts
// are left as they are: the program zeroes them into a filler graph component.
template <class Model>
int ScoreInBucket(int64_t configurable_slots, int64_t configs, const float* node_feat, const uint8_t* node_opcode,
                  const tpu_graphs::PrunedLayout& pruned, int64_t num_configs, const float* node_config_feat,
                  float* scores, char* message, size_t message_size) {
  thread_local Model model;  // one set of buffers per thread and bucket, reused between calls
  const int64_t num_nodes = static_cast<int64_t>(pruned.kept_ops.size());
  const int64_t num_edges = static_cast<int64_t>(pruned.edge_index.size() / 2);
  const int64_t num_configurable = static_cast<int64_t>(pruned.node_config_ids.size());
  float* feat = model.arg_feed_node_feat_data();
  uint8_t* opcode = model.arg_feed_node_opcode_data();
  for (int64_t i = 0; i < num_nodes; ++i) {
    std::memcpy(feat + i * kNodeFeatures, node_feat + pruned.kept_ops[i] * kNodeFeatures, sizeof(float) * kNodeFeatures);
    opcode[i] = node_opcode[pruned.kept_ops[i]];
  }
  // An empty vector's data() may be null, which memcpy takes from nowhere, even for 0 bytes.
  if (num_edges > 0) {
    std::memcpy(model.arg_feed_edge_index_data(), pruned.edge_index.data(), sizeof(int64_t) * num_edges * 2);
  }
  if (num_configurable > 0) {
    std::memcpy(model.arg_feed_node_config_ids_data(), pruned.node_config_ids.data(),
                sizeof(int64_t) * num_configurable);
  }
  *model.arg_feed_num_nodes_data() = static_cast<int32_t>(num_nodes);
  *model.arg_feed_num_edges_data() = static_cast<int32_t>(num_edges);
  *model.arg_feed_num_configurable_data() = static_cast<int32_t>(num_configurable);
  *model.arg_feed_num_configs_data() = static_cast<int32_t>(configs);
  const int64_t config_values = num_configurable * kLayoutValues;
  for (int64_t start = 0; start < num_configs; start += configs) {
    float* rows = model.arg_feed_node_config_feat_data();
    for (int64_t i = 0; i < configs; ++i) {
      const int64_t config = start + i < num_configs ? start + i : num_configs - 1;
      std::memcpy(rows + i * configurable_slots * kLayoutValues, node_config_feat + config * config_values,
                  sizeof(float) * config_values);
    }
    if (!model.Run()) {
      return Fail(TPU_GRAPHS_RUN_FAILED, message, message_size, "the compiled program failed: %s",
                  model.error_msg().c_str());
    }
    const int64_t count = num_configs - start < configs ? num_configs - start : configs;
    std::memcpy(scores + start, model.result_fetch_scores_data(), sizeof(float) * count);
  }
  return TPU_GRAPHS_OK;
}

}  // namespace

extern "C" void tpu_graphs_layout_limits(int64_t* max_nodes, int64_t* max_edges, int64_t* max_configurable,
                                         int64_t* prune_hops) {
#define TPU_GRAPHS_LIMITS(Model, hops, nodes, edges, configurable, configs) \
  *max_nodes = nodes, *max_edges = edges, *max_configurable = configurable, *prune_hops = hops;
  TPU_GRAPHS_FOR_EACH_LAYOUT_BUCKET(TPU_GRAPHS_LIMITS)
#undef TPU_GRAPHS_LIMITS
}

extern "C" int tpu_graphs_score_layout(int64_t num_nodes, const float* node_feat, const uint8_t* node_opcode,
                                       int64_t num_edges, const int64_t* edge_index, int64_t num_configurable,
                                       const int64_t* node_config_ids, int64_t num_configs,
                                       const float* node_config_feat, float* scores, char* message,
                                       size_t message_size) {
  if (!CpuCanRun()) {
    return Fail(TPU_GRAPHS_RUN_FAILED, message, message_size,
                "this library was compiled for x86-64-v3 CPUs (AVX2, FMA) and this CPU lacks them; "
                "compile the model with baselines/compile_native.py --cpu=x86-64");
  }
  const int checked = CheckInput(num_nodes, node_feat, node_opcode, num_edges, edge_index, num_configurable,
                                 node_config_ids, num_configs, node_config_feat, scores, message, message_size);
  if (checked != TPU_GRAPHS_OK) return checked;
  try {
    tpu_graphs::PrunedLayout pruned;
    std::string error;
    int64_t max_nodes = 0, max_edges = 0, max_configurable = 0, hops = 0;
    tpu_graphs_layout_limits(&max_nodes, &max_edges, &max_configurable, &hops);
    if (!tpu_graphs::PruneLayout(num_nodes, num_edges, edge_index, num_configurable, node_config_ids,
                                 static_cast<int>(hops), max_nodes, &pruned, &error)) {
      return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "%s", error.c_str());
    }
    const int64_t kept_nodes = static_cast<int64_t>(pruned.kept_ops.size());
    const int64_t kept_edges = static_cast<int64_t>(pruned.edge_index.size() / 2);
    if (!pruned.has_edges) {
      return Fail(TPU_GRAPHS_TOO_LARGE, message, message_size,
                  "the graph pruned to its configurable ops and their %lld-hop neighbourhood keeps %lld ops; this "
                  "model was compiled for at most %lld ops", static_cast<long long>(hops), static_cast<long long>(kept_nodes),
                  static_cast<long long>(max_nodes));
    }
#define TPU_GRAPHS_TRY_BUCKET(Model, hops, nodes, edges, configurable, configs)                                 \
  if (kept_nodes <= nodes && kept_edges <= edges && num_configurable <= configurable) {                         \
    return ScoreInBucket<Model>(configurable, configs, node_feat, node_opcode, pruned, num_configs, node_config_feat, \
                                scores, message, message_size);                                                 \
  }
    TPU_GRAPHS_FOR_EACH_LAYOUT_BUCKET(TPU_GRAPHS_TRY_BUCKET)
#undef TPU_GRAPHS_TRY_BUCKET
    return Fail(TPU_GRAPHS_TOO_LARGE, message, message_size,
                "the graph pruned to its configurable ops and their %lld-hop neighbourhood has %lld ops, %lld edges "
                "and %lld configurable ops; this model was compiled for at most %lld ops, %lld edges and %lld "
                "configurable ops",
                static_cast<long long>(hops), static_cast<long long>(kept_nodes), static_cast<long long>(kept_edges),
                static_cast<long long>(num_configurable), static_cast<long long>(max_nodes),
                static_cast<long long>(max_edges), static_cast<long long>(max_configurable));
  } catch (const std::exception& error) {  // std::bad_alloc of the pruning, or of the program's buffers
    return Fail(TPU_GRAPHS_RUN_FAILED, message, message_size, "the compiled program failed: %s", error.what());
  }
}

extern "C" int tpu_graphs_rank_module(const void* module, size_t module_size, int64_t num_candidates, uint64_t seed,
                                      int64_t top_k, tpu_graphs_module_ranking** ranking, char* message,
                                      size_t message_size) {
  return tpu_graphs::RankModuleWithLibrary(nullptr, &tpu_graphs_score_layout, module, module_size, num_candidates,
                                           seed, top_k, ranking, message, message_size);
}
