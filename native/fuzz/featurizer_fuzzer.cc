// Fuzz target: the C++ featurizer behind tpu_graphs_rank_module (native/hlo: parsing
// ModuleTuningData / TuningData / HloModuleProto / HloProto bytes, checking the module, its graphs
// and candidate configs, the C ranking), through RankModuleWithLibrary with a score function that
// stands in for a model: it reads every array of each graph it is given and checks what a model
// library would check, so a featurized graph a library would refuse is a finding too.
//
// Input: u8 kind (bit 0: a tile model's library, else a layout model's; bits 1-2 the call's options,
// library_calls.h's DrawnOptions), u8 num_candidates (taken
// modulo 33: up to 32), u64 seed, u8 top_k, then the module's bytes.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "native/fuzz/fuzz_input.h"
#include "native/fuzz/library_calls.h"
#include "native/library/rank_module.h"
#include "native/library/tpu_graphs_model.h"

namespace {

constexpr int64_t kNodeFeatures = 140, kConfigFeatures = 24, kLayoutValues = 18;

// Aborts unless values[0, count) are finite (reading each, so a short array overreads).
void CheckFinite(const float* values, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) std::abort();
  }
}

void CheckGraph(int64_t num_nodes, const float* node_feat, const uint8_t* node_opcode, int64_t num_edges,
                const int64_t* edge_index, int64_t num_configs, float* scores) {
  if (num_nodes < 1 || num_edges < 0 || num_configs < 1) std::abort();
  CheckFinite(node_feat, num_nodes * kNodeFeatures);
  volatile uint8_t opcode_sum = 0;
  for (int64_t i = 0; i < num_nodes; ++i) opcode_sum = opcode_sum + node_opcode[i];
  for (int64_t i = 0; i < 2 * num_edges; ++i) {
    if (edge_index[i] < 0 || edge_index[i] >= num_nodes) std::abort();
  }
  std::memset(scores, 0, sizeof(float) * num_configs);
}

// A score per config from its features, so rankings differ between configs.
int ScoreTile(int64_t num_nodes, const float* node_feat, const uint8_t* node_opcode, int64_t num_edges,
              const int64_t* edge_index, int64_t num_configs, const float* config_feat, float* scores, char*,
              size_t) {
  CheckGraph(num_nodes, node_feat, node_opcode, num_edges, edge_index, num_configs, scores);
  CheckFinite(config_feat, num_configs * kConfigFeatures);
  for (int64_t c = 0; c < num_configs; ++c) {
    for (int64_t f = 0; f < kConfigFeatures; ++f) scores[c] += config_feat[c * kConfigFeatures + f] * (f + 1);
  }
  return TPU_GRAPHS_OK;
}

int ScoreLayout(int64_t num_nodes, const float* node_feat, const uint8_t* node_opcode, int64_t num_edges,
                const int64_t* edge_index, int64_t num_configurable, const int64_t* node_config_ids,
                int64_t num_configs, const float* node_config_feat, float* scores, char*, size_t) {
  CheckGraph(num_nodes, node_feat, node_opcode, num_edges, edge_index, num_configs, scores);
  if (num_configurable < 1) std::abort();
  std::vector<char> configurable(num_nodes, 0);
  for (int64_t j = 0; j < num_configurable; ++j) {
    const int64_t id = node_config_ids[j];
    if (id < 0 || id >= num_nodes || configurable[id]++) std::abort();
  }
  const int64_t values = num_configurable * kLayoutValues;
  for (int64_t c = 0; c < num_configs; ++c) {
    for (int64_t i = 0; i < values; ++i) {
      const float value = node_config_feat[c * values + i];
      if (!(value >= -1 && value <= 5 && value == std::round(value))) std::abort();
      scores[c] += value * static_cast<float>(i % 7 + 1);
    }
  }
  return TPU_GRAPHS_OK;
}

void CheckRanking(const tpu_graphs_module_ranking& ranking, int64_t top_k) {
  if (ranking.num_graphs < 1) std::abort();
  for (int64_t g = 0; g < ranking.num_graphs; ++g) {
    const tpu_graphs_graph_ranking& graph = ranking.graphs[g];
    if (graph.graph_id == nullptr || graph.collection == nullptr || graph.num_best > top_k ||
        graph.num_best != (graph.num_configs < top_k ? graph.num_configs : top_k)) {
      std::abort();
    }
    for (int64_t i = 0; i < graph.num_best; ++i) {
      const tpu_graphs_ranked_config& best = graph.best[i];
      if (best.config < 0 || best.config >= graph.num_configs || best.num_output_tile > 6 ||
          best.num_kernel_tile > 6 || (i > 0 && best.score < graph.best[i - 1].score)) {
        std::abort();
      }
      for (int64_t k = 0; k < best.num_layouts; ++k) {
        const tpu_graphs_tensor_layout& layout = best.layouts[k];
        if (layout.instruction == nullptr || layout.operand < -1 || layout.num_dims < 0 || layout.num_dims > 6 ||
            layout.change < TPU_GRAPHS_KEPT || layout.change > TPU_GRAPHS_UNKNOWN_CHANGE) {
          std::abort();
        }
        volatile size_t length = std::strlen(layout.instruction);
        (void)length;
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpu_graphs_fuzz::FuzzInput input(data, size);
  const uint8_t kind = input.Draw<uint8_t>();
  const bool tile = kind & 1;
  const int64_t num_candidates = input.Draw<uint8_t>() % 33;
  const uint64_t seed = input.Draw<uint64_t>();
  const int64_t top_k = input.Draw<uint8_t>();
  const std::string_view module = input.Rest();
  tpu_graphs_rank_options storage;
  const tpu_graphs_rank_options* options = tpu_graphs_fuzz::DrawnOptions(kind, storage);
  tpu_graphs_module_ranking* ranking = nullptr;
  char message[256];
  const int status = tpu_graphs::RankModuleWithLibrary(tile ? &ScoreTile : nullptr, tile ? nullptr : &ScoreLayout,
                                                       module.data(), module.size(), num_candidates, seed, top_k,
                                                       options, &ranking, message, sizeof(message));
  if (status == TPU_GRAPHS_OK) {
    if (ranking == nullptr) std::abort();
    CheckRanking(*ranking, top_k);
  } else if (ranking != nullptr || std::strlen(message) == 0) {
    std::abort();  // a refusal writes no ranking and says why
  }
  tpu_graphs_free_module_ranking(ranking);
  return 0;
}
