// What the fuzz targets of both model libraries (tile_library_fuzzer.cc, layout_library_fuzzer.cc)
// check alike: the message of a refused call, and tpu_graphs_rank_module on the input's bytes.
#ifndef TPU_GRAPHS_NATIVE_FUZZ_LIBRARY_CALLS_H_
#define TPU_GRAPHS_NATIVE_FUZZ_LIBRARY_CALLS_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "native/fuzz/fuzz_input.h"
#include "native/library/tpu_graphs_model.h"

namespace tpu_graphs_fuzz {

// The message_size a target passes: of 0, 1, 2, 8, 16, 64, 256 and 1024, drawn.
inline size_t DrawMessageSize(FuzzInput& input) {
  constexpr size_t kMessageSizes[] = {0, 1, 2, 8, 16, 64, 256, 1024};
  return kMessageSizes[input.Draw<uint8_t>() % 8];
}

// Aborts unless `status` is a tpu_graphs_status and a refusal's message (in a buffer of
// message_size bytes and one more, which the call must not touch) ends within message_size bytes.
inline void CheckStatus(int status, const std::vector<char>& message, size_t message_size, bool message_given) {
  if (status < TPU_GRAPHS_OK || status > TPU_GRAPHS_RUN_FAILED) std::abort();
  if (status == TPU_GRAPHS_OK || !message_given) return;
  if (message_size > 0 && std::memchr(message.data(), '\0', message_size) == nullptr) std::abort();
  if (message[message_size] != 'x') std::abort();
}

// The options of a tpu_graphs_rank_module call, by bits 1-2 of `entry`: none (null: the defaults),
// the defaults written out, limits a small module reaches (8 candidates, 4 KiB of module, 2 KiB
// of config features) with the entry's layouts free to change, or a limit of 0, which must be
// refused. `storage` holds what is pointed to.
inline const tpu_graphs_rank_options* DrawnOptions(uint8_t entry, tpu_graphs_rank_options& storage) {
  switch ((entry >> 1) & 3) {
    case 0:
      return nullptr;
    case 1:
      storage = TPU_GRAPHS_DEFAULT_RANK_OPTIONS;
      return &storage;
    case 2:
      storage = {8, 4096, 2048, 1};
      return &storage;
    default:
      storage = {0, 4096, 2048};
      return &storage;
  }
}

// tpu_graphs_rank_module on input: u8 num_candidates (modulo 33), u64 seed, u8 top_k, then the
// module's bytes, with the options `entry` names (DrawnOptions). Aborts unless it gives a ranking
// exactly when it succeeds, else a message.
inline void RankModule(FuzzInput& input, uint8_t entry) {
  const int64_t num_candidates = input.Draw<uint8_t>() % 33;
  const uint64_t seed = input.Draw<uint64_t>();
  const int64_t top_k = input.Draw<uint8_t>();
  const std::string_view module = input.Rest();
  tpu_graphs_rank_options storage;
  const tpu_graphs_rank_options* options = DrawnOptions(entry, storage);
  tpu_graphs_module_ranking* ranking = nullptr;
  char message[256] = "";
  const int status = tpu_graphs_rank_module(module.data(), module.size(), num_candidates, seed, top_k, options,
                                            &ranking, message, sizeof(message));
  if (options != nullptr && options->max_candidates == 0 && status != TPU_GRAPHS_INVALID_INPUT) std::abort();
  if ((status == TPU_GRAPHS_OK) != (ranking != nullptr) || (status != TPU_GRAPHS_OK && message[0] == '\0')) {
    std::abort();
  }
  tpu_graphs_free_module_ranking(ranking);
}

}  // namespace tpu_graphs_fuzz

#endif  // TPU_GRAPHS_NATIVE_FUZZ_LIBRARY_CALLS_H_
