// A plain driver for a fuzz target, built by the ordinary toolchain (no clang, no libFuzzer):
// calls LLVMFuzzerTestOneInput once on each file named, or on each file of each folder named
// (the kept regression inputs, native/fuzz/regressions/<target>/), and says how many it replayed.
// A finding shows as a crash, an abort or an uncaught exception, as under libFuzzer.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// As the fuzz runs' -malloc_limit_mb (benchmarks/fuzz.py): a larger single allocation is a
// finding, which AddressSanitizer reports and aborts on.
extern "C" const char* __asan_default_options() { return "max_allocation_size_mb=1024:allocator_may_return_null=0"; }

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (std::filesystem::is_directory(argv[i])) {
      for (const auto& entry : std::filesystem::directory_iterator(argv[i])) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    } else {
      inputs.emplace_back(argv[i]);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  for (const auto& path : inputs) {
    std::ifstream file(path, std::ios::binary);
    if (!file) {
      std::fprintf(stderr, "%s: cannot read the file\n", path.c_str());
      return 1;
    }
    const std::string bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    // Copied to a buffer of exactly its size, as libFuzzer passes it, so an overread leaves it.
    const std::vector<uint8_t> input(bytes.begin(), bytes.end());
    std::fprintf(stderr, "replaying %s (%zu bytes)\n", path.c_str(), input.size());
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::printf("replayed %zu inputs without a finding\n", inputs.size());
  return 0;
}
