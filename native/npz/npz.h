// Reads the arrays of a TpuGraphs .npz file: a zip archive (members stored or deflated, as numpy's
// savez and savez_compressed write them) of .npy files. Only what the files hold is supported:
// little-endian, C-order arrays of float32, uint8 or int64.
#ifndef TPU_GRAPHS_NATIVE_NPZ_NPZ_H_
#define TPU_GRAPHS_NATIVE_NPZ_NPZ_H_

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tpu_graphs {

// Unreadable input; what() starts with the file's path and names the problem.
class NpzError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Array {
  std::string dtype;           // numpy's descr: "<f4", "|u1", "<i8", ...
  std::vector<int64_t> shape;  // C order
  std::vector<char> data;      // the raw little-endian values

  int64_t size() const;  // the number of values
  template <class T>
  const T* values() const { return reinterpret_cast<const T*>(data.data()); }
};

// Every array of the file by name (without ".npy"). Throws NpzError naming the file and the problem.
std::map<std::string, Array> ReadNpz(const std::string& path);

// Every array of an npz file's bytes; errors name `source` (the file) as ReadNpz's do.
std::map<std::string, Array> ParseNpz(std::string_view zip, const std::string& source);

// The members of a zip archive's bytes (name, unpacked bytes), in the order of its central
// directory, CRCs checked; NpzError naming `source` where it is no such archive.
std::vector<std::pair<std::string, std::string>> ZipMembers(std::string_view zip, const std::string& source);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_NPZ_NPZ_H_
