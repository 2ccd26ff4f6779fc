// A featurized graph's arrays as a TpuGraphs npz file holds them: what //native:featurize writes
// and what //native:rank hands a SavedModel.
#ifndef TPU_GRAPHS_NATIVE_TOOLS_GRAPH_ARRAYS_H_
#define TPU_GRAPHS_NATIVE_TOOLS_GRAPH_ARRAYS_H_

#include <string>
#include <utility>
#include <vector>

#include "native/hlo/graph.h"
#include "native/npz/npz.h"

namespace tpu_graphs {

// (name, array) in the order and dtypes of the format (graphs.TILE_ARRAYS, graphs.LAYOUT_ARRAYS).
std::vector<std::pair<std::string, Array>> GraphArrays(const Graph& graph);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_TOOLS_GRAPH_ARRAYS_H_
