// Fuzz target: the module written back, tpu_graphs_apply_layout_config (native/library/rank_module.cc
// over native/hlo/module_writer.cc): module bytes and a candidate index in, a module out. Beyond
// the C interface's contract (a status and a message, a module exactly when it succeeds, the
// message buffer respected), every module written must be read back as its candidate: it parses
// in the wrapper it came in, passes the module checks, and featurized as a bare module it sets
// each configurable instruction of the candidate as the candidate does (tpu_graphs/hlo/module_writer.py's
// promise, which tests/hlo/test_module_writer.py checks on real modules).
//
// Input: u8 kind (bits 1-2 the call's options, library_calls.h's DrawnOptions; bit 3 a null
// num_copies), u8 num_candidates (modulo 33: up to 32), u64 seed, u8 config, then the module's bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "native/fuzz/fuzz_input.h"
#include "native/fuzz/library_calls.h"
#include "native/hlo/candidates.h"
#include "native/hlo/features.h"
#include "native/hlo/featurize.h"
#include "native/hlo/hlo_input.h"
#include "native/library/tpu_graphs_model.h"

namespace {

// Aborts unless `written` reads back as candidate `config` of `input`: every configurable node of the
// candidate that a bare module's graph configures too (a convolution, dot or reshape; tuning data
// may configure others) has the candidate's features there. Nodes are matched by position, the
// copies (ids the input lacks) skipped, so that modules with repeated names are checked too.
void CheckReadBack(const tpu_graphs::HloInput& input, std::string_view written, int64_t num_candidates, uint64_t seed,
                   int64_t config, const tpu_graphs_rank_options* options) {
  const tpu_graphs::HloInput again = tpu_graphs::ParseHloInput(written, "");  // throws (an abort) if unreadable
  if (again.kind != tpu_graphs::HloInput::Kind::kModule || again.hlo_proto != input.hlo_proto) std::abort();
  const tpu_graphs_rank_options limits =
      options != nullptr ? *options : tpu_graphs_rank_options TPU_GRAPHS_DEFAULT_RANK_OPTIONS;
  const std::vector<tpu_graphs::Graph> drawn = tpu_graphs::CandidateGraphsOfInput(
      input, num_candidates, false, seed, {limits.max_candidates, limits.max_module_bytes, limits.max_config_bytes},
      limits.change_entry_layouts != 0);
  const tpu_graphs::Graph& candidate = drawn.at(0);
  const tpu_graphs::Graph read = tpu_graphs::ProgramGraph(again.module, "");  // checks the module
  const bool tuned = input.kind == tpu_graphs::HloInput::Kind::kModuleTuningData;
  std::set<int64_t> original_ids;
  for (const auto& computation : (tuned ? input.module_tuning_data.module() : input.module).computations()) {
    for (const auto& instruction : computation.instructions()) original_ids.insert(instruction.id());
  }
  std::vector<int64_t> written_node;  // original node -> its node in the written module
  int64_t node = 0;
  for (const auto& computation : again.module.computations()) {
    for (const auto& instruction : computation.instructions()) {
      if (original_ids.count(instruction.id()) > 0) written_node.push_back(node);
      ++node;
    }
  }
  if (written_node.size() != original_ids.size()) std::abort();
  constexpr int kWidth = tpu_graphs::kLayoutConfigFeatures;
  const float* wanted = candidate.node_config_feat.data() + config * candidate.num_configurable() * kWidth;
  for (int64_t j = 0; j < candidate.num_configurable(); ++j) {
    const int64_t at = written_node.at(candidate.node_config_ids[j]);
    const auto found = std::find(read.node_config_ids.begin(), read.node_config_ids.end(), at);
    if (found == read.node_config_ids.end()) continue;
    const float* got = read.node_config_feat.data() + (found - read.node_config_ids.begin()) * kWidth;
    if (!std::equal(got, got + kWidth, wanted + j * kWidth)) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpu_graphs_fuzz::FuzzInput input(data, size);
  const uint8_t kind = input.Draw<uint8_t>();
  const int64_t num_candidates = input.Draw<uint8_t>() % 33;
  const uint64_t seed = input.Draw<uint64_t>();
  const int64_t config = input.Draw<uint8_t>();
  const std::string_view module = input.Rest();
  tpu_graphs_rank_options storage;
  const tpu_graphs_rank_options* options = tpu_graphs_fuzz::DrawnOptions(kind, storage);
  void* written = nullptr;
  size_t written_size = 0;
  int64_t copies = -1;
  std::vector<char> message(257, 'x');
  const int status = tpu_graphs_apply_layout_config(module.data(), module.size(), num_candidates, seed, config, options,
                                                    &written, &written_size, (kind & 8) ? nullptr : &copies,
                                                    message.data(), 256);
  tpu_graphs_fuzz::CheckStatus(status, message, 256, true);
  if ((status == TPU_GRAPHS_OK) != (written != nullptr)) std::abort();
  if (status == TPU_GRAPHS_OK) {
    if (!(kind & 8) && copies < 0) std::abort();
    CheckReadBack(tpu_graphs::ParseHloInput(module, ""), {static_cast<const char*>(written), written_size},
                  num_candidates, seed, config, options);
  }
  tpu_graphs_free_written_module(written);
  return 0;
}
