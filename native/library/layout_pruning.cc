#include "native/library/layout_pruning.h"

#include <algorithm>
#include <deque>
#include <utility>

namespace tpu_graphs {
namespace {

// Edges grouped by one end (compressed sparse rows): starts[v]..starts[v + 1] index the other
// ends of v's edges in `others`, in edge order.
struct GroupedEdges {
  std::vector<int64_t> starts, others;
};

GroupedEdges GroupEdges(int64_t num_nodes, int64_t num_edges, const int64_t* edge_index, int by_column) {
  GroupedEdges grouped{std::vector<int64_t>(num_nodes + 1, 0), std::vector<int64_t>(num_edges)};
  for (int64_t e = 0; e < num_edges; ++e) ++grouped.starts[edge_index[2 * e + by_column] + 1];
  for (int64_t v = 0; v < num_nodes; ++v) grouped.starts[v + 1] += grouped.starts[v];
  std::vector<int64_t> next(grouped.starts.begin(), grouped.starts.end() - 1);
  for (int64_t e = 0; e < num_edges; ++e) {
    grouped.others[next[edge_index[2 * e + by_column]]++] = edge_index[2 * e + 1 - by_column];
  }
  return grouped;
}

}  // namespace

bool PruneLayout(int64_t num_nodes, int64_t num_edges, const int64_t* edge_index, int64_t num_configurable,
                 const int64_t* node_config_ids, int hops, int64_t max_kept_ops, PrunedLayout* pruned,
                 std::string* error) {
  // The neighbourhood: `hops` steps along edges in both directions (layout_preprocessing.neighbourhood).
  std::vector<char> keep(num_nodes, 0);
  for (int64_t j = 0; j < num_configurable; ++j) keep[node_config_ids[j]] = 1;
  for (int hop = 0; hop < hops; ++hop) {
    std::vector<char> grown = keep;
    for (int64_t e = 0; e < num_edges; ++e) {
      const int64_t consumer = edge_index[2 * e], producer = edge_index[2 * e + 1];
      if (keep[producer]) grown[consumer] = 1;
      if (keep[consumer]) grown[producer] = 1;
    }
    keep.swap(grown);
  }
  std::vector<int64_t> kept_index(num_nodes, -1);
  pruned->kept_ops.clear();
  for (int64_t v = 0; v < num_nodes; ++v) {
    if (keep[v]) {
      kept_index[v] = static_cast<int64_t>(pruned->kept_ops.size());
      pruned->kept_ops.push_back(v);
    }
  }
  const size_t num_kept = pruned->kept_ops.size();
  pruned->edge_index.clear();
  pruned->has_edges = static_cast<int64_t>(num_kept) <= max_kept_ops;
  if (!pruned->has_edges) return true;

  // The data flow among kept ops (layout_preprocessing.kept_data_flow): per op a row over the kept
  // ops that reach it, 1 = without passing another kept op, 2 = through one; ops visited in
  // topological order. A kept op's row of its producers' maximum is the row its edges come from.
  const GroupedEdges producers = GroupEdges(num_nodes, num_edges, edge_index, 0);
  const GroupedEdges consumers = GroupEdges(num_nodes, num_edges, edge_index, 1);
  std::vector<int64_t> waiting_for(num_nodes), consumers_left(num_nodes);
  std::deque<int64_t> ready;
  for (int64_t v = 0; v < num_nodes; ++v) {
    waiting_for[v] = producers.starts[v + 1] - producers.starts[v];
    consumers_left[v] = consumers.starts[v + 1] - consumers.starts[v];
    if (waiting_for[v] == 0) ready.push_back(v);
  }
  std::vector<std::vector<uint8_t>> rows(num_nodes);
  std::vector<std::pair<int64_t, int64_t>> pairs;  // [consumer, producer] kept indices
  int64_t visited = 0;
  for (; !ready.empty(); ready.pop_front(), ++visited) {
    const int64_t op = ready.front();
    std::vector<uint8_t> row(num_kept, 0);
    for (int64_t i = producers.starts[op]; i < producers.starts[op + 1]; ++i) {
      const int64_t producer = producers.others[i];
      const std::vector<uint8_t>& produced = rows[producer];
      for (size_t k = 0; k < num_kept; ++k) row[k] = std::max(row[k], produced[k]);
      if (--consumers_left[producer] == 0) std::vector<uint8_t>().swap(rows[producer]);  // no longer read
    }
    if (keep[op]) {
      for (size_t k = 0; k < num_kept; ++k) {
        if (row[k] == 1) pairs.emplace_back(kept_index[op], static_cast<int64_t>(k));
        row[k] = row[k] > 0 ? 2 : 0;
      }
      row[kept_index[op]] = 1;
    }
    if (consumers_left[op] > 0) rows[op] = std::move(row);
    for (int64_t i = consumers.starts[op]; i < consumers.starts[op + 1]; ++i) {
      if (--waiting_for[consumers.others[i]] == 0) ready.push_back(consumers.others[i]);
    }
  }
  if (visited != num_nodes) {
    *error = "edge_index has a cycle: " + std::to_string(num_nodes - visited) +
             " ops lie on or after one; a layout graph's data flow must be acyclic";
    return false;
  }
  std::sort(pairs.begin(), pairs.end());
  for (const auto& [consumer, producer] : pairs) {
    pruned->edge_index.push_back(consumer);
    pruned->edge_index.push_back(producer);
  }
  pruned->node_config_ids.resize(num_configurable);
  for (int64_t j = 0; j < num_configurable; ++j) pruned->node_config_ids[j] = kept_index[node_config_ids[j]];
  return true;
}

}  // namespace tpu_graphs
