// Fuzz target: PruneLayout (layout_pruning.h), the host-side pruning every layout model library
// runs on a caller's graph, on graphs and neighbourhoods drawn from the input. Its ids are in
// range, as the library checks them first; cycles are drawn too (PruneLayout must refuse them).
// A pruned graph is checked against the definition: the configurable ops and every op within
// `hops` edges of one, and among them the transitive reduction of the whole graph's reachability.
//
// Input: u16 num_nodes, u16 num_edges, u16 num_configurable, u8 hops, u16 max_kept_ops, then
// num_edges rows of (u16 consumer, u16 producer) and num_configurable u16 ids, each taken modulo
// num_nodes (a configurable id already drawn is skipped).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "native/fuzz/fuzz_input.h"
#include "native/library/layout_pruning.h"

namespace {

constexpr int64_t kMaxNodes = 2048;
constexpr int64_t kMaxEdges = 8192;
constexpr int64_t kReferenceNodes = 128;  // the definition is checked on graphs up to this size

// reaches[u][v]: v reachable from u along edges producer -> consumer (u == v included); empty on a cycle.
std::vector<std::vector<char>> Reachability(int64_t num_nodes, const std::vector<int64_t>& edge_index) {
  std::vector<std::vector<int64_t>> consumers(num_nodes);
  for (size_t e = 0; e < edge_index.size(); e += 2) consumers[edge_index[e + 1]].push_back(edge_index[e]);
  std::vector<std::vector<char>> reaches(num_nodes, std::vector<char>(num_nodes, 0));
  for (int64_t start = 0; start < num_nodes; ++start) {
    std::vector<int64_t> stack{start};
    while (!stack.empty()) {
      const int64_t op = stack.back();
      stack.pop_back();
      for (const int64_t next : consumers[op]) {
        if (next == start) return {};
        if (!reaches[start][next]) {
          reaches[start][next] = 1;
          stack.push_back(next);
        }
      }
    }
    reaches[start][start] = 1;
  }
  return reaches;
}

void CheckAgainstDefinition(int64_t num_nodes, const std::vector<int64_t>& edge_index,
                            const std::vector<int64_t>& config_ids, int hops, bool refused,
                            const tpu_graphs::PrunedLayout& pruned) {
  const auto reaches = Reachability(num_nodes, edge_index);
  if (refused != reaches.empty()) std::abort();  // refused exactly the cyclic graphs
  if (refused) return;
  std::vector<char> keep(num_nodes, 0);
  for (const int64_t id : config_ids) keep[id] = 1;
  for (int hop = 0; hop < hops; ++hop) {
    std::vector<char> grown = keep;
    for (size_t e = 0; e < edge_index.size(); e += 2) {
      if (keep[edge_index[e]] || keep[edge_index[e + 1]]) grown[edge_index[e]] = grown[edge_index[e + 1]] = 1;
    }
    keep.swap(grown);
  }
  std::vector<int64_t> kept;
  for (int64_t v = 0; v < num_nodes; ++v) {
    if (keep[v]) kept.push_back(v);
  }
  if (kept != pruned.kept_ops || !pruned.has_edges) std::abort();
  std::vector<int64_t> expected;  // (consumer, producer) kept indices, sorted
  for (size_t c = 0; c < kept.size(); ++c) {
    for (size_t p = 0; p < kept.size(); ++p) {
      if (p == c || !reaches[kept[p]][kept[c]]) continue;
      bool through_another = false;
      for (size_t w = 0; w < kept.size() && !through_another; ++w) {
        through_another = w != p && w != c && reaches[kept[p]][kept[w]] && reaches[kept[w]][kept[c]];
      }
      if (!through_another) {
        expected.push_back(static_cast<int64_t>(c));
        expected.push_back(static_cast<int64_t>(p));
      }
    }
  }
  if (expected != pruned.edge_index) std::abort();
  for (size_t j = 0; j < config_ids.size(); ++j) {
    if (kept[pruned.node_config_ids[j]] != config_ids[j]) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpu_graphs_fuzz::FuzzInput input(data, size);
  const int64_t num_nodes = 1 + input.Draw<uint16_t>() % kMaxNodes;
  const int64_t num_edges = input.Draw<uint16_t>() % (kMaxEdges + 1);
  const int64_t wanted_configurable = 1 + input.Draw<uint16_t>() % num_nodes;
  const int hops = input.Draw<uint8_t>() % 4;
  const int64_t max_kept_ops = input.Draw<uint16_t>();
  std::vector<int64_t> edge_index(2 * num_edges);
  for (int64_t& id : edge_index) id = input.Draw<uint16_t>() % num_nodes;
  std::vector<int64_t> config_ids;
  std::vector<char> drawn(num_nodes, 0);
  for (int64_t j = 0; j < wanted_configurable; ++j) {
    const int64_t id = input.Draw<uint16_t>() % num_nodes;
    if (!drawn[id]++) config_ids.push_back(id);
  }
  tpu_graphs::PrunedLayout pruned;
  std::string error;
  const bool pruned_ok = tpu_graphs::PruneLayout(num_nodes, num_edges, edge_index.data(),
                                                 static_cast<int64_t>(config_ids.size()), config_ids.data(), hops,
                                                 max_kept_ops, &pruned, &error);
  if (!pruned_ok && error.empty()) std::abort();  // a refusal says why
  const bool definition_applies = num_nodes <= kReferenceNodes && (!pruned_ok || pruned.has_edges);
  if (definition_applies) CheckAgainstDefinition(num_nodes, edge_index, config_ids, hops, !pruned_ok, pruned);
  return 0;
}
