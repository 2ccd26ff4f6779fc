// The dataset's opcode numbering: HLO opcode name -> the uint8 id a TpuGraphs file stores in
// node_opcode. The same frozen list as tpu_graphs/hlo/opcodes.py (tests/native/test_native_featurizer.py
// compares the two).
#ifndef TPU_GRAPHS_NATIVE_HLO_OPCODES_H_
#define TPU_GRAPHS_NATIVE_HLO_OPCODES_H_

#include <string>

namespace tpu_graphs {

// The dataset id of an HLO opcode name ("add" -> 2), or -1 for a name the numbering lacks.
int OpcodeId(const std::string& opcode);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_OPCODES_H_
