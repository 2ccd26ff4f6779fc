// What //native:rank prints and writes, as baselines/rank.py does: per graph a line of its best
// configs, then one line per config saying what it sets; the JSON of rank.py --json.
#ifndef TPU_GRAPHS_NATIVE_TOOLS_RANKING_OUTPUT_H_
#define TPU_GRAPHS_NATIVE_TOOLS_RANKING_OUTPUT_H_

#include <string>
#include <vector>

#include "native/hlo/module_ranking.h"

namespace tpu_graphs {

// "<collection>:<id>: <n> configs, best first: 3 (0.1), 7 (0.2)\n", "  config 0, <reference>, ranks
// <r> of <n>\n" (and, without a calibration, why there is no predicted ratio) and per best config
// "  config 3 (0.1): moves 2 instructions: convolution.4 result [0, 1] operand 1 [2, 3]; ...; predicted
// 0.83x config 0's runtime (80% interval 0.75-0.92)\n", then
// per group of best configs that set the same and score the same (one config the input holds more
// than once) "  configs 0, 10 set the same and score the same: one config, listed 2 times\n".
std::string RankingText(const GraphRanking& ranking);

// [{"id", "collection", "num_configs", ("layouts_meaning",) ("backend_note",) "best": [{"config",
// "score", "output_tile", "kernel_tile"} or {"config", "score", "layouts": {name: {role: dims}}}, each
// with "predicted_ratio", "ratio_low", "ratio_high" where calibrated]}], "reference", "reference_rank"
// and, without a calibration, "predicted_ratio_note" per graph;
// "backend_note" where `backend_note` is not empty (module_origin.h).
std::string RankingJson(const std::vector<GraphRanking>& rankings, const std::string& backend_note);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_TOOLS_RANKING_OUTPUT_H_
