#include "native/hlo/featurize.h"

#include <optional>

#include "native/hlo/features.h"
#include "native/hlo/fusion_kernels.h"
#include "native/hlo/hlo_error.h"
#include "native/hlo/layout_changes.h"

namespace tpu_graphs {
namespace {

// Graphs of programs nobody measured are unlabelled, like the release's test split.
constexpr char kUnlabelledSplit[] = "test";

// The run's runtime in ns, or none where it failed or measured nothing.
std::optional<int64_t> SuccessfulRuntime(const ConfigProfile& run) {
  if (run.error() || !run.has_profile() || run.profile().compute_time_ns() <= 0) return std::nullopt;
  return run.profile().compute_time_ns();
}

std::string OrDefault(const std::string& source, const std::string& fallback) {
  return source.empty() ? fallback : source;
}

}  // namespace

std::vector<int64_t> OwnLayout(const xla::ShapeProto& shape) {
  std::vector<int64_t> order(shape.layout().minor_to_major().begin(), shape.layout().minor_to_major().end());
  if (order.empty()) {
    for (int64_t d = shape.dimensions_size() - 1; d >= 0; --d) order.push_back(d);
  }
  return order;
}

Graph GraphOfModule(const ModuleGraph& nodes, const std::string& graph_id, const std::string& collection) {
  Graph graph;
  graph.graph_id = graph_id;
  graph.collection = collection;
  graph.node_feat = nodes.node_feat;
  graph.node_opcode = nodes.node_opcode;
  graph.edge_index = nodes.edge_index;
  if (!graph.is_tile()) graph.node_splits = nodes.node_splits;
  return graph;
}

std::vector<ConfigurableTensors> ConfigurableTensorsOf(const xla::HloModuleProto& module, const ModuleGraph& nodes,
                                                       const std::vector<int64_t>& node_ids) {
  const std::unordered_map<int64_t, std::string> kinds = ChangeKinds(module);
  std::vector<ConfigurableTensors> configurable;
  for (const int64_t node : node_ids) {
    const xla::HloInstructionProto& instruction = *nodes.instructions[node];
    std::vector<const xla::HloInstructionProto*> tensors = {&instruction};
    for (const int64_t operand_id : instruction.operand_ids()) {
      if (static_cast<int>(tensors.size()) == kLayoutMaxTensors) break;
      tensors.push_back(nodes.instructions[nodes.node_by_instruction_id.at(operand_id)]);
    }
    ConfigurableTensors described{instruction.name(), {}, {}};
    for (const xla::HloInstructionProto* tensor : tensors) {
      described.own_layouts.push_back(OwnLayout(tensor->shape()));
      const auto kind = kinds.find(tensor->id());
      described.changes.push_back(kind == kinds.end() ? kInternalChange : kind->second);
    }
    configurable.push_back(std::move(described));
  }
  return configurable;
}

std::vector<int64_t> ConfigurableNodes(const ModuleGraph& nodes) {
  std::vector<int64_t> node_ids;
  for (int64_t i = 0; i < nodes.num_nodes(); ++i) {
    const std::string& opcode = nodes.instructions[i]->opcode();
    if (opcode == "convolution" || opcode == "dot" || opcode == "reshape") node_ids.push_back(i);
  }
  return node_ids;
}

Graph LayoutGraphOf(const ModuleTuningData& tuning, const std::string& given_source) {
  const std::string source = OrDefault(given_source, "layout tuning data of module " + Quoted(tuning.module().name()));
  const ModuleGraph nodes = FeaturizeModule(tuning.module(), source);
  Graph graph = GraphOfModule(nodes, tuning.module().name(), kLayoutCollection);
  if (tuning.config_index_to_node_size() == 0) {
    throw HloError(source, "config_index_to_node is empty: no configurable node");
  }
  uint64_t largest = 0;
  for (const uint64_t node : tuning.config_index_to_node()) {
    largest = std::max(largest, node);
    graph.node_config_ids.push_back(static_cast<int64_t>(node));
  }
  if (largest >= static_cast<uint64_t>(nodes.num_nodes())) {
    throw HloError(source, "config_index_to_node holds " + std::to_string(largest) + ", beyond the " +
                               std::to_string(nodes.num_nodes()) + " nodes");
  }
  for (int r = 0; r < tuning.runs_size(); ++r) {
    const ConfigProfile& run = tuning.runs(r);
    const std::optional<int64_t> runtime = SuccessfulRuntime(run);
    if (!runtime || !run.module_config().has_layout_config()) continue;
    std::string problem;
    const size_t before = graph.node_config_feat.size();
    if (!AppendLayoutConfigFeatures(run.module_config().layout_config(), &graph.node_config_feat, &problem)) {
      throw HloError(source, "run " + std::to_string(r) + ": " + problem);
    }
    const int64_t configured = static_cast<int64_t>((graph.node_config_feat.size() - before) / kLayoutConfigFeatures);
    if (configured != graph.num_configurable()) {
      throw HloError(source, "run " + std::to_string(r) + " configures " + std::to_string(configured) +
                                 " nodes, config_index_to_node lists " + std::to_string(graph.num_configurable()));
    }
    graph.config_runtime.push_back(*runtime);
  }
  graph.num_configs = static_cast<int64_t>(graph.config_runtime.size());
  const bool measured = tuning.runs_size() > 0;
  if (measured && graph.num_configs == 0) {
    throw HloError(source,
                   "none of the " + std::to_string(tuning.runs_size()) + " runs succeeded with a layout config");
  }
  if (!measured) graph.split = kUnlabelledSplit;
  graph.configurable = ConfigurableTensorsOf(tuning.module(), nodes, graph.node_config_ids);
  ValidateGraph(graph, source, /*no_configs_allowed=*/!measured);
  return graph;
}

Graph TileGraphOf(const ModuleTuningData& tuning, const std::string& given_source) {
  const std::string source = OrDefault(given_source, "tile tuning data of module " + Quoted(tuning.module().name()));
  const ModuleGraph nodes = FeaturizeModule(tuning.module(), source);
  Graph graph = GraphOfModule(nodes, tuning.module().name(), kTileCollection);
  std::optional<int64_t> default_runtime;
  for (int r = 0; r < tuning.runs_size(); ++r) {
    const ConfigProfile& run = tuning.runs(r);
    if (!run.op_config().has_tile_size_config()) {
      throw HloError(source, "run " + std::to_string(r) + " has no tile_size_config");
    }
    const std::optional<int64_t> runtime = SuccessfulRuntime(run);
    if (!runtime || *runtime <= 1) continue;
    if (run.is_default() && !default_runtime) default_runtime = runtime;
    graph.config_feat.resize(graph.config_feat.size() + kTileConfigFeatures);
    TileConfigFeatures(run.op_config().tile_size_config(), graph.config_feat.data() + graph.config_feat.size() -
                                                                kTileConfigFeatures);
    graph.config_runtime.push_back(*runtime);
  }
  graph.num_configs = static_cast<int64_t>(graph.config_runtime.size());
  const bool measured = tuning.runs_size() > 0;
  if (measured && graph.num_configs == 0) {
    throw HloError(source, "none of the " + std::to_string(tuning.runs_size()) + " runs succeeded");
  }
  if (measured && !default_runtime) throw HloError(source, "no successful default run to normalize runtimes by");
  if (!measured) graph.split = kUnlabelledSplit;
  graph.config_runtime_normalizers.assign(graph.num_configs, default_runtime.value_or(1));
  ValidateGraph(graph, source, /*no_configs_allowed=*/!measured);
  return graph;
}

std::vector<Graph> TileGraphsOf(const TuningData& tuning, const std::string& given_source) {
  const std::string source = OrDefault(given_source, "tile tuning data");
  bool any_runs = false;
  for (const ModuleTuningData& kernel : tuning.modules()) any_runs = any_runs || kernel.runs_size() > 0;
  std::vector<Graph> graphs;
  for (const ModuleTuningData& kernel : tuning.modules()) {
    if (!kernel.has_module() || (any_runs && kernel.runs_size() <= 1)) continue;
    graphs.push_back(TileGraphOf(kernel, source + " (module " + Quoted(kernel.module().name()) + ")"));
  }
  if (graphs.empty()) {
    throw HloError(source, "none of the " + std::to_string(tuning.modules_size()) + " modules has more than one run");
  }
  return graphs;
}

Graph ProgramGraph(const xla::HloModuleProto& module, const std::string& given_source) {
  const std::string source = OrDefault(given_source, ModuleSource(module));
  const ModuleGraph nodes = FeaturizeModule(module, source);
  Graph graph = GraphOfModule(nodes, module.name(), kLayoutCollection);
  graph.split = kUnlabelledSplit;
  graph.node_config_ids = ConfigurableNodes(nodes);
  for (const int64_t node : graph.node_config_ids) {
    const xla::HloInstructionProto& instruction = *nodes.instructions[node];
    std::vector<const xla::HloInstructionProto*> tensors = {&instruction};
    for (const int64_t operand_id : instruction.operand_ids()) {
      tensors.push_back(nodes.instructions[nodes.node_by_instruction_id.at(operand_id)]);
    }
    std::vector<std::vector<int64_t>> orders;
    for (size_t t = 0; t < tensors.size() && t < kLayoutMaxTensors; ++t) {
      const auto& order = tensors[t]->shape().layout().minor_to_major();
      orders.emplace_back(order.begin(), order.begin() + std::min(order.size(), kConfiguredLayoutDims));
    }
    graph.node_config_feat.resize(graph.node_config_feat.size() + kLayoutConfigFeatures);
    LayoutConfigFeatures(orders, graph.node_config_feat.data() + graph.node_config_feat.size() - kLayoutConfigFeatures);
  }
  graph.num_configs = 1;
  graph.config_runtime = {0};
  graph.configurable = ConfigurableTensorsOf(module, nodes, graph.node_config_ids);
  ValidateGraph(graph, source);
  return graph;
}

Graph KernelGraph(const xla::HloModuleProto& kernel, const std::string& given_source) {
  const std::string source = OrDefault(given_source, "HLO kernel module " + Quoted(kernel.name()));
  Graph graph = GraphOfModule(FeaturizeModule(kernel, source), kernel.name(), kTileCollection);
  graph.split = kUnlabelledSplit;
  graph.config_feat.resize(kTileConfigFeatures);
  TileConfigFeatures(TileSizeConfig(), graph.config_feat.data());
  graph.num_configs = 1;
  graph.config_runtime = {0};
  graph.config_runtime_normalizers = {1};
  ValidateGraph(graph, source);
  return graph;
}

std::string KernelSource(const std::string& file, const xla::HloModuleProto& kernel) {
  return file.empty() ? "" : file + " (fusion " + Quoted(kernel.name()) + ")";
}

std::vector<Graph> GraphsOfInput(const HloInput& input, bool kernels) {
  switch (input.kind) {
    case HloInput::Kind::kModuleTuningData:
      return {LayoutGraphOf(input.module_tuning_data, input.source)};
    case HloInput::Kind::kTuningData:
      return TileGraphsOf(input.tuning_data, input.source);
    case HloInput::Kind::kModule:
      break;
  }
  if (!kernels) return {ProgramGraph(input.module, input.source)};
  std::vector<Graph> graphs;
  for (const xla::HloModuleProto& kernel : KernelModules(input.module, input.source)) {
    graphs.push_back(KernelGraph(kernel, KernelSource(input.source, kernel)));
  }
  return graphs;
}

}  // namespace tpu_graphs
