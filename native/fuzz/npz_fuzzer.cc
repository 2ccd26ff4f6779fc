// Fuzz target: the bytes of a whole .npz file through the reader //native:rank uses (npz.h).
// Every input must give arrays whose values fill their shapes, or an NpzError; anything else
// (another exception, a crash, a sanitizer report) is a finding. Seeds: the real sample's npz files.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "native/npz/npz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto arrays = tpu_graphs::ParseNpz(std::string_view(reinterpret_cast<const char*>(data), size), "input.npz");
    for (const auto& [name, array] : arrays) {
      const int64_t value_size = array.dtype.size() == 3 ? array.dtype[2] - '0' : 0;  // "<f4", "|u1", ...
      if (array.size() < 0 || static_cast<int64_t>(array.data.size()) != array.size() * value_size) std::abort();
    }
  } catch (const tpu_graphs::NpzError&) {
  }
  return 0;
}
