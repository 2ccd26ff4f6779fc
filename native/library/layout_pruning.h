// A layout graph pruned to its configurable ops and their neighbourhood, on the host side, exactly
// as the exported SavedModel prunes it inside its graph
// (tpu_graphs/models/layout_preprocessing.py, prune_to_configurable): a compiled layout model
// takes graphs of static sizes, and what pruning keeps depends on the graph, so the caller prunes
// before padding to a bucket (tpu_graphs/export/aot/layout_shapes.py).
#ifndef TPU_GRAPHS_NATIVE_LIBRARY_LAYOUT_PRUNING_H_
#define TPU_GRAPHS_NATIVE_LIBRARY_LAYOUT_PRUNING_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tpu_graphs {

struct PrunedLayout {
  std::vector<int64_t> kept_ops;          // the kept ops' ids in the whole graph, ascending
  std::vector<int64_t> edge_index;        // [e'][2] rows [consumer, producer], ids into kept_ops,
                                          // sorted by consumer, then producer
  std::vector<int64_t> node_config_ids;   // the configurable ops, in the caller's order, ids into kept_ops
  bool has_edges = false;                 // false: more ops kept than max_kept_ops, edges not computed
};

// Keeps every op of node_config_ids and the ops within `hops` edges of one (edges taken in both
// directions); kept ops that reach each other through dropped ops only get a direct edge: the
// fewest edges with the reachability among kept ops of the whole graph (its transitive reduction).
//
// edge_index holds num_edges rows [consumer, producer] with ids in [0, num_nodes), and the edges
// form a DAG; node_config_ids distinct ids in [0, num_nodes). The caller checks ids; a cycle is
// refused: returns false with `error` naming it. O(num_edges * kept ops) byte operations; only
// the rows of ops whose consumers are not all visited are held. Where more than max_kept_ops ops
// are kept, stops before the edges (has_edges false): the graph is too large to score anyway, and
// its rows (kept ops x ops bytes) could be gigabytes.
bool PruneLayout(int64_t num_nodes, int64_t num_edges, const int64_t* edge_index, int64_t num_configurable,
                 const int64_t* node_config_ids, int hops, int64_t max_kept_ops, PrunedLayout* pruned,
                 std::string* error);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_LIBRARY_LAYOUT_PRUNING_H_
