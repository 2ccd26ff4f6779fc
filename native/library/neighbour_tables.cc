#include "native/library/neighbour_tables.h"

namespace tpu_graphs {

NeighbourTable BuildNeighbourTable(const std::vector<int64_t>& edge_index, int column, int64_t nodes, int64_t edges,
                                   int64_t slots, int64_t hub_rows) {
  NeighbourTable table{std::vector<int32_t>(nodes * slots, static_cast<int32_t>(edges)),
                       std::vector<int32_t>(nodes, 0), std::vector<float>(hub_rows * edges, 0.0f),
                       std::vector<int32_t>(nodes, static_cast<int32_t>(hub_rows))};
  const int64_t num_edges = static_cast<int64_t>(edge_index.size() / 2);
  for (int64_t e = 0; e < num_edges; ++e) {
    const int64_t op = edge_index[2 * e + column];
    const int64_t seen = table.degrees[op]++;
    if (seen < slots) {
      table.slots[op * slots + seen] = static_cast<int32_t>(e);
      continue;
    }
    if (seen == slots) table.hub_of[op] = static_cast<int32_t>(table.num_hubs++);  // its first edge past the slots
    const int64_t hub = table.hub_of[op];
    if (hub < hub_rows) table.hubs[hub * edges + e] = 1.0f;
  }
  for (int32_t& hub : table.hub_of) {
    if (hub >= hub_rows) hub = static_cast<int32_t>(hub_rows);
  }
  return table;
}

}  // namespace tpu_graphs
