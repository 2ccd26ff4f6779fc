#include "native/hlo/features.h"

#include <cstdint>
#include <string>
#include <vector>

#include "native/hlo/exact_integers.h"

namespace tpu_graphs {
namespace {

// The one-hot element types, in column order (features.ELEMENT_TYPES).
constexpr xla::PrimitiveType kElementTypes[] = {
    xla::PRIMITIVE_TYPE_INVALID, xla::PRED, xla::S8, xla::S16, xla::S32, xla::S64, xla::U8,
    xla::U16, xla::U32, xla::U64, xla::F16, xla::F32, xla::F64, xla::BF16, xla::C64,
    xla::C128, xla::TUPLE, xla::OPAQUE_TYPE, xla::TOKEN};

// Appends features to a row, one group of columns at a time.
class RowWriter {
 public:
  explicit RowWriter(float* row) : row_(row) {}

  void Value(double value) { row_[written_++] = static_cast<float>(value); }
  void Integer(int64_t value) { row_[written_++] = AsFeature(value); }

  // The first `count` values, zero padded.
  template <class Values>
  void Leading(const Values& values, int count) {
    int i = 0;
    for (auto it = values.begin(); it != values.end() && i < count; ++it, ++i) Integer(*it);
    for (; i < count; ++i) Value(0.0);
  }

  // The first `count` values, then the sum and the product of all of them (`empty_product` of none).
  template <class Values>
  void WithSumProduct(const Values& values, int count, double empty_product = 1.0) {
    Leading(values, count);
    Value(SumAsDouble(values));
    Value(ProductAsDouble(values, empty_product));
  }

  // The first `count` flags as 0/1, then how many are true and how many false.
  void Flags(const std::vector<int64_t>& flags, int count) {
    Leading(flags, count);
    int64_t trues = 0;
    for (const int64_t flag : flags) trues += flag;
    Value(static_cast<double>(trues));
    Value(static_cast<double>(static_cast<int64_t>(flags.size()) - trues));
  }

 private:
  float* row_;
  int written_ = 0;
};

// One field of every window dimension (size, stride, ...), as a sequence.
template <class Field>
std::vector<int64_t> WindowField(const xla::Window& window, Field field) {
  std::vector<int64_t> values;
  values.reserve(window.dimensions_size());
  for (const xla::WindowDimension& dimension : window.dimensions()) values.push_back(field(dimension));
  return values;
}

template <class Field>
std::vector<int64_t> SliceField(const xla::HloInstructionProto& instruction, Field field) {
  std::vector<int64_t> values;
  for (const auto& dimension : instruction.slice_dimensions()) values.push_back(field(dimension));
  return values;
}

template <class Field>
std::vector<int64_t> PaddingField(const xla::PaddingConfig& padding, Field field) {
  std::vector<int64_t> values;
  for (const auto& dimension : padding.dimensions()) values.push_back(field(dimension));
  return values;
}

void ConvolutionDimensionNumbers(const xla::ConvolutionDimensionNumbers& numbers, RowWriter& row) {
  row.Integer(numbers.input_batch_dimension());
  row.Integer(numbers.input_feature_dimension());
  row.Leading(numbers.input_spatial_dimensions(), 4);
  row.Integer(numbers.kernel_input_feature_dimension());
  row.Integer(numbers.kernel_output_feature_dimension());
  row.Leading(numbers.kernel_spatial_dimensions(), 4);
  row.Integer(numbers.output_batch_dimension());
  row.Integer(numbers.output_feature_dimension());
}

// 6 leading bounds (zero padded), their sum and product (0 where there are none).
float* Bounds(const std::vector<int64_t>& bounds, float* row) {
  for (size_t i = 0; i < 6; ++i) *row++ = i < bounds.size() ? AsFeature(bounds[i]) : 0.0f;
  *row++ = static_cast<float>(SumAsDouble(bounds));
  *row++ = static_cast<float>(ProductAsDouble(bounds, 0.0));
  return row;
}

}  // namespace

void NodeFeatures(const xla::HloInstructionProto& instruction, bool is_root, float* feature_row) {
  RowWriter row(feature_row);
  const xla::ShapeProto& shape = instruction.shape();
  row.Value(is_root ? 1.0 : 0.0);
  row.Value(0.0);  // element_size_in_bits: the release's extractor no longer fills it
  for (const xla::PrimitiveType type : kElementTypes) row.Value(shape.element_type() == type ? 1.0 : 0.0);
  row.WithSumProduct(shape.dimensions(), 6);
  row.Integer(shape.tuple_shapes_size());
  row.Integer(instruction.parameter_number());
  row.Leading(instruction.dimensions(), 6);
  const xla::Window& window = instruction.window();
  row.WithSumProduct(WindowField(window, [](const auto& d) { return d.size(); }), 6);
  row.WithSumProduct(WindowField(window, [](const auto& d) { return d.stride(); }), 6);
  row.WithSumProduct(WindowField(window, [](const auto& d) { return d.padding_low(); }), 6);
  row.WithSumProduct(WindowField(window, [](const auto& d) { return d.padding_high(); }), 6);
  row.WithSumProduct(WindowField(window, [](const auto& d) { return d.window_dilation(); }), 6);
  row.WithSumProduct(WindowField(window, [](const auto& d) { return d.base_dilation(); }), 6);
  row.Flags(WindowField(window, [](const auto& d) { return static_cast<int64_t>(d.window_reversal()); }), 6);
  ConvolutionDimensionNumbers(instruction.convolution_dimension_numbers(), row);
  row.Integer(instruction.feature_group_count());
  row.Integer(instruction.batch_group_count());
  row.WithSumProduct(SliceField(instruction, [](const auto& d) { return d.start(); }), 2);
  row.WithSumProduct(SliceField(instruction, [](const auto& d) { return d.stride(); }), 2);
  row.WithSumProduct(SliceField(instruction, [](const auto& d) { return d.limit(); }), 2);
  row.WithSumProduct(instruction.dynamic_slice_sizes(), 2);
  const xla::PaddingConfig& padding = instruction.padding_config();
  row.WithSumProduct(PaddingField(padding, [](const auto& d) { return d.edge_padding_low(); }), 2);
  row.WithSumProduct(PaddingField(padding, [](const auto& d) { return d.edge_padding_high(); }), 2);
  row.Value(instruction.is_stable() ? 1.0 : 0.0);
  row.Leading(shape.layout().minor_to_major(), 6);
}

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
