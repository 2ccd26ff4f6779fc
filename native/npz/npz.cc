#include "native/npz/npz.h"

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace tpu_graphs {
namespace {

uint32_t Read32(const char* at) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(at);
  return bytes[0] | bytes[1] << 8 | bytes[2] << 16 | static_cast<uint32_t>(bytes[3]) << 24;
}
uint16_t Read16(const char* at) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(at);
  return static_cast<uint16_t>(bytes[0] | bytes[1] << 8);
}

std::string Field(const std::string& header, const std::string& key) {
  const size_t at = header.find("'" + key + "':");
  if (at == std::string::npos) return "";
  size_t start = at + key.size() + 3;
  while (start < header.size() && header[start] == ' ') ++start;
  const char close = header[start] == '\'' ? '\'' : header[start] == '(' ? ')' : ',';
  const size_t end = header.find(close, start + 1);
  return end == std::string::npos ? "" : header.substr(start, end - start + 1);
}

size_t ValueSize(const std::string& dtype) {
  if (dtype == "<f4" || dtype == "<i4") return 4;
  if (dtype == "<i8" || dtype == "<f8") return 8;
  if (dtype == "|u1" || dtype == "|i1" || dtype == "|b1") return 1;
  return 0;
}

// Rewrites a Fortran-order array's values in C order (numpy writes a transposed array so; the
// release's layout files hold edge_index that way).
void ToCOrder(Array& array) {
  const size_t value_size = ValueSize(array.dtype), rank = array.shape.size();
  const std::vector<char> fortran = array.data;
  std::vector<int64_t> index(rank, 0);
  for (int64_t c = 0; c < array.size(); ++c) {
    int64_t f = 0;  // position of the same element in Fortran order: the first axis varies fastest
    for (size_t axis = rank; axis-- > 0;) f = f * array.shape[axis] + index[axis];
    std::memcpy(&array.data[c * value_size], &fortran[f * value_size], value_size);
    for (size_t axis = rank; axis-- > 0;) {  // next C-order index: the last axis varies fastest
      if (++index[axis] < array.shape[axis]) break;
      index[axis] = 0;
    }
  }
}

// The dimensions of a .npy header's shape, "(3163, 140)", "(5,)" or "()"; NpzError unless each is
// a non-negative integer.
std::vector<int64_t> ParseShape(const std::string& where, const std::string& shape) {
  const NpzError refused(where + "shape '" + shape + "' in the .npy header is no tuple of sizes");
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') throw refused;
  std::vector<std::string> items{""};  // between the commas, spaces dropped
  for (size_t i = 1; i + 1 < shape.size(); ++i) {
    if (shape[i] == ',') {
      items.emplace_back();
    } else if (shape[i] != ' ') {
      if (shape[i] < '0' || shape[i] > '9' || items.back().size() == 18) throw refused;  // 18 digits: < 2^63
      items.back() += shape[i];
    }
  }
  if (items.size() > 1 && items.back().empty()) items.pop_back();  // "(5,)"
  if (items.size() == 1 && items[0].empty()) return {};             // "()"
  std::vector<int64_t> dimensions;
  for (const std::string& item : items) {
    if (item.empty()) throw refused;
    dimensions.push_back(std::stoll(item));
  }
  return dimensions;
}

// A .npy member: "\x93NUMPY", version, header length, a Python dict literal, the values.
Array ParseNpy(const std::string& path, const std::string& name, const std::string& bytes) {
  const std::string where = path + ": " + name + ": ";
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) throw NpzError(where + "not a .npy array");
  const int major = bytes[6];
  if (major < 1 || major > 3 || (major > 1 && bytes.size() < 12)) {
    throw NpzError(where + ".npy format version " + std::to_string(major) + " (only 1, 2 and 3)");
  }
  const size_t length = major == 1 ? Read16(&bytes[8]) : Read32(&bytes[8]);
  const size_t offset = major == 1 ? 10 : 12;
  if (offset + length > bytes.size()) throw NpzError(where + ".npy header runs past the member's end");
  const std::string header(&bytes[offset], length);
  Array array;
  const std::string descr = Field(header, "descr");
  array.dtype = descr.size() > 2 ? descr.substr(1, descr.size() - 2) : "";
  if (ValueSize(array.dtype) == 0) throw NpzError(where + "unsupported dtype '" + array.dtype + "'");
  const std::string order = Field(header, "fortran_order");
  if (order != "False," && order != "True,") throw NpzError(where + "no fortran_order in the .npy header");
  const std::string shape = Field(header, "shape");
  array.shape = ParseShape(where, shape);
  const size_t held = bytes.size() - offset - length;
  size_t expected = ValueSize(array.dtype);
  for (const int64_t dimension : array.shape) {
    if (__builtin_mul_overflow(expected, static_cast<size_t>(dimension), &expected)) expected = SIZE_MAX;
  }
  if (held != expected) {
    throw NpzError(where + "holds " + std::to_string(held) + " bytes of values; its shape " + shape + " needs " +
                   (expected == SIZE_MAX ? "more than any file holds" : std::to_string(expected)));
  }
  array.data.assign(bytes.begin() + static_cast<long>(offset + length), bytes.end());
  if (order == "True,") ToCOrder(array);
  return array;
}

std::string Inflate(const std::string& where, const char* data, size_t size, size_t expected) {
  // Deflate expands at most 1032:1 (zlib's limit): a member declaring more is damaged, refused
  // before its size is allocated.
  if (expected / 1032 > size + 1) {
    throw NpzError(where + "declares " + std::to_string(expected) + " bytes deflated into " + std::to_string(size) +
                   ", more than deflate expands to (the file is damaged)");
  }
  std::string out(expected, '\0');
  z_stream stream{};
  if (inflateInit2(&stream, -MAX_WBITS) != Z_OK) throw NpzError(where + "zlib could not start");
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  stream.avail_in = static_cast<uInt>(size);
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(expected);
  const int status = inflate(&stream, Z_FINISH);
  const size_t produced = stream.total_out;
  inflateEnd(&stream);
  if (status != Z_STREAM_END || produced != expected) throw NpzError(where + "corrupt deflate data");
  return out;
}

}  // namespace

int64_t Array::size() const {
  int64_t count = 1;
  for (int64_t dimension : shape) count *= dimension;
  return count;
}

std::map<std::string, Array> ReadNpz(const std::string& path) {
  std::error_code status;
  if (std::filesystem::is_directory(path, status)) throw NpzError(path + ": a directory, not a file");
  if (!std::filesystem::exists(path, status)) throw NpzError(path + ": no such file");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw NpzError(path + ": cannot open the file");
  const std::string zip((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return ParseNpz(zip, path);
}

std::vector<std::pair<std::string, std::string>> ZipMembers(std::string_view zip, const std::string& path) {
  // The end of central directory record: 22 bytes plus a comment of up to 64 KiB, at the end.
  size_t end = std::string::npos;
  for (size_t i = zip.size() >= 22 ? zip.size() - 22 : 0; zip.size() >= 22; --i) {
    if (Read32(&zip[i]) == 0x06054b50) {
      end = i;
      break;
    }
    if (i == 0 || zip.size() - i > 22 + 65535) break;
  }
  if (end == std::string::npos) throw NpzError(path + ": not a zip archive (no end of central directory)");
  const size_t count = Read16(&zip[end + 10]);
  size_t entry = Read32(&zip[end + 16]);
  std::vector<std::pair<std::string, std::string>> members;
  for (size_t m = 0; m < count; ++m) {
    if (entry + 46 > zip.size() || Read32(&zip[entry]) != 0x02014b50) throw NpzError(path + ": truncated central directory");
    const uint16_t method = Read16(&zip[entry + 10]);
    const uint32_t crc = Read32(&zip[entry + 16]);
    const size_t packed = Read32(&zip[entry + 20]), unpacked = Read32(&zip[entry + 24]);
    const size_t name_length = Read16(&zip[entry + 28]);
    const size_t extra = Read16(&zip[entry + 30]), comment = Read16(&zip[entry + 32]);
    const size_t local = Read32(&zip[entry + 42]);
    if (entry + 46 + name_length + extra + comment > zip.size()) throw NpzError(path + ": truncated central directory");
    const std::string name(&zip[entry + 46], name_length);
    const std::string where = path + ": " + name + ": ";
    if (packed == 0xffffffff || unpacked == 0xffffffff || local == 0xffffffff) {
      throw NpzError(where + "zip64 members (over 4 GiB) are not supported");
    }
    if (local + 30 > zip.size() || Read32(&zip[local]) != 0x04034b50) throw NpzError(where + "bad local header");
    const size_t data = local + 30 + Read16(&zip[local + 26]) + Read16(&zip[local + 28]);
    if (data + packed > zip.size()) throw NpzError(where + "member runs past the end of the file (truncated?)");
    std::string bytes;
    if (method == 0) {
      if (packed != unpacked) throw NpzError(where + "stored member with two sizes");
      bytes.assign(&zip[data], packed);
    } else if (method == 8) {
      bytes = Inflate(where, &zip[data], packed, unpacked);
    } else {
      throw NpzError(where + "compression method " + std::to_string(method) + " (only stored and deflate)");
    }
    if (crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())) != crc) {
      throw NpzError(where + "CRC mismatch (the file is damaged)");
    }
    members.emplace_back(name, std::move(bytes));
    entry += 46 + name_length + extra + comment;
  }
  return members;
}

std::map<std::string, Array> ParseNpz(std::string_view zip, const std::string& path) {
  std::map<std::string, Array> arrays;
  for (const auto& [name, bytes] : ZipMembers(zip, path)) {
    const std::string array_name = name.size() > 4 && name.substr(name.size() - 4) == ".npy"
                                       ? name.substr(0, name.size() - 4) : name;
    arrays[array_name] = ParseNpy(path, name, bytes);
  }
  return arrays;
}

}  // namespace tpu_graphs
