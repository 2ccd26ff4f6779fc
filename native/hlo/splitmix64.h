// The random draws of the candidate configs: Steele, Lea and Flood's SplitMix64, as
// tpu_graphs/hlo/splitmix64.py draws them, so both languages pick the same candidates for a seed.
// Draw i (counting from 1) is Mix(seed + i * 0x9E3779B97F4A7C15 mod 2^64).
#ifndef TPU_GRAPHS_NATIVE_HLO_SPLITMIX64_H_
#define TPU_GRAPHS_NATIVE_HLO_SPLITMIX64_H_

#include <cstdint>

namespace tpu_graphs {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // A double in [0, 1): the draw's 53 high bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // An integer in [0, high) for 0 < high <= 2^32: floor(Uniform() * high).
  int64_t Below(int64_t high) { return static_cast<int64_t>(Uniform() * static_cast<double>(high)); }

 private:
  uint64_t state_;
};

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_SPLITMIX64_H_
