// The graphs of featurize.py: a program's layout graph and a kernel's tile graph, from tuning data
// (one config per successful run, or none where nothing was measured yet) or from a bare module
// (unlabelled, its own configuration).
#ifndef TPU_GRAPHS_NATIVE_HLO_FEATURIZE_H_
#define TPU_GRAPHS_NATIVE_HLO_FEATURIZE_H_

#include <string>
#include <vector>

#include "native/hlo/graph.h"
#include "native/hlo/hlo_input.h"
#include "native/hlo/module_graph.h"
#include "tpu_graphs/hlo/tuning.pb.h"
#include "xla/service/hlo.pb.h"

namespace tpu_graphs {

inline constexpr char kLayoutCollection[] = "layout:xla:default";
inline constexpr char kTileCollection[] = "tile:xla";

// A graph of `nodes` in `collection` named `graph_id`, without configs yet.
Graph GraphOfModule(const ModuleGraph& nodes, const std::string& graph_id, const std::string& collection);

// The name, own layouts and change kinds (per tensor a config may set: result, operand 0,
// operand 1) of the instructions of `module` at `node_ids`.
std::vector<ConfigurableTensors> ConfigurableTensorsOf(const xla::HloModuleProto& module, const ModuleGraph& nodes,
                                                       const std::vector<int64_t>& node_ids);

// A tensor's minor-to-major order in the module: its layout, or XLA's default (descending) where
// the shape carries none (layout_changes.own_layout).
std::vector<int64_t> OwnLayout(const xla::ShapeProto& shape);

// Node indices of the instructions whose layouts program graphs configure (convolution, dot, reshape).
std::vector<int64_t> ConfigurableNodes(const ModuleGraph& nodes);

// featurize.layout_graph: the program's graph, its configurable nodes (config_index_to_node) and
// one config per successful run; no config where the tuning data has no runs.
Graph LayoutGraphOf(const ModuleTuningData& tuning, const std::string& source);

// featurize.tile_graph: one kernel's graph and one config per successful tile-size run, runtimes
// normalized by the default config's; no config where the tuning data has no runs.
Graph TileGraphOf(const ModuleTuningData& tuning, const std::string& source);

// featurize.tile_graphs: one tile graph per kernel tuned (more than one run), or per kernel where
// none has run.
std::vector<Graph> TileGraphsOf(const TuningData& tuning, const std::string& source);

// featurize.program_graph: an unlabelled layout graph of a whole module, its one config the
// layouts the module carries.
Graph ProgramGraph(const xla::HloModuleProto& module, const std::string& source);

// featurize.kernel_graph: an unlabelled tile graph of one kernel module, one empty tile config.
Graph KernelGraph(const xla::HloModuleProto& kernel, const std::string& source);

// featurize.graphs_from_file: the graphs an input holds; a bare module gives its program graph or,
// with `kernels`, one kernel graph per fusion.
std::vector<Graph> GraphsOfInput(const HloInput& input, bool kernels);

// The source errors name for one kernel of a file: "<file> (fusion '<name>')", or "" (the kernel).
std::string KernelSource(const std::string& file, const xla::HloModuleProto& kernel);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_FEATURIZE_H_
