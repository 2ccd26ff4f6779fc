// The values a fuzz target draws from libFuzzer's bytes, front to back: little-endian integers and
// floats as they lie, so any bit pattern (NaN, infinity, a negative or huge count, an id out of
// range) can be drawn; past the end every draw is 0. benchmarks/fuzz.py writes seeds in this
// layout from real files.
#ifndef TPU_GRAPHS_NATIVE_FUZZ_FUZZ_INPUT_H_
#define TPU_GRAPHS_NATIVE_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace tpu_graphs_fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  template <class T>
  T Draw() {
    T value{};
    const size_t count = sizeof(T) < size_ - used_ ? sizeof(T) : size_ - used_;
    if (count > 0) std::memcpy(&value, data_ + used_, count);
    used_ += count;
    return value;
  }

  // `count` values, as many as the bytes left hold, the rest 0.
  template <class T>
  std::vector<T> DrawArray(size_t count) {
    std::vector<T> values(count);
    const size_t bytes = count * sizeof(T) < size_ - used_ ? count * sizeof(T) : size_ - used_;
    if (bytes > 0) std::memcpy(values.data(), data_ + used_, bytes);
    used_ += bytes;
    return values;
  }

  // The bytes not drawn yet.
  std::string_view Rest() {
    const std::string_view rest(reinterpret_cast<const char*>(data_) + used_, size_ - used_);
    used_ = size_;
    return rest;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t used_ = 0;
};

// A count as a fuzz target passes it to an entry point whose arrays hold `count` rows of
// `row_bytes`: negative counts and counts no array could hold (over PTRDIFF_MAX bytes) as drawn,
// for the entry point to refuse without reading; others folded into [0, cap] so that the target
// can allocate their arrays.
inline int64_t FoldedCount(int64_t count, int64_t cap, int64_t row_bytes) {
  if (count < 0 || count > PTRDIFF_MAX / row_bytes) return count;
  return count % (cap + 1);
}

// Whether FoldedCount gave a count whose arrays the target allocates.
inline bool Allocatable(int64_t count, int64_t cap) { return count >= 0 && count <= cap; }

}  // namespace tpu_graphs_fuzz

#endif  // TPU_GRAPHS_NATIVE_FUZZ_FUZZ_INPUT_H_
