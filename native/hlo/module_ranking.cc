#include "native/hlo/module_ranking.h"

#include <algorithm>
#include <numeric>

#include "native/hlo/candidates.h"
#include "native/hlo/featurize.h"
#include "native/hlo/hlo_error.h"

namespace tpu_graphs {

std::vector<Graph> GraphsToRank(const HloInput& input, bool kernels, int64_t num_candidates, uint64_t seed,
                                const WorkLimits& limits, bool change_entry_layouts) {
  if (num_candidates > 0) {
    return CandidateGraphsOfInput(input, num_candidates, kernels, seed, limits, change_entry_layouts);
  }
  std::vector<Graph> graphs = GraphsOfInput(input, kernels);
  for (const Graph& graph : graphs) {
    if (graph.num_configs == 0) {
      throw HloError(input.source, graph.graph_id + " has no configs to rank: nothing was measured yet (tuning data "
                                   "without runs); rank its candidates instead (--num_candidates)");
    }
  }
  return graphs;
}

void SetReference(const std::vector<float>& scores, GraphRanking& ranking) {
  if (scores.empty()) return;
  ranking.reference_score = scores[0];  // stable order: config 0 comes first among its ties
  ranking.reference_rank = 1 + std::count_if(scores.begin(), scores.end(), [&](float s) { return s < scores[0]; });
}

GraphRanking RankGraph(const Graph& graph, const Scorer& score, int64_t top) {
  const std::vector<float> scores = score(graph);
  std::vector<int64_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return scores[a] < scores[b]; });
  order.resize(std::min<size_t>(order.size(), static_cast<size_t>(std::max<int64_t>(top, 0))));
  GraphRanking ranking{graph.graph_id, graph.collection, static_cast<int64_t>(scores.size()), {}};
  for (const int64_t config : order) ranking.best.push_back({config, scores[config], Describe(graph, config)});
  SetReference(scores, ranking);
  return ranking;
}

}  // namespace tpu_graphs
