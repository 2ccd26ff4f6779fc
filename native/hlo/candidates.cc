#include "native/hlo/candidates.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <unordered_map>

#include "native/hlo/features.h"
#include "native/hlo/featurize.h"
#include "native/hlo/fusion_kernels.h"
#include "native/hlo/hlo_error.h"
#include "native/hlo/layout_changes.h"
#include "native/hlo/module_graph.h"
#include "native/hlo/splitmix64.h"

namespace tpu_graphs {
namespace {

using Order = std::vector<int64_t>;  // a minor-to-major order
using Instructions = std::unordered_map<int64_t, const xla::HloInstructionProto*>;

constexpr int64_t kMaxTileCandidates = 2000;
// Draws of `count` configs each before a sampled set of distinct layout configs stops growing.
constexpr int kLayoutDrawRounds = 20;

bool IsMatrixUnitOp(const std::string& opcode) { return opcode == "convolution" || opcode == "dot"; }

// XLA's default minor-to-major order: descending, the last dimension minor-most.
Order DefaultLayout(int64_t rank) {
  Order order;
  for (int64_t d = rank - 1; d >= 0; --d) order.push_back(d);
  return order;
}

// `order` with `dim` moved minor-most, the other dims keeping their relative order.
Order WithMinorMost(const Order& order, int64_t dim) {
  Order moved = {dim};
  for (const int64_t d : order) {
    if (d != dim) moved.push_back(d);
  }
  return moved;
}

// For matrix-unit ops: the dimension each tensor (result, lhs, rhs) wants minor-most, or none.
std::vector<std::optional<int64_t>> PreferredMinorDims(const xla::HloInstructionProto& instruction,
                                                       const Instructions& by_id) {
  if (instruction.opcode() == "convolution") {
    const auto& n = instruction.convolution_dimension_numbers();
    return {n.output_feature_dimension(), n.input_feature_dimension(), n.kernel_output_feature_dimension()};
  }
  if (instruction.opcode() == "dot") {
    const auto& n = instruction.dot_dimension_numbers();
    const int64_t rhs_rank =
        instruction.operand_ids_size() < 2 ? 0 : by_id.at(instruction.operand_ids(1))->shape().dimensions_size();
    std::optional<int64_t> rhs_free;
    for (int64_t d = 0; d < rhs_rank; ++d) {
      const auto& contracting = n.rhs_contracting_dimensions();
      const auto& batch = n.rhs_batch_dimensions();
      if (std::find(contracting.begin(), contracting.end(), d) == contracting.end() &&
          std::find(batch.begin(), batch.end(), d) == batch.end()) {
        rhs_free = d;
      }
    }
    std::optional<int64_t> lhs_contracting;
    if (n.lhs_contracting_dimensions_size() > 0) lhs_contracting = n.lhs_contracting_dimensions(0);
    return {instruction.shape().dimensions_size() - 1, lhs_contracting, rhs_free};
  }
  return {std::nullopt, std::nullopt, std::nullopt};
}

// candidates.alternative_layouts: the one order beside the default the layout search offers each
// tensor (result, operands), or none.
std::vector<std::optional<Order>> AlternativeLayouts(const xla::HloInstructionProto& instruction,
                                                     const std::vector<const xla::HloInstructionProto*>& tensors,
                                                     const Instructions& by_id) {
  std::vector<int64_t> ranks;
  std::vector<std::optional<Order>> swapped;
  for (const auto* tensor : tensors) {
    const int64_t rank = tensor->shape().dimensions_size();
    ranks.push_back(rank);
    swapped.push_back(rank >= 2 ? std::optional<Order>(WithMinorMost(DefaultLayout(rank), rank - 2)) : std::nullopt);
  }
  if (IsMatrixUnitOp(instruction.opcode())) {
    const auto dims = PreferredMinorDims(instruction, by_id);
    if (instruction.opcode() == "convolution" &&
        instruction.convolution_dimension_numbers().output_batch_dimension() == 0) {
      swapped[0] = std::nullopt;
    }
    for (size_t t = 0; t < tensors.size(); ++t) {
      const std::optional<int64_t> dim = dims[t];
      if (dim && *dim != ranks[t] - 1 && *dim >= 0 && *dim < ranks[t]) {
        swapped[t] = WithMinorMost(DefaultLayout(ranks[t]), *dim);
      }
    }
    return swapped;
  }
  if (instruction.opcode() == "transpose" && tensors.size() == 2) {
    const Order permutation(instruction.dimensions().begin(), instruction.dimensions().end());
    Order sorted = permutation, ascending(ranks[0]);
    std::sort(sorted.begin(), sorted.end());
    std::iota(ascending.begin(), ascending.end(), 0);
    if (sorted != ascending || ranks[1] != ranks[0]) return swapped;  // no permutation: no bitcast to offer
    Order inverse(permutation.size());
    for (size_t i = 0; i < permutation.size(); ++i) inverse[permutation[i]] = static_cast<int64_t>(i);
    const Order default_order = DefaultLayout(ranks[0]);
    Order result_bitcast, operand_bitcast;
    for (const int64_t d : default_order) {
      result_bitcast.push_back(inverse[d]);
      operand_bitcast.push_back(permutation[d]);
    }
    if (result_bitcast != default_order) swapped[0] = result_bitcast;
    if (operand_bitcast != default_order) swapped[1] = operand_bitcast;
  }
  return swapped;
}

// candidates.fixed_layout: the one order of a tensor whose layout a config may not change: its own,
// or the default where that is no order of its dims.
Order FixedLayout(const xla::ShapeProto& shape) {
  const int64_t rank = shape.dimensions_size();
  Order own = OwnLayout(shape), sorted = own, ascending(rank);
  std::sort(sorted.begin(), sorted.end());
  std::iota(ascending.begin(), ascending.end(), 0);
  return sorted == ascending ? own : DefaultLayout(rank);
}

// candidates.sampled_layout_choices: (c, v) distinct choices, c <= count: row 0 every variable
// at its default (choice 0), then uniformly drawn combinations in the order drawn (all of them,
// in product order, where there are at most `count`).
std::vector<std::vector<int64_t>> SampledLayoutChoices(const std::vector<int64_t>& sizes, int64_t count,
                                                       SplitMix64& random) {
  int64_t total = 1;
  for (const int64_t size : sizes) total = total > count ? total : total * size;
  std::vector<std::vector<int64_t>> rows;
  if (total <= count) {
    std::vector<int64_t> row(sizes.size(), 0);
    for (int64_t r = 0; r < total; ++r) {
      rows.push_back(row);
      for (int64_t v = static_cast<int64_t>(sizes.size()) - 1; v >= 0; --v) {
        if (++row[v] < sizes[v]) break;
        row[v] = 0;
      }
    }
    return rows;
  }
  std::set<std::vector<int64_t>> found;
  rows.emplace_back(sizes.size(), 0);
  found.insert(rows.back());
  for (int round = 0; round < kLayoutDrawRounds && static_cast<int64_t>(rows.size()) < count; ++round) {
    for (int64_t r = 0; r < count; ++r) {
      std::vector<int64_t> row;
      for (const int64_t size : sizes) row.push_back(random.Below(size));
      if (found.insert(row).second) rows.push_back(row);
      if (static_cast<int64_t>(rows.size()) == count) return rows;
    }
  }
  return rows;
}

// candidates.tile_sizes: powers of two below `extent` and `extent`, the largest `keep`.
std::vector<int64_t> TileSizes(int64_t extent, size_t keep) {
  std::set<int64_t> sizes = {extent};
  for (int64_t size = 1; size > 0 && size < extent; size *= 2) sizes.insert(size);
  std::vector<int64_t> kept(sizes.begin(), sizes.end());
  if (kept.size() > keep) kept.erase(kept.begin(), kept.end() - keep);
  return kept;
}

struct TilePair {
  std::vector<int64_t> output, kernel;
};

// candidates.tile_candidates: one size per output dim and, for a convolution, its (input, output)
// feature tile: all combinations, or kMaxTileCandidates drawn (distinct, in sorted order).
std::vector<TilePair> TileCandidates(const std::vector<int64_t>& output_dims,
                                     const std::optional<std::pair<int64_t, int64_t>>& convolution_features,
                                     SplitMix64& random) {
  std::vector<std::vector<int64_t>> axes;
  for (const int64_t d : output_dims) axes.push_back(TileSizes(d, 5));
  if (convolution_features) {
    axes.push_back(TileSizes(convolution_features->first, 4));
    axes.push_back(TileSizes(convolution_features->second, 4));
  }
  int64_t total = 1;
  for (const auto& axis : axes) total = total > kMaxTileCandidates ? total : total * static_cast<int64_t>(axis.size());
  std::vector<std::vector<int64_t>> picks;  // an index into each axis
  if (total <= kMaxTileCandidates) {
    std::vector<int64_t> pick(axes.size(), 0);
    for (int64_t r = 0; r < total; ++r) {
      picks.push_back(pick);
      for (int64_t a = static_cast<int64_t>(axes.size()) - 1; a >= 0; --a) {
        if (++pick[a] < static_cast<int64_t>(axes[a].size())) break;
        pick[a] = 0;
      }
    }
  } else {
    std::set<std::vector<int64_t>> drawn;
    for (int64_t i = 0; i < kMaxTileCandidates; ++i) {
      std::vector<int64_t> pick;
      for (const auto& axis : axes) pick.push_back(random.Below(static_cast<int64_t>(axis.size())));
      drawn.insert(pick);
    }
    picks.assign(drawn.begin(), drawn.end());
  }
  std::vector<TilePair> pairs;
  for (const auto& pick : picks) {
    TilePair pair;
    for (size_t a = 0; a < axes.size(); ++a) {
      (a < output_dims.size() ? pair.output : pair.kernel).push_back(axes[a][pick[a]]);
    }
    pairs.push_back(std::move(pair));
  }
  return pairs;
}

// candidates.sampled_indices: `count` of [0, n) drawn without replacement (a partial
// Fisher-Yates shuffle), sorted.
std::vector<int64_t> SampledIndices(int64_t n, int64_t count, SplitMix64& random) {
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  for (int64_t i = 0; i < count; ++i) std::swap(order[i], order[i + random.Below(n - i)]);
  order.resize(count);
  std::sort(order.begin(), order.end());
  return order;
}

// candidates.kernel_extents: the dims of the kernel's (first) result, and for a fused convolution
// of the result's rank its (input, output) feature counts.
std::pair<std::vector<int64_t>, std::optional<std::pair<int64_t, int64_t>>> KernelExtents(
    const xla::HloModuleProto& kernel, const std::string& source) {
  Instructions by_id;
  const xla::HloComputationProto* entry = nullptr;
  for (const xla::HloComputationProto& computation : kernel.computations()) {
    for (const auto& instruction : computation.instructions()) by_id[instruction.id()] = &instruction;
    if (computation.id() == kernel.entry_computation_id()) entry = &computation;
  }
  if (entry == nullptr) throw HloError(source, "has no entry computation");  // CheckModule refused it already
  const xla::ShapeProto& root = by_id.at(entry->root_id())->shape();
  const xla::ShapeProto& shape = root.tuple_shapes_size() > 0 ? root.tuple_shapes(0) : root;
  const xla::HloInstructionProto* matrix = nullptr;
  for (const xla::HloComputationProto& computation : kernel.computations()) {
    if (computation.id() == entry->id()) continue;
    for (const auto& instruction : computation.instructions()) {
      if (matrix == nullptr && IsMatrixUnitOp(instruction.opcode())) matrix = &instruction;
    }
  }
  std::optional<std::pair<int64_t, int64_t>> convolution_features;
  if (matrix != nullptr && matrix->opcode() == "convolution" &&
      matrix->shape().dimensions_size() == shape.dimensions_size() && matrix->operand_ids_size() >= 2) {
    const auto& numbers = matrix->convolution_dimension_numbers();
    const auto& kernel_dims = by_id.at(matrix->operand_ids(1))->shape().dimensions();
    const int64_t input = numbers.kernel_input_feature_dimension(), output = numbers.kernel_output_feature_dimension();
    if (input >= 0 && input < kernel_dims.size() && output >= 0 && output < kernel_dims.size()) {
      convolution_features = std::make_pair(kernel_dims[input], kernel_dims[output]);
    }
  }
  return {std::vector<int64_t>(shape.dimensions().begin(), shape.dimensions().end()), convolution_features};
}

}  // namespace

Graph ProgramCandidates(const xla::HloModuleProto& module, int64_t num_candidates, uint64_t seed,
                        const std::string& given_source, const std::optional<std::vector<int64_t>>& configurable,
                        const WorkLimits& limits, bool change_entry_layouts) {
  if (num_candidates < 1) throw HloError("", "num_candidates must be positive, got " + std::to_string(num_candidates));
  const std::string source = given_source.empty() ? ModuleSource(module) : given_source;
  const ModuleGraph nodes = FeaturizeModule(module, source);
  Instructions by_id;
  for (const auto* instruction : nodes.instructions) by_id[instruction->id()] = instruction;
  const std::vector<int64_t> node_ids = configurable ? *configurable : ConfigurableNodes(nodes);
  for (const int64_t node : node_ids) {
    if (node < 0 || node >= nodes.num_nodes()) {
      throw HloError(source, "config_index_to_node holds " + std::to_string(node) + ", beyond the " +
                                 std::to_string(nodes.num_nodes()) + " nodes");
    }
  }
  if (node_ids.empty()) throw HloError(source, "has no convolution, dot or reshape: no layout to choose");
  const std::unordered_map<int64_t, std::string> kinds = ChangeKinds(module);
  // Per configurable node, per tensor slot: its candidate orders (default first), or none.
  std::vector<std::vector<std::optional<std::vector<Order>>>> slot_choices;
  std::vector<int64_t> sizes;
  for (const int64_t node : node_ids) {
    const xla::HloInstructionProto& instruction = *nodes.instructions[node];
    std::vector<const xla::HloInstructionProto*> tensors = {&instruction};
    for (const int64_t operand_id : instruction.operand_ids()) {
      if (static_cast<int>(tensors.size()) < kLayoutMaxTensors) tensors.push_back(by_id.at(operand_id));
    }
    const auto alternatives = AlternativeLayouts(instruction, tensors, by_id);
    auto& slots = slot_choices.emplace_back();
    for (size_t t = 0; t < tensors.size(); ++t) {
      const xla::ShapeProto& shape = tensors[t]->shape();
      if (shape.dimensions_size() == 0 || shape.tuple_shapes_size() > 0) {
        slots.emplace_back();
        continue;
      }
      const auto kind = kinds.find(tensors[t]->id());
      std::vector<Order> orders = {DefaultLayout(shape.dimensions_size())};
      if (!MayChange(kind == kinds.end() ? kInternalChange : kind->second, change_entry_layouts)) {
        orders = {FixedLayout(shape)};
      } else if (alternatives[t] && *alternatives[t] != orders[0]) {
        orders.push_back(*alternatives[t]);
      }
      sizes.push_back(static_cast<int64_t>(orders.size()));
      slots.emplace_back(std::move(orders));
    }
  }
  int64_t combinations = 1;  // capped at num_candidates, as SampledLayoutChoices counts them
  for (const int64_t size : sizes) combinations = combinations > num_candidates ? combinations : combinations * size;
  CheckConfigBytes(std::min(combinations, num_candidates),
                   static_cast<int64_t>(node_ids.size()) * kLayoutConfigFeatures, limits, source);
  SplitMix64 random(seed);
  const std::vector<std::vector<int64_t>> picked = SampledLayoutChoices(sizes, num_candidates, random);
  Graph graph = GraphOfModule(nodes, module.name(), kLayoutCollection);
  graph.split = "test";
  graph.node_config_ids = node_ids;
  graph.num_configs = static_cast<int64_t>(picked.size());
  graph.config_runtime.assign(graph.num_configs, 0);
  const int64_t nc = static_cast<int64_t>(node_ids.size());
  graph.node_config_feat.assign(graph.num_configs * nc * kLayoutConfigFeatures, -1.0f);
  for (int64_t c = 0; c < graph.num_configs; ++c) {
    int64_t variable = 0;
    for (int64_t j = 0; j < nc; ++j) {
      float* row = graph.node_config_feat.data() + (c * nc + j) * kLayoutConfigFeatures;
      for (size_t slot = 0; slot < slot_choices[j].size(); ++slot) {
        if (!slot_choices[j][slot]) continue;
        const Order& order = (*slot_choices[j][slot])[picked[c][variable++]];
        for (size_t i = 0; i < order.size() && i < kConfiguredLayoutDims; ++i) {
          row[slot * kLayoutMaxDims + i] = static_cast<float>(order[i]);
        }
      }
    }
  }
  graph.configurable = ConfigurableTensorsOf(module, nodes, node_ids);
  ValidateGraph(graph, source);
  return graph;
}

Graph KernelCandidates(const xla::HloModuleProto& kernel, int64_t num_candidates, uint64_t seed,
                       const std::string& given_source, const WorkLimits& limits) {
  if (num_candidates < 1) throw HloError("", "num_candidates must be positive, got " + std::to_string(num_candidates));
  const std::string source = given_source.empty() ? "HLO kernel module " + Quoted(kernel.name()) : given_source;
  Graph graph = GraphOfModule(FeaturizeModule(kernel, source), kernel.name(), kTileCollection);
  SplitMix64 random(seed);
  const auto [output_dims, convolution_features] = KernelExtents(kernel, source);
  std::vector<TilePair> pairs = TileCandidates(output_dims, convolution_features, random);
  if (static_cast<int64_t>(pairs.size()) > num_candidates) {
    std::vector<TilePair> sampled;
    for (const int64_t i : SampledIndices(static_cast<int64_t>(pairs.size()), num_candidates, random)) {
      sampled.push_back(pairs[i]);
    }
    pairs = std::move(sampled);
  }
  CheckConfigBytes(static_cast<int64_t>(pairs.size()), kTileConfigFeatures, limits, source);
  graph.split = "test";
  graph.num_configs = static_cast<int64_t>(pairs.size());
  graph.config_feat.resize(graph.num_configs * kTileConfigFeatures);
  for (int64_t c = 0; c < graph.num_configs; ++c) {
    TileConfigFeatures(pairs[c].kernel, pairs[c].output, {}, graph.config_feat.data() + c * kTileConfigFeatures);
  }
  graph.config_runtime.assign(graph.num_configs, 0);
  graph.config_runtime_normalizers.assign(graph.num_configs, 1);
  ValidateGraph(graph, source);
  return graph;
}

std::vector<Graph> CandidateGraphsOfInput(const HloInput& input, int64_t num_candidates, bool kernels, uint64_t seed,
                                          const WorkLimits& limits, bool change_entry_layouts) {
  CheckCandidateCount(num_candidates, limits);
  if (input.kind == HloInput::Kind::kTuningData) {
    if (!kernels) {
      throw HloError(input.source, "holds kernels' tuning data (TuningData): their candidates are tile sizes "
                                   "(--kernels)");
    }
    std::vector<Graph> graphs;
    for (const ModuleTuningData& tuned : input.tuning_data.modules()) {
      const std::string source =
          input.source.empty() ? "" : input.source + " (module " + Quoted(tuned.module().name()) + ")";
      graphs.push_back(KernelCandidates(tuned.module(), num_candidates, seed, source, limits));
    }
    return graphs;
  }
  const bool tuned = input.kind == HloInput::Kind::kModuleTuningData;
  const xla::HloModuleProto& module = tuned ? input.module_tuning_data.module() : input.module;
  if (kernels) {
    std::vector<Graph> graphs;
    for (const xla::HloModuleProto& kernel : KernelModules(module, input.source)) {
      graphs.push_back(KernelCandidates(kernel, num_candidates, seed, KernelSource(input.source, kernel), limits));
    }
    return graphs;
  }
  std::optional<std::vector<int64_t>> configurable;
  if (tuned) {
    configurable.emplace();
    for (const uint64_t node : input.module_tuning_data.config_index_to_node()) {
      configurable->push_back(static_cast<int64_t>(node));
    }
  }
  return {ProgramCandidates(module, num_candidates, seed, input.source, configurable, limits, change_entry_layouts)};
}

}  // namespace tpu_graphs
