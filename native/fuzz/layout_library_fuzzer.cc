// Fuzz target: the entry points of a compiled layout model's library (tpu_graphs_model.h), linked
// as a compiler links it: tpu_graphs_score_layout with sizes and values drawn from the input (NaN
// features, layout values that are no dimension index, negative counts and counts no array could
// hold, ids out of range or repeated, cycles, graphs whose pruning is over the largest bucket,
// null arrays, short message buffers), and tpu_graphs_rank_module on the input's remaining bytes.
// A call must score, or refuse with a status and a message that fits its buffer; a count no array
// could hold must be refused.
//
// Input: u8 entry (bit 0: tpu_graphs_rank_module, library_calls.h, bits 1-2 its options; else tpu_graphs_score_layout),
// then for tpu_graphs_score_layout: u8 null arrays (bit 0: node_feat, 1: node_opcode,
// 2: edge_index, 3: node_config_ids, 4: node_config_feat, 5: scores, 6: message), u8 message size
// (DrawMessageSize), i64 num_nodes, i64 num_edges, i64 num_configurable, i64 num_configs
// (FoldedCount), then node_feat f32 [num_nodes][140], node_opcode u8 [num_nodes], edge_index i64
// [num_edges][2], node_config_ids i64 [num_configurable], node_config_feat f32
// [num_configs][num_configurable][18].
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

constexpr int64_t kNodeFeatures = 140, kLayoutValues = 18;
// Whole graphs past the largest bucket (before pruning); at most kMaxConfigValues layout values.
constexpr int64_t kMaxNodes = 8192, kMaxEdges = 16384, kMaxConfigurable = 2100, kMaxConfigs = 100;
constexpr int64_t kMaxConfigValues = 1 << 20;

int64_t Rows(int64_t count, int64_t cap) { return Allocatable(count, cap) ? count : 1; }

void ScoreLayout(FuzzInput& input) {
  const uint8_t nulls = input.Draw<uint8_t>();
  const size_t message_size = tpu_graphs_fuzz::DrawMessageSize(input);
  const int64_t num_nodes = FoldedCount(input.Draw<int64_t>(), kMaxNodes, sizeof(float) * kNodeFeatures);
  const int64_t num_edges = FoldedCount(input.Draw<int64_t>(), kMaxEdges, 2 * sizeof(int64_t));
  const int64_t num_configurable = FoldedCount(input.Draw<int64_t>(), kMaxConfigurable, sizeof(int64_t));
  const int64_t configurable_rows = Rows(num_configurable, kMaxConfigurable);
  // A config's row: every configurable op's values (one op's where there are none to allocate).
  const int64_t config_bytes = sizeof(float) * kLayoutValues * (configurable_rows > 0 ? configurable_rows : 1);
  int64_t num_configs = FoldedCount(input.Draw<int64_t>(), kMaxConfigs, config_bytes);
  if (Allocatable(num_configs, kMaxConfigs) && num_configs * configurable_rows * kLayoutValues > kMaxConfigValues) {
    num_configs = kMaxConfigValues / (configurable_rows * kLayoutValues);
  }
  std::vector<float> node_feat = input.DrawArray<float>(Rows(num_nodes, kMaxNodes) * kNodeFeatures);
  std::vector<uint8_t> node_opcode = input.DrawArray<uint8_t>(Rows(num_nodes, kMaxNodes));
  std::vector<int64_t> edge_index = input.DrawArray<int64_t>(Rows(num_edges, kMaxEdges) * 2);
  std::vector<int64_t> node_config_ids = input.DrawArray<int64_t>(configurable_rows);
  std::vector<float> node_config_feat =
      input.DrawArray<float>(Rows(num_configs, kMaxConfigs) * configurable_rows * kLayoutValues);
  std::vector<float> scores(Rows(num_configs, kMaxConfigs));
  std::vector<char> message(message_size + 1, 'x');
  const int status = tpu_graphs_score_layout(
      num_nodes, nulls & 1 ? nullptr : node_feat.data(), nulls & 2 ? nullptr : node_opcode.data(), num_edges,
      nulls & 4 ? nullptr : edge_index.data(), num_configurable, nulls & 8 ? nullptr : node_config_ids.data(),
      num_configs, nulls & 16 ? nullptr : node_config_feat.data(), nulls & 32 ? nullptr : scores.data(),
      nulls & 64 ? nullptr : message.data(), message_size);
  tpu_graphs_fuzz::CheckStatus(status, message, message_size, !(nulls & 64));
  if (status == TPU_GRAPHS_OK &&
      (!Allocatable(num_nodes, kMaxNodes) || !Allocatable(num_edges, kMaxEdges) ||
       !Allocatable(num_configurable, kMaxConfigurable) || !Allocatable(num_configs, kMaxConfigs))) {
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
    ScoreLayout(input);
  }
  return 0;
}
