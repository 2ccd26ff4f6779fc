#include "native/hlo/config_features.h"

#include <string>

#include "native/hlo/exact_integers.h"

namespace tpu_graphs {
namespace {

// 6 leading bounds (zero padded), their sum and product (0 where there are none).
float* Bounds(const std::vector<int64_t>& bounds, float* row) {
  for (size_t i = 0; i < 6; ++i) *row++ = i < bounds.size() ? AsFeature(bounds[i]) : 0.0f;
  *row++ = static_cast<float>(SumAsDouble(bounds));
  *row++ = static_cast<float>(ProductAsDouble(bounds, 0.0));
  return row;
}

}  // namespace

void TileConfigFeatures(const std::vector<int64_t>& kernel_bounds, const std::vector<int64_t>& output_bounds,
                        const std::vector<int64_t>& input_bounds, float* row) {
  Bounds(input_bounds, Bounds(output_bounds, Bounds(kernel_bounds, row)));
}

void TileConfigFeatures(const TileSizeConfig& config, float* row) {
  TileConfigFeatures({config.kernel_bounds().begin(), config.kernel_bounds().end()},
                     {config.output_bounds().begin(), config.output_bounds().end()},
                     {config.input_bounds().begin(), config.input_bounds().end()}, row);
}

void LayoutConfigFeatures(const std::vector<std::vector<int64_t>>& tensors, float* row) {
  for (int t = 0; t < kLayoutMaxTensors; ++t) {
    for (int i = 0; i < kLayoutMaxDims; ++i) {
      const bool set = t < static_cast<int>(tensors.size()) && i < static_cast<int>(tensors[t].size());
      row[t * kLayoutMaxDims + i] = set ? AsFeature(tensors[t][i]) : -1.0f;
    }
  }
}

bool AppendLayoutConfigFeatures(const LayoutConfig& config, std::vector<float>* features, std::string* problem) {
  for (int j = 0; j < config.nodes_size(); ++j) {
    const LayoutConfig::NodeLayoutConfig& node = config.nodes(j);
    if (node.tensors_size() > kLayoutMaxTensors) {
      *problem = "configurable node " + std::to_string(j) + " sets " + std::to_string(node.tensors_size()) +
                 " tensor layouts, at most " + std::to_string(kLayoutMaxTensors) + " fit the format";
      return false;
    }
    std::vector<std::vector<int64_t>> tensors;
    for (const auto& tensor : node.tensors()) tensors.emplace_back(tensor.dims().begin(), tensor.dims().end());
    features->resize(features->size() + kLayoutConfigFeatures);
    LayoutConfigFeatures(tensors, features->data() + features->size() - kLayoutConfigFeatures);
  }
  return true;
}

}  // namespace tpu_graphs
