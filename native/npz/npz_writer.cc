#include "native/npz/npz_writer.h"

#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace tpu_graphs {
namespace {

// The .npy (version 1.0) bytes of one array: magic, header length, a Python dict literal padded
// with spaces to a multiple of 64 bytes, then the values.
std::string NpyBytes(const Array& array) {
  std::string shape = "(";
  for (size_t i = 0; i < array.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(array.shape[i]);
  shape += array.shape.size() == 1 ? ",)" : ")";
  std::string header = "{'descr': '" + array.dtype + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY\x01";
  bytes += '\0';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  return bytes + header + std::string(array.data.begin(), array.data.end());
}

void Little(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

}  // namespace

std::string StoredZip(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string archive, directory;
  for (const auto& [name, member] : members) {
    if (member.size() >= 0xffffffffu || archive.size() >= 0xffffffffu) {
      throw std::runtime_error("a member over 4 GiB, which this writer does not write");
    }
    const uint32_t crc = crc32(0, reinterpret_cast<const Bytef*>(member.data()), static_cast<uInt>(member.size()));
    std::string common;  // version needed, flags, method 0 (stored), time, date, crc, sizes, name length
    Little(common, 20, 2);
    Little(common, 0, 2);
    Little(common, 0, 2);
    Little(common, 0, 2);
    Little(common, (1 << 5) | 1, 2);  // 1980-01-01
    Little(common, crc, 4);
    Little(common, member.size(), 4);
    Little(common, member.size(), 4);
    Little(common, name.size(), 2);
    Little(directory, 0x02014b50, 4);
    Little(directory, 20, 2);  // version made by
    directory += common;
    Little(directory, 0, 2);  // extra length
    Little(directory, 0, 2);  // comment length
    Little(directory, 0, 2);  // disk
    Little(directory, 0, 2);  // internal attributes
    Little(directory, 0644u << 16, 4);
    Little(directory, archive.size(), 4);
    directory += name;
    Little(archive, 0x04034b50, 4);
    archive += common;
    Little(archive, 0, 2);  // extra length
    archive += name + member;
  }
  std::string end;
  Little(end, 0x06054b50, 4);
  Little(end, 0, 4);  // disks
  Little(end, members.size(), 2);
  Little(end, members.size(), 2);
  Little(end, directory.size(), 4);
  Little(end, archive.size(), 4);
  Little(end, 0, 2);
  return archive + directory + end;
}

void WriteNpz(const std::string& path, const std::vector<std::pair<std::string, Array>>& arrays) {
  std::vector<std::pair<std::string, std::string>> members;
  for (const auto& [name, array] : arrays) members.emplace_back(name + ".npy", NpyBytes(array));
  std::string zip;
  try {
    zip = StoredZip(members);
  } catch (const std::runtime_error&) {
    throw std::runtime_error(path + ": an array over 4 GiB, which this writer does not write");
  }
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary);
    file << zip;
    if (!file) throw std::runtime_error(path + ": cannot write the file");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) throw std::runtime_error(path + ": cannot write the file");
}

}  // namespace tpu_graphs
