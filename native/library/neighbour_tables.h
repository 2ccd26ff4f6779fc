// The neighbour tables of a pruned layout graph padded to a bucket, the form in which the compiled
// layout programs pool along `feeds` (tpu_graphs/export/aot/layout_shapes.py, whose neighbour_tables
// builds the same): per direction, each op's first `slots` edges in edge order, its edge count,
// and for up to `hub_rows` ops with more edges (hubs) a row marking their other edges.
#ifndef TPU_GRAPHS_NATIVE_LIBRARY_NEIGHBOUR_TABLES_H_
#define TPU_GRAPHS_NATIVE_LIBRARY_NEIGHBOUR_TABLES_H_

#include <cstdint>
#include <vector>

namespace tpu_graphs {

struct NeighbourTable {
  std::vector<int32_t> slots;    // [nodes][slots] edge ids; `edges` marks an empty slot
  std::vector<int32_t> degrees;  // [nodes]
  std::vector<float> hubs;       // [hub_rows][edges] 1 at a hub's edges past its slots
  std::vector<int32_t> hub_of;   // [nodes] each op's hub row; `hub_rows` for none
  int64_t num_hubs = 0;          // ops with more than `slots` edges (may exceed hub_rows)
};

// The table of the edges' op in `column` of edge_index ([num_edges][2] rows [consumer, producer]):
// column 0 lists each op's edges from its producers, column 1 its edges to its consumers. The
// arrays are padded to `nodes` ops and `edges` edges. Where num_hubs > hub_rows the table does
// not hold the graph (the caller refuses it).
NeighbourTable BuildNeighbourTable(const std::vector<int64_t>& edge_index, int column, int64_t nodes, int64_t edges,
                                   int64_t slots, int64_t hub_rows);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_LIBRARY_NEIGHBOUR_TABLES_H_
