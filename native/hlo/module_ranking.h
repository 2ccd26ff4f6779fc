// A module's configs ranked by a cost model, best first, each with what it sets: the question a
// compiler asks (tpu_graphs_rank_module, //native:rank --hlo), answered as baselines/rank.py does.
#ifndef TPU_GRAPHS_NATIVE_HLO_MODULE_RANKING_H_
#define TPU_GRAPHS_NATIVE_HLO_MODULE_RANKING_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "native/hlo/descriptions.h"
#include "native/hlo/graph.h"
#include "native/hlo/hlo_input.h"
#include "native/hlo/work_limits.h"

namespace tpu_graphs {

struct RankedConfig {
  int64_t config;
  float score;  // lower = predicted faster
  ConfigDescription sets;
  // The predicted gain (native/library/gain_calibration.h): runtime over config 0's, and its interval.
  bool has_predicted_ratio = false;
  double predicted_ratio = 0.0, ratio_low = 0.0, ratio_high = 0.0;
};

struct GraphRanking {
  std::string graph_id, collection;
  int64_t num_configs = 0;
  std::vector<RankedConfig> best;  // best first; ties keep config order
  float reference_score = 0.0f;    // config 0's score, what the predicted gain compares with
  int64_t reference_rank = 0;      // config 0's 1-based place, predicted fastest first
  bool calibrated = false;         // the best configs carry predicted ratios (the model has a calibration)
  std::string reference;           // what config 0 is, as baselines/rank.py's reference_name says
};

// Scores of every config of a graph, in config order (lower = predicted faster); throws where
// the model refuses the graph.
using Scorer = std::function<std::vector<float>(const Graph&)>;

// The graphs an input's configs are ranked in: with num_candidates > 0 its module's candidates
// (CandidateGraphsOfInput), else the configs it holds (GraphsOfInput); `kernels`: tile graphs of
// its fusions. Throws HloError for a graph without configs (tuning data nothing was measured on),
// WorkLimitError for candidates beyond `limits`; `change_entry_layouts` as ProgramCandidates.
std::vector<Graph> GraphsToRank(const HloInput& input, bool kernels, int64_t num_candidates, uint64_t seed,
                                const WorkLimits& limits = {}, bool change_entry_layouts = false);

// Sets ranking's reference_score and reference_rank from the scores of every config.
void SetReference(const std::vector<float>& scores, GraphRanking& ranking);

// The `top` best configs of `graph` under `score`.
GraphRanking RankGraph(const Graph& graph, const Scorer& score, int64_t top);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_MODULE_RANKING_H_
