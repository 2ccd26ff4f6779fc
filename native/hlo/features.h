// The features of the TpuGraphs format, as tpu_graphs/hlo/features.py computes them (documented
// in docs/features.md), from the same proto fields to the same float32 bits: the 140 of one HLO
// instruction, in the release's column order (features.py's NODE_FEATURE_GROUPS); 24 per tile-size
// config; 18 per configurable node of a layout config (minor-to-major orders, -1 unset).
#ifndef TPU_GRAPHS_NATIVE_HLO_FEATURES_H_
#define TPU_GRAPHS_NATIVE_HLO_FEATURES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpu_graphs/hlo/tuning.pb.h"
#include "xla/service/hlo.pb.h"

namespace tpu_graphs {

inline constexpr int kNodeFeatures = 140;

// Writes row[0, 140): the features of `instruction`; `is_root`: whether it is its computation's root.
void NodeFeatures(const xla::HloInstructionProto& instruction, bool is_root, float* row);

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

#endif  // TPU_GRAPHS_NATIVE_HLO_FEATURES_H_
