"""The dataset's opcode numbering: HLO opcode name <-> the uint8 id stored in `node_opcode`.

The release numbers opcodes with its own frozen list (id 0 reserved for unknown, two ids retired),
not with whatever order XLA's HloOpcode enum has today, so a model trained on the release reads
new graphs the same way. The ids below are that list; parity with the release's npz files is
checked in tests/hlo/test_featurize.py.
"""

from __future__ import annotations

# Opcode name -> dataset id, in id order. 97 ('trace') and 101 ('tuple-select') are opcodes XLA
# has removed; their ids stay reserved.
OPCODE_IDS: dict[str, int] = {
    name: number for number, name in enumerate((
        None, "abs", "add", "add-dependency", "after-all", "all-reduce", "all-to-all", "atan2",
        "batch-norm-grad", "batch-norm-inference", "batch-norm-training", "bitcast",
        "bitcast-convert", "broadcast", "call", "ceil", "cholesky", "clamp", "collective-permute",
        "count-leading-zeros", "compare", "complex", "concatenate", "conditional", "constant",
        "convert", "convolution", "copy", "copy-done", "copy-start", "cosine", "custom-call",
        "divide", "domain", "dot", "dynamic-slice", "dynamic-update-slice", "exponential",
        "exponential-minus-one", "fft", "floor", "fusion", "gather", "get-dimension-size",
        "set-dimension-size", "get-tuple-element", "imag", "infeed", "iota", "is-finite", "log",
        "log-plus-one", "and", "not", "or", "xor", "map", "maximum", "minimum", "multiply",
        "negate", "outfeed", "pad", "parameter", "partition-id", "popcnt", "power", "real",
        "recv", "recv-done", "reduce", "reduce-precision", "reduce-window", "remainder",
        "replica-id", "reshape", "reverse", "rng", "rng-get-and-update-state",
        "rng-bit-generator", "round-nearest-afz", "rsqrt", "scatter", "select",
        "select-and-scatter", "send", "send-done", "shift-left", "shift-right-arithmetic",
        "shift-right-logical", "sign", "sine", "slice", "sort", "sqrt", "subtract", "tanh",
        "trace", "transpose", "triangular-solve", "tuple", "tuple-select", "while", "cbrt",
        "all-gather", "collective-permute-start", "collective-permute-done", "logistic",
        "dynamic-reshape", "all-reduce-start", "all-reduce-done", "reduce-scatter",
        "all-gather-start", "all-gather-done", "opt-barrier", "async-start", "async-update",
        "async-done", "round-nearest-even", "stochastic-convert", "tan"))
    if name is not None
}
RETIRED_OPCODES = frozenset({"trace", "tuple-select"})
OPCODE_NAMES: dict[int, str] = {number: name for name, number in OPCODE_IDS.items()}
