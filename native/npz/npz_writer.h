// Writes arrays as an .npz file numpy reads (np.load): a zip archive of .npy members, stored
// uncompressed, written to a temporary file and renamed into place.
#ifndef TPU_GRAPHS_NATIVE_NPZ_NPZ_WRITER_H_
#define TPU_GRAPHS_NATIVE_NPZ_NPZ_WRITER_H_

#include <string>
#include <utility>
#include <vector>

#include "native/npz/npz.h"

namespace tpu_graphs {

// Writes `arrays` (name, array) in their order. Throws std::runtime_error naming the path where it
// cannot be written.
void WriteNpz(const std::string& path, const std::vector<std::pair<std::string, Array>>& arrays);

// The bytes of a zip archive of `members` (name, bytes), stored uncompressed, in their order.
// Throws std::runtime_error for a member or archive over 4 GiB (zip64, which it does not write).
std::string StoredZip(const std::vector<std::pair<std::string, std::string>>& members);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_NPZ_NPZ_WRITER_H_
