#include "native/hlo/exact_integers.h"

#include <cmath>
#include <limits>

namespace tpu_graphs {

void ExactProduct::MultiplyBy(int64_t factor) {
  if (factor < 0) negative_ = !negative_;
  // |factor| as two base-2^32 digits; -2^63 has no int64 negation, but its uint64 one is exact.
  const uint64_t size = factor < 0 ? 0 - static_cast<uint64_t>(factor) : static_cast<uint64_t>(factor);
  const uint64_t digits[2] = {size & 0xffffffffu, size >> 32};
  std::vector<uint32_t> result(magnitude_.size() + 2, 0);
  for (size_t i = 0; i < magnitude_.size(); ++i) {
    uint64_t carry = 0;
    for (size_t j = 0; j < 2; ++j) {
      const uint64_t sum = static_cast<uint64_t>(magnitude_[i]) * digits[j] + result[i + j] + carry;
      result[i + j] = static_cast<uint32_t>(sum);
      carry = sum >> 32;
    }
    for (size_t k = i + 2; carry != 0; ++k) {
      const uint64_t sum = static_cast<uint64_t>(result[k]) + carry;
      result[k] = static_cast<uint32_t>(sum);
      carry = sum >> 32;
    }
  }
  while (result.size() > 1 && result.back() == 0) result.pop_back();
  magnitude_ = std::move(result);
}

double ExactProduct::ToDouble() const {
  // The 64 leading bits, with any bit set below them folded into the last one (a "sticky" bit):
  // 64 bits hold the 53 a double keeps, the rounding bit and more, so rounding these 64 bits
  // once gives the correctly rounded value of the whole number.
  int top = static_cast<int>(magnitude_.size()) - 1;
  const int bits = top * 32 + (magnitude_[top] == 0 ? 0 : 32 - __builtin_clz(magnitude_[top]));
  if (bits == 0) return negative_ ? -0.0 : 0.0;
  uint64_t leading = 0;
  bool sticky = false;
  const int shift = bits > 64 ? bits - 64 : 0;  // the bits below the leading 64
  for (int bit = bits - 1; bit >= 0; --bit) {
    const bool set = (magnitude_[bit / 32] >> (bit % 32)) & 1u;
    if (bit >= shift) {
      leading = (leading << 1) | (set ? 1u : 0u);
    } else if (set) {
      sticky = true;
      break;
    }
  }
  if (sticky) leading |= 1u;
  double value = std::ldexp(static_cast<double>(leading), shift);
  if (std::isinf(value)) value = std::numeric_limits<double>::infinity();
  return negative_ ? -value : value;
}

}  // namespace tpu_graphs
