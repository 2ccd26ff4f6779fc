#include "native/hlo/opcodes.h"

#include <string_view>
#include <unordered_map>

namespace tpu_graphs {
namespace {

// Opcode names in id order; id 0 is reserved for unknown opcodes. "trace" (97) and
// "tuple-select" (101) are opcodes XLA has removed; their ids stay reserved.
constexpr const char* kOpcodesById[] = {
    nullptr, "abs", "add", "add-dependency", "after-all", "all-reduce", "all-to-all", "atan2",
    "batch-norm-grad", "batch-norm-inference", "batch-norm-training", "bitcast", "bitcast-convert",
    "broadcast", "call", "ceil", "cholesky", "clamp", "collective-permute", "count-leading-zeros", "compare",
    "complex", "concatenate", "conditional", "constant", "convert", "convolution", "copy", "copy-done",
    "copy-start", "cosine", "custom-call", "divide", "domain", "dot", "dynamic-slice", "dynamic-update-slice",
    "exponential", "exponential-minus-one", "fft", "floor", "fusion", "gather", "get-dimension-size",
    "set-dimension-size", "get-tuple-element", "imag", "infeed", "iota", "is-finite", "log", "log-plus-one",
    "and", "not", "or", "xor", "map", "maximum", "minimum", "multiply", "negate", "outfeed", "pad",
    "parameter", "partition-id", "popcnt", "power", "real", "recv", "recv-done", "reduce", "reduce-precision",
    "reduce-window", "remainder", "replica-id", "reshape", "reverse", "rng", "rng-get-and-update-state",
    "rng-bit-generator", "round-nearest-afz", "rsqrt", "scatter", "select", "select-and-scatter", "send",
    "send-done", "shift-left", "shift-right-arithmetic", "shift-right-logical", "sign", "sine", "slice",
    "sort", "sqrt", "subtract", "tanh", "trace", "transpose", "triangular-solve", "tuple", "tuple-select",
    "while", "cbrt", "all-gather", "collective-permute-start", "collective-permute-done", "logistic",
    "dynamic-reshape", "all-reduce-start", "all-reduce-done", "reduce-scatter", "all-gather-start",
    "all-gather-done", "opt-barrier", "async-start", "async-update", "async-done", "round-nearest-even",
    "stochastic-convert", "tan"};

}  // namespace

int OpcodeId(const std::string& opcode) {
  static const auto* const ids = [] {
    auto* by_name = new std::unordered_map<std::string_view, int>();
    for (int id = 0; id < static_cast<int>(sizeof(kOpcodesById) / sizeof(kOpcodesById[0])); ++id) {
      if (kOpcodesById[id] != nullptr) by_name->emplace(kOpcodesById[id], id);
    }
    return by_name;
  }();
  const auto found = ids->find(opcode);
  return found == ids->end() ? -1 : found->second;
}

}  // namespace tpu_graphs
