// The features of one configuration, as tpu_graphs/hlo/features.py computes them: 24 per tile-size
// config, 18 per configurable node of a layout config (minor-to-major orders, -1 unset).
#ifndef TPU_GRAPHS_NATIVE_HLO_CONFIG_FEATURES_H_
#define TPU_GRAPHS_NATIVE_HLO_CONFIG_FEATURES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpu_graphs/hlo/tuning.pb.h"

namespace tpu_graphs {

inline constexpr int kTileConfigFeatures = 24;
inline constexpr int kLayoutConfigFeatures = 18;
inline constexpr int kLayoutMaxTensors = 3;
inline constexpr int kLayoutMaxDims = 6;
// Layout dimensions a config sets per tensor, minor-most first; the rest stay -1 (unconstrained).
inline constexpr int kConfiguredLayoutDims = 2;

// Writes row[0, 24): kernel, output and input bounds, 6 values + sum + product each (0 of none).
void TileConfigFeatures(const std::vector<int64_t>& kernel_bounds, const std::vector<int64_t>& output_bounds,
                        const std::vector<int64_t>& input_bounds, float* row);
void TileConfigFeatures(const TileSizeConfig& config, float* row);

// Writes row[0, 18): tensor t's minor-to-major dims (the first 6) in columns 6t.., -1 elsewhere.
// `tensors`: at most kLayoutMaxTensors orders (result, then operands).
void LayoutConfigFeatures(const std::vector<std::vector<int64_t>>& tensors, float* row);

// Appends the (nodes, 18) features of a LayoutConfig to `features`; false, with the problem, for
// a node that sets more tensors than the 18 features hold.
bool AppendLayoutConfigFeatures(const LayoutConfig& config, std::vector<float>* features, std::string* problem);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_CONFIG_FEATURES_H_
