// libFuzzer's mutator for the npz target (linked when fuzzing, not by the replay test): a byte
// mutation of an npz file almost always breaks a member's CRC or its deflate stream, so the .npy
// parser behind them would see only the seeds' headers. Half the mutations therefore change one
// member's unpacked bytes (its .npy header and first values) and write the archive again, stored,
// with right CRCs; the other half are libFuzzer's own, on the whole file.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "native/npz/npz.h"
#include "native/npz/npz_writer.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

constexpr size_t kMutatedPrefix = 1024;  // of a member: its .npy header and first values

bool MutateMember(uint8_t* data, size_t size, size_t max_size, unsigned seed, size_t* mutated_size) {
  std::vector<std::pair<std::string, std::string>> members;
  try {
    members = tpu_graphs::ZipMembers(std::string_view(reinterpret_cast<const char*>(data), size), "");
  } catch (const tpu_graphs::NpzError&) {
    return false;
  }
  if (members.empty()) return false;
  std::string& member = members[seed % members.size()].second;
  const size_t prefix = member.size() < kMutatedPrefix ? member.size() : kMutatedPrefix;
  std::string head = member.substr(0, prefix);
  head.resize(prefix + 64);
  head.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(head.data()), prefix, head.size()));
  member = head + member.substr(prefix);
  const std::string zip = tpu_graphs::StoredZip(members);
  if (zip.size() > max_size) return false;
  std::memcpy(data, zip.data(), zip.size());
  *mutated_size = zip.size();
  return true;
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  size_t mutated_size = 0;
  if (seed % 2 == 0 && MutateMember(data, size, max_size, seed / 2, &mutated_size)) return mutated_size;
  return LLVMFuzzerMutate(data, size, max_size);
}
