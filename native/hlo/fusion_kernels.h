// One module per fusion of an optimized HLO module, shaped like the release's kernel modules
// (fusion_kernels.kernel_modules): the computations the fusion calls, callees first, and an entry
// computation named after the fusion holding one parameter per distinct operand and the fusion.
#ifndef TPU_GRAPHS_NATIVE_HLO_FUSION_KERNELS_H_
#define TPU_GRAPHS_NATIVE_HLO_FUSION_KERNELS_H_

#include <string>
#include <vector>

#include "xla/service/hlo.pb.h"

namespace tpu_graphs {

// The kernels of `module`'s fusions (a fusion nested in another fusion's computations belongs to
// that kernel). Throws HloError naming `source` ("" names the module) for a malformed module or
// one without fusions (not optimized).
std::vector<xla::HloModuleProto> KernelModules(const xla::HloModuleProto& module, const std::string& source);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_FUSION_KERNELS_H_
