// tpu_graphs_rank_module of a model library (tpu_graphs_model.h) over the library's own score
// function. Compiled into the featurizer archive every model library links
// (tpu_graphs/export/aot/native_library.py); its header includes no protobuf, so a library's own
// source (tile_library.cc, layout_library.cc) needs only native/library/.
#ifndef TPU_GRAPHS_NATIVE_LIBRARY_RANK_MODULE_H_
#define TPU_GRAPHS_NATIVE_LIBRARY_RANK_MODULE_H_

#include <cstddef>
#include <cstdint>

#include "native/library/gain_calibration.h"
#include "native/library/tpu_graphs_model.h"

namespace tpu_graphs {

using TileScoreFunction = decltype(&tpu_graphs_score_tile);
using LayoutScoreFunction = decltype(&tpu_graphs_score_layout);

// tpu_graphs_rank_module for a library scoring with `score_tile` (a tile model's library; then
// `score_layout` is null) or `score_layout` (a layout model's). `calibration` (null: none) gives
// each best config its predicted ratio to config 0.
int RankModuleWithLibrary(TileScoreFunction score_tile, LayoutScoreFunction score_layout, const void* module,
                          size_t module_size, int64_t num_candidates, uint64_t seed, int64_t top_k,
                          const tpu_graphs_rank_options* options, tpu_graphs_module_ranking** ranking, char* message,
                          size_t message_size, const GainCalibration* calibration = nullptr);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_LIBRARY_RANK_MODULE_H_
