// The one check of an HLO module before anything reads it, as module_check.check_module makes it.
#ifndef TPU_GRAPHS_NATIVE_HLO_MODULE_CHECK_H_
#define TPU_GRAPHS_NATIVE_HLO_MODULE_CHECK_H_

#include <string>

#include "xla/service/hlo.pb.h"

namespace tpu_graphs {

// Throws HloError naming `source`, the module, the instruction and the problem where `module` is
// not well formed: no instructions, no entry computation, a root that is none of its
// computation's instructions, an instruction id used twice, a dangling operand, a call of a
// computation the module lacks, a negative dimension, a data-flow cycle (an instruction that is its
// own operand included) or computations that call each other in a cycle.
void CheckModule(const xla::HloModuleProto& module, const std::string& source);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_MODULE_CHECK_H_
