#include "native/library/rank_module.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "native/hlo/descriptions.h"
#include "native/hlo/hlo_error.h"
#include "native/hlo/hlo_input.h"
#include "native/hlo/module_origin.h"
#include "native/hlo/module_ranking.h"
#include "native/hlo/module_writer.h"
#include "native/hlo/work_limits.h"
#include "native/library/library_checks.h"

namespace tpu_graphs {
namespace {

// A refusal of the library's score function: its status and message.
struct ScoreRefused {
  int status;
  std::string message;
};

constexpr tpu_graphs_rank_options kDefaultRankOptions = TPU_GRAPHS_DEFAULT_RANK_OPTIONS;
static_assert(TPU_GRAPHS_UNKNOWN_CHANGE + 1 == sizeof(kLayoutChangeKinds) / sizeof(kLayoutChangeKinds[0]),
              "every kind of change has a tpu_graphs_layout_change");
static_assert(kDefaultRankOptions.max_candidates == kDefaultMaxCandidates &&
                  kDefaultRankOptions.max_module_bytes == kDefaultMaxModuleBytes &&
                  kDefaultRankOptions.max_config_bytes == kDefaultMaxConfigBytes,
              "the C interface's default limits are work_limits.h's");

// Whether every limit of a call's options is at least 1, as the header requires.
bool LimitsAreValid(const tpu_graphs_rank_options& options) {
  return options.max_candidates >= 1 && options.max_module_bytes >= 1 && options.max_config_bytes >= 1;
}

// The message of a refused call (library_checks.h), from a string.
int Fail(int status, const std::string& text, char* message, size_t message_size) {
  return tpu_graphs_library::Fail(status, message, message_size, "%s", text.c_str());
}

// The C ranking and everything it points to, freed as one.
struct OwnedRanking : tpu_graphs_module_ranking {
  std::vector<tpu_graphs_graph_ranking> graph_rankings;
  std::deque<std::vector<tpu_graphs_ranked_config>> configs;
  std::deque<std::vector<tpu_graphs_tensor_layout>> layouts;
  std::deque<std::string> strings;

  const char* Keep(const std::string& text) { return strings.emplace_back(text).c_str(); }
};

tpu_graphs_ranked_config RankedConfigOf(const RankedConfig& ranked, OwnedRanking& owner) {
  tpu_graphs_ranked_config config{};
  config.config = ranked.config;
  config.score = ranked.score;
  auto& layouts = owner.layouts.emplace_back();
  for (const InstructionLayouts& instruction : ranked.sets.layouts) {
    const char* name = owner.Keep(instruction.instruction);
    for (const TensorLayout& tensor : instruction.tensors) {
      const auto kind = std::find(std::begin(kLayoutChangeKinds), std::end(kLayoutChangeKinds), tensor.change);
      tpu_graphs_tensor_layout layout{name, tensor.tensor - 1, static_cast<int32_t>(tensor.dims.size()), {},
                                      static_cast<int32_t>(kind - std::begin(kLayoutChangeKinds))};
      for (size_t i = 0; i < tensor.dims.size() && i < 6; ++i) layout.dims[i] = tensor.dims[i];
      layouts.push_back(layout);
    }
  }
  config.num_layouts = static_cast<int64_t>(layouts.size());
  config.layouts = layouts.data();
  config.num_output_tile = static_cast<int32_t>(ranked.sets.output_tile.size());
  for (int i = 0; i < config.num_output_tile; ++i) config.output_tile[i] = ranked.sets.output_tile[i];
  config.num_kernel_tile = static_cast<int32_t>(ranked.sets.kernel_tile.size());
  for (int i = 0; i < config.num_kernel_tile; ++i) config.kernel_tile[i] = ranked.sets.kernel_tile[i];
  return config;
}

// Each best config's predicted ratio to config 0 (gain_calibration.h), where the model has a calibration.
void AddPredictedGain(const GraphRanking& ranked, const GainCalibration* calibration,
                      std::vector<tpu_graphs_ranked_config>& configs) {
  if (calibration == nullptr || calibration->fitted == 0) return;
  for (tpu_graphs_ranked_config& config : configs) {
    const PredictedRatio ratio = PredictRatio(*calibration, config.score, ranked.reference_score);
    config.has_predicted_ratio = 1;
    config.predicted_ratio = ratio.ratio;
    config.ratio_low = ratio.low;
    config.ratio_high = ratio.high;
  }
}

Scorer LibraryScorer(TileScoreFunction score_tile, LayoutScoreFunction score_layout) {
  return [score_tile, score_layout](const Graph& graph) {
    std::vector<float> scores(graph.num_configs);
    char message[1024] = "";
    int status;
    if (score_tile != nullptr) {
      if (!graph.is_tile()) throw HloError("", graph.graph_id + " is a " + graph.collection + " graph; this library's "
                                               "model scores tile graphs");
      status = score_tile(graph.num_nodes(), graph.node_feat.data(), graph.node_opcode.data(), graph.num_edges(),
                          graph.edge_index.data(), graph.num_configs, graph.config_feat.data(), scores.data(), message,
                          sizeof(message));
    } else {
      if (graph.is_tile()) throw HloError("", graph.graph_id + " is a " + graph.collection + " graph; this library's "
                                              "model scores layout graphs");
      status = score_layout(graph.num_nodes(), graph.node_feat.data(), graph.node_opcode.data(), graph.num_edges(),
                            graph.edge_index.data(), graph.num_configurable(), graph.node_config_ids.data(),
                            graph.num_configs, graph.node_config_feat.data(), scores.data(), message, sizeof(message));
    }
    if (status != TPU_GRAPHS_OK) throw ScoreRefused{status, graph.graph_id + ": " + message};
    return scores;
  };
}

}  // namespace

int RankModuleWithLibrary(TileScoreFunction score_tile, LayoutScoreFunction score_layout, const void* module,
                          size_t module_size, int64_t num_candidates, uint64_t seed, int64_t top_k,
                          const tpu_graphs_rank_options* options, tpu_graphs_module_ranking** ranking, char* message,
                          size_t message_size, const GainCalibration* calibration) {
  if (ranking == nullptr) return Fail(TPU_GRAPHS_INVALID_INPUT, "ranking is null", message, message_size);
  *ranking = nullptr;
  if (module == nullptr && module_size > 0) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, "a null module with a positive size", message, message_size);
  }
  if (num_candidates < 0 || top_k < 1) {
    return Fail(TPU_GRAPHS_INVALID_INPUT,
                "num_candidates (" + std::to_string(num_candidates) + ") must be >= 0 and top_k (" +
                    std::to_string(top_k) + ") >= 1",
                message, message_size);
  }
  const tpu_graphs_rank_options given = options != nullptr ? *options : kDefaultRankOptions;
  if (!LimitsAreValid(given)) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, "every limit of the options must be at least 1", message, message_size);
  }
  const WorkLimits limits{given.max_candidates, given.max_module_bytes, given.max_config_bytes};
  try {
    CheckCandidateCount(num_candidates, limits);
    CheckModuleBytes(static_cast<int64_t>(std::min<size_t>(module_size, INT64_MAX)), limits, "the module");
    const HloInput input = ParseHloInput({static_cast<const char*>(module), module_size}, "");
    const Scorer score = LibraryScorer(score_tile, score_layout);
    auto owner = std::make_unique<OwnedRanking>();
    for (const Graph& graph : GraphsToRank(input, score_tile != nullptr, num_candidates, seed, limits,
                                           given.change_entry_layouts != 0)) {
      const GraphRanking ranked = RankGraph(graph, score, top_k);
      auto& configs = owner->configs.emplace_back();
      for (const RankedConfig& config : ranked.best) configs.push_back(RankedConfigOf(config, *owner));
      AddPredictedGain(ranked, calibration, configs);
      owner->graph_rankings.push_back({owner->Keep(ranked.graph_id), owner->Keep(ranked.collection),
                                       ranked.num_configs, static_cast<int64_t>(configs.size()), configs.data(),
                                       ranked.reference_rank});
    }
    owner->num_graphs = static_cast<int64_t>(owner->graph_rankings.size());
    owner->graphs = owner->graph_rankings.data();
    const std::string note = BackendNote(input);
    owner->backend_note = note.empty() ? nullptr : owner->Keep(note);
    *ranking = owner.release();
    return TPU_GRAPHS_OK;
  } catch (const ScoreRefused& refused) {
    return Fail(refused.status, refused.message, message, message_size);
  } catch (const WorkLimitError& error) {
    return Fail(TPU_GRAPHS_TOO_LARGE, error.what(), message, message_size);
  } catch (const HloError& error) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, error.what(), message, message_size);
  } catch (const std::exception& error) {  // std::bad_alloc
    return Fail(TPU_GRAPHS_RUN_FAILED, std::string("ranking failed: ") + error.what(), message, message_size);
  }
}

}  // namespace tpu_graphs

extern "C" void tpu_graphs_free_module_ranking(tpu_graphs_module_ranking* ranking) {
  delete static_cast<tpu_graphs::OwnedRanking*>(ranking);
}

extern "C" int tpu_graphs_apply_layout_config(const void* module, size_t module_size, int64_t num_candidates,
                                              uint64_t seed, int64_t config, const tpu_graphs_rank_options* options,
                                              void** written, size_t* written_size, int64_t* num_copies,
                                              char* message, size_t message_size) {
  using tpu_graphs::Fail;
  if (written == nullptr || written_size == nullptr) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, "written or written_size is null", message, message_size);
  }
  *written = nullptr;
  *written_size = 0;
  if (module == nullptr && module_size > 0) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, "a null module with a positive size", message, message_size);
  }
  if (num_candidates < 1 || config < 0) {
    return Fail(TPU_GRAPHS_INVALID_INPUT,
                "num_candidates (" + std::to_string(num_candidates) + ") must be >= 1 and config (" +
                    std::to_string(config) + ") >= 0: the module written back applies one of the candidates drawn",
                message, message_size);
  }
  const tpu_graphs_rank_options given = options != nullptr ? *options : tpu_graphs::kDefaultRankOptions;
  if (!tpu_graphs::LimitsAreValid(given)) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, "every limit of the options must be at least 1", message, message_size);
  }
  const tpu_graphs::WorkLimits limits{given.max_candidates, given.max_module_bytes, given.max_config_bytes};
  try {
    tpu_graphs::CheckCandidateCount(num_candidates, limits);
    tpu_graphs::CheckModuleBytes(static_cast<int64_t>(std::min<size_t>(module_size, INT64_MAX)), limits, "the module");
    const tpu_graphs::HloInput input = tpu_graphs::ParseHloInput({static_cast<const char*>(module), module_size}, "");
    const tpu_graphs::WrittenModule applied =
        tpu_graphs::WriteModule(input, num_candidates, seed, config, limits, given.change_entry_layouts != 0);
    void* bytes = std::malloc(std::max<size_t>(applied.bytes.size(), 1));
    if (bytes == nullptr) return Fail(TPU_GRAPHS_RUN_FAILED, "writing the module failed: out of memory", message,
                                      message_size);
    std::memcpy(bytes, applied.bytes.data(), applied.bytes.size());
    *written = bytes;
    *written_size = applied.bytes.size();
    if (num_copies != nullptr) *num_copies = applied.num_copies;
    return TPU_GRAPHS_OK;
  } catch (const tpu_graphs::WorkLimitError& error) {
    return Fail(TPU_GRAPHS_TOO_LARGE, error.what(), message, message_size);
  } catch (const tpu_graphs::HloError& error) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, error.what(), message, message_size);
  } catch (const std::exception& error) {  // std::bad_alloc
    return Fail(TPU_GRAPHS_RUN_FAILED, std::string("writing the module failed: ") + error.what(), message,
                message_size);
  }
}

extern "C" void tpu_graphs_free_written_module(void* written) { std::free(written); }
