// What the fuzz targets of both model libraries (tile_library_fuzzer.cc, layout_library_fuzzer.cc)
// check alike: the message of a refused call, and tpu_graphs_rank_module on the input's bytes.
#ifndef TPU_GRAPHS_NATIVE_FUZZ_LIBRARY_CALLS_H_
#define TPU_GRAPHS_NATIVE_FUZZ_LIBRARY_CALLS_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "tpu_graphs_model.h"

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

// tpu_graphs_rank_module on input: u8 num_candidates (modulo 33), u64 seed, u8 top_k, then the
// module's bytes. Aborts unless it gives a ranking exactly when it succeeds, else a message.
inline void RankModule(FuzzInput& input) {
  const int64_t num_candidates = input.Draw<uint8_t>() % 33;
  const uint64_t seed = input.Draw<uint64_t>();
  const int64_t top_k = input.Draw<uint8_t>();
  const std::string_view module = input.Rest();
  tpu_graphs_module_ranking* ranking = nullptr;
  char message[256] = "";
  const int status = tpu_graphs_rank_module(module.data(), module.size(), num_candidates, seed, top_k, &ranking,
                                            message, sizeof(message));
  if ((status == TPU_GRAPHS_OK) != (ranking != nullptr) || (status != TPU_GRAPHS_OK && message[0] == '\0')) {
    std::abort();
  }
  tpu_graphs_free_module_ranking(ranking);
}

}  // namespace tpu_graphs_fuzz

#endif  // TPU_GRAPHS_NATIVE_FUZZ_LIBRARY_CALLS_H_
