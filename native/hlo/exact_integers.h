// Integers turned into float32 features exactly as the Python featurizer turns them: Python
// computes sums and products of int64 fields with unbounded integers, float() rounds the result to
// the nearest double and numpy's float32 array rounds that to the nearest float. Doing the same
// here keeps every feature bit-identical, products beyond 64 bits included.
#ifndef TPU_GRAPHS_NATIVE_HLO_EXACT_INTEGERS_H_
#define TPU_GRAPHS_NATIVE_HLO_EXACT_INTEGERS_H_

#include <cstdint>
#include <vector>

namespace tpu_graphs {

// An integer of any size: the product of int64 values, exact.
class ExactProduct {
 public:
  ExactProduct() = default;
  void MultiplyBy(int64_t factor);
  // The product rounded to the nearest double (ties to even), as Python's float(int); +-infinity
  // where Python raises OverflowError (beyond double's range).
  double ToDouble() const;

 private:
  bool negative_ = false;
  std::vector<uint32_t> magnitude_ = {1};  // little-endian base-2^32 digits
};

// Python's float(value) stored in a float32 array: nearest double, then nearest float.
inline float AsFeature(int64_t value) { return static_cast<float>(static_cast<double>(value)); }

// Python's float(math.prod(values)) (`empty` where there are none): in 128 bits where the product
// fits, else through ExactProduct.
template <class Values>
double ProductAsDouble(const Values& values, double empty) {
  if (values.empty()) return empty;
  __int128 product = 1;
  bool overflowed = false;
  for (const int64_t value : values) {
    if (__builtin_mul_overflow(product, static_cast<__int128>(value), &product)) {
      overflowed = true;
      break;
    }
  }
  if (!overflowed) return static_cast<double>(product);  // correctly rounded (libgcc's __floattidf)
  ExactProduct exact;
  for (const int64_t value : values) exact.MultiplyBy(value);
  return exact.ToDouble();
}

// Python's float(sum(values)): exact in 128 bits for any count of int64 values a proto holds.
template <class Values>
double SumAsDouble(const Values& values) {
  __int128 sum = 0;
  for (const int64_t value : values) sum += value;
  return static_cast<double>(sum);
}

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_EXACT_INTEGERS_H_
