#include "native/hlo/module_writer.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "native/hlo/candidates.h"
#include "native/hlo/features.h"
#include "native/hlo/featurize.h"
#include "native/hlo/hlo_error.h"

namespace tpu_graphs {

const char kTileSizesNotWritten[] =
    "a module carries no tile sizes (a TPU fusion's tiling lives in its backend config, which XLA's open source does "
    "not define): --write_module writes layout configs; set the output tile printed for each fusion yourself";

const char kWriteModuleNeedsCandidates[] =
    "--write_module applies one of the candidate configs drawn: give --num_candidates N (a module's own config is "
    "the module as it is)";
const char kWriteModuleNeedsAModule[] =
    "--write_module writes an HLO module back: the input must be one (.pb), not an npz file";

std::string WrittenLine(const std::string& path, int64_t config, int64_t num_copies) {
  return "wrote " + path + ": candidate " + std::to_string(config) + " applied, " + std::to_string(num_copies) +
         (num_copies == 1 ? " copy" : " copies") +
         " inserted for operands read in another layout than their producer's";
}

namespace {

using Order = std::vector<int64_t>;

// The order a tensor's listed dims are completed from: its own layout, or the default where that
// is no permutation of its dims (module_writer._current_order).
Order CurrentOrder(const xla::ShapeProto& shape) {
  Order own = OwnLayout(shape);
  Order sorted = own;
  std::sort(sorted.begin(), sorted.end());
  bool permutation = static_cast<int64_t>(sorted.size()) == shape.dimensions_size();
  for (size_t d = 0; permutation && d < sorted.size(); ++d) permutation = sorted[d] == static_cast<int64_t>(d);
  if (permutation) return own;
  Order fallback;
  for (int64_t d = shape.dimensions_size() - 1; d >= 0; --d) fallback.push_back(d);
  return fallback;
}

void SetOrder(xla::ShapeProto& shape, const Order& order) {
  auto* minor_to_major = shape.mutable_layout()->mutable_minor_to_major();
  minor_to_major->Clear();
  for (const int64_t d : order) minor_to_major->Add(d);
}

std::string UniqueName(const std::string& base, std::unordered_set<std::string>& taken) {
  std::string name = base + ".copy";
  for (int64_t n = 1; taken.count(name) > 0; ++n) name = base + ".copy." + std::to_string(n);
  taken.insert(name);
  return name;
}

template <class Message>
std::string SerializedDeterministically(const Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

}  // namespace

Order FullOrder(const Order& listed, const Order& current) {
  Order order = listed;
  for (const int64_t d : current) {
    if (std::find(listed.begin(), listed.end(), d) == listed.end()) order.push_back(d);
  }
  return order;
}

xla::HloModuleProto ApplyLayoutConfig(const xla::HloModuleProto& module, const std::vector<int64_t>& node_config_ids,
                                      const float* node_config_feat, const std::string& source, int64_t* num_copies) {
  xla::HloModuleProto written = module;
  std::vector<xla::HloInstructionProto*> located;
  std::unordered_map<int64_t, xla::HloInstructionProto*> by_id;
  std::unordered_set<std::string> taken;
  int64_t largest_id = -1;
  for (xla::HloComputationProto& computation : *written.mutable_computations()) {
    for (xla::HloInstructionProto& instruction : *computation.mutable_instructions()) {
      located.push_back(&instruction);
      by_id[instruction.id()] = &instruction;
      taken.insert(instruction.name());
      largest_id = std::max(largest_id, instruction.id());
    }
  }
  constexpr int kSlots = kLayoutMaxTensors, kDims = kLayoutMaxDims;
  // The dims a config lists for tensor `slot` of configurable node j (empty: it sets none).
  auto listed_dims = [&](size_t j, int slot, const xla::ShapeProto& shape) {
    Order dims;
    for (int d = 0; d < kDims; ++d) {
      const float value = node_config_feat[(j * kSlots + slot) * kDims + d];
      if (value >= 0) dims.push_back(static_cast<int64_t>(value));
    }
    std::set<int64_t> distinct(dims.begin(), dims.end());
    if (distinct.size() != dims.size() ||
        std::any_of(dims.begin(), dims.end(), [&](int64_t d) { return d >= shape.dimensions_size(); })) {
      throw HloError(source, "the config sets a layout value that is no dim of its tensor (configurable node " +
                                 std::to_string(node_config_ids[j]) + ", tensor " + std::to_string(slot) + ", rank " +
                                 std::to_string(shape.dimensions_size()) + ")");
    }
    return dims;
  };
  std::vector<xla::HloInstructionProto*> consumers;
  for (const int64_t node : node_config_ids) {
    if (node < 0 || node >= static_cast<int64_t>(located.size())) {
      throw HloError(source, "configurable node " + std::to_string(node) + " is outside the " +
                                 std::to_string(located.size()) + " instructions");
    }
    consumers.push_back(located[node]);
  }
  for (size_t j = 0; j < consumers.size(); ++j) {  // results first: operands read them in their new layouts
    const Order dims = listed_dims(j, 0, consumers[j]->shape());
    if (!dims.empty()) SetOrder(*consumers[j]->mutable_shape(), FullOrder(dims, CurrentOrder(consumers[j]->shape())));
  }
  std::map<std::pair<int64_t, Order>, int64_t> copy_ids;                  // (producer id, order) -> copy id
  std::unordered_map<int64_t, std::vector<xla::HloInstructionProto>> after;  // producer id -> its copies
  for (size_t j = 0; j < consumers.size(); ++j) {
    xla::HloInstructionProto& instruction = *consumers[j];
    for (int slot = 1; slot < std::min(kSlots, instruction.operand_ids_size() + 1); ++slot) {
      const xla::HloInstructionProto& producer = *by_id.at(instruction.operand_ids(slot - 1));
      const Order dims = listed_dims(j, slot, producer.shape());
      if (dims.empty()) continue;
      const Order order = FullOrder(dims, CurrentOrder(producer.shape()));
      const auto& own = producer.shape().layout().minor_to_major();
      if (Order(own.begin(), own.end()) == order) continue;
      auto [copy, made] = copy_ids.try_emplace({producer.id(), order}, 0);
      if (made) {
        if (largest_id == std::numeric_limits<int64_t>::max()) {
          throw HloError(source,
                         "instruction id " + std::to_string(largest_id) + " is taken: no id is left for a copy");
        }
        xla::HloInstructionProto& added = after[producer.id()].emplace_back();
        added.set_name(UniqueName(producer.name(), taken));
        added.set_opcode("copy");
        *added.mutable_shape() = producer.shape();
        SetOrder(*added.mutable_shape(), order);
        added.set_id(++largest_id);
        added.add_operand_ids(producer.id());
        copy->second = added.id();
      }
      instruction.set_operand_ids(slot - 1, copy->second);
    }
  }
  *num_copies = static_cast<int64_t>(copy_ids.size());
  if (after.empty()) return written;
  for (xla::HloComputationProto& computation : *written.mutable_computations()) {
    google::protobuf::RepeatedPtrField<xla::HloInstructionProto> ordered;
    for (xla::HloInstructionProto& instruction : *computation.mutable_instructions()) {
      const auto copies = after.find(instruction.id());
      *ordered.Add() = std::move(instruction);
      if (copies == after.end()) continue;
      for (xla::HloInstructionProto& copy : copies->second) *ordered.Add() = std::move(copy);
    }
    computation.mutable_instructions()->Swap(&ordered);
  }
  return written;
}

WrittenModule WriteModule(const HloInput& input, int64_t num_candidates, uint64_t seed, int64_t config,
                          const WorkLimits& limits, bool change_entry_layouts) {
  if (input.kind == HloInput::Kind::kTuningData) {
    throw HloError(input.source, std::string("holds kernels' tuning data (TuningData): ") + kTileSizesNotWritten);
  }
  const std::vector<Graph> graphs =
      CandidateGraphsOfInput(input, num_candidates, /*kernels=*/false, seed, limits, change_entry_layouts);
  const Graph& graph = graphs.at(0);
  if (config < 0 || config >= graph.num_configs) {
    throw HloError(input.source, "config " + std::to_string(config) + " is not among the " +
                                     std::to_string(graph.num_configs) + " candidates drawn (num_candidates " +
                                     std::to_string(num_candidates) + ", seed " + std::to_string(seed) + ")");
  }
  const bool tuned = input.kind == HloInput::Kind::kModuleTuningData;
  const xla::HloModuleProto& module = tuned ? input.module_tuning_data.module() : input.module;
  const size_t row = static_cast<size_t>(config) * graph.node_config_ids.size() * kLayoutMaxTensors * kLayoutMaxDims;
  WrittenModule written;
  xla::HloModuleProto applied = ApplyLayoutConfig(module, graph.node_config_ids, graph.node_config_feat.data() + row,
                                                  input.source, &written.num_copies);
  if (input.hlo_proto) {
    xla::HloProto wrapped;
    *wrapped.mutable_hlo_module() = std::move(applied);
    written.bytes = SerializedDeterministically(wrapped);
  } else {
    written.bytes = SerializedDeterministically(applied);
  }
  return written;
}

}  // namespace tpu_graphs
