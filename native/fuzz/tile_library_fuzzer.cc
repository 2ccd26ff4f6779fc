// Fuzz target: the entry points of a compiled tile model's library (tpu_graphs_model.h), linked as
// a compiler links it: tpu_graphs_score_tile with sizes and values drawn from the input (NaN and
// infinite features, negative counts and counts no array could hold, ids out of range, null
// arrays, short message buffers), and tpu_graphs_rank_module on the input's remaining bytes. A
// call must score, or refuse with a status and a message that fits its buffer; a count no array
// could hold must be refused.
//
// Input: u8 entry (bit 0: tpu_graphs_rank_module, library_calls.h, bits 1-2 its options; else tpu_graphs_score_tile),
// then for tpu_graphs_score_tile: u8 null arrays (bit 0: node_feat, 1: node_opcode, 2: edge_index,
// 3: config_feat, 4: scores, 5: message), u8 message size (DrawMessageSize), i64 num_nodes,
// i64 num_edges, i64 num_configs (FoldedCount), then node_feat f32 [num_nodes][140], node_opcode
// u8 [num_nodes], edge_index i64 [num_edges][2], config_feat f32 [num_configs][24].
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "native/fuzz/fuzz_input.h"
#include "native/fuzz/library_calls.h"
#include "native/library/tpu_graphs_model.h"

namespace {

using tpu_graphs_fuzz::Allocatable;
using tpu_graphs_fuzz::FoldedCount;
using tpu_graphs_fuzz::FuzzInput;

constexpr int64_t kNodeFeatures = 140, kConfigFeatures = 24;
constexpr int64_t kMaxNodes = 1024, kMaxEdges = 2048, kMaxConfigs = 300;  // past the largest bucket

// Rows allocated for a count: its own, or one where the count is negative or unallocatable.
int64_t Rows(int64_t count, int64_t cap) { return Allocatable(count, cap) ? count : 1; }

void ScoreTile(FuzzInput& input) {
  const uint8_t nulls = input.Draw<uint8_t>();
  const size_t message_size = tpu_graphs_fuzz::DrawMessageSize(input);
  const int64_t num_nodes = FoldedCount(input.Draw<int64_t>(), kMaxNodes, sizeof(float) * kNodeFeatures);
  const int64_t num_edges = FoldedCount(input.Draw<int64_t>(), kMaxEdges, 2 * sizeof(int64_t));
  const int64_t num_configs = FoldedCount(input.Draw<int64_t>(), kMaxConfigs, sizeof(float) * kConfigFeatures);
  std::vector<float> node_feat = input.DrawArray<float>(Rows(num_nodes, kMaxNodes) * kNodeFeatures);
  std::vector<uint8_t> node_opcode = input.DrawArray<uint8_t>(Rows(num_nodes, kMaxNodes));
  std::vector<int64_t> edge_index = input.DrawArray<int64_t>(Rows(num_edges, kMaxEdges) * 2);
  std::vector<float> config_feat = input.DrawArray<float>(Rows(num_configs, kMaxConfigs) * kConfigFeatures);
  std::vector<float> scores(Rows(num_configs, kMaxConfigs));
  std::vector<char> message(message_size + 1, 'x');
  const int status = tpu_graphs_score_tile(
      num_nodes, nulls & 1 ? nullptr : node_feat.data(), nulls & 2 ? nullptr : node_opcode.data(), num_edges,
      nulls & 4 ? nullptr : edge_index.data(), num_configs, nulls & 8 ? nullptr : config_feat.data(),
      nulls & 16 ? nullptr : scores.data(), nulls & 32 ? nullptr : message.data(), message_size);
  tpu_graphs_fuzz::CheckStatus(status, message, message_size, !(nulls & 32));
  if (status == TPU_GRAPHS_OK && (!Allocatable(num_nodes, kMaxNodes) || !Allocatable(num_edges, kMaxEdges) ||
                                  !Allocatable(num_configs, kMaxConfigs))) {
    std::abort();  // a count no array could hold was accepted
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput input(data, size);
  const uint8_t entry = input.Draw<uint8_t>();
  if (entry & 1) {
    tpu_graphs_fuzz::RankModule(input, entry);
  } else {
    ScoreTile(input);
  }
  return 0;
}
