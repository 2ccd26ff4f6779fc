// The configurations XLA's autotuners would try for a program, as tpu_graphs/hlo/candidates.py
// draws them (same candidates, same seed -> same configs): candidate layouts of a program's
// convolutions, dots and reshapes, and candidate tile sizes of each fused kernel.
#ifndef TPU_GRAPHS_NATIVE_HLO_CANDIDATES_H_
#define TPU_GRAPHS_NATIVE_HLO_CANDIDATES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "native/hlo/graph.h"
#include "native/hlo/hlo_input.h"
#include "native/hlo/work_limits.h"
#include "xla/service/hlo.pb.h"

namespace tpu_graphs {

// candidates.program_candidates: an unlabelled layout graph of `module` whose configs are at most
// `num_candidates` combinations of its configurable ops' candidate layouts, config 0 every tensor
// at its default, the others distinct combinations drawn with `seed`. The configurable ops are
// `configurable` (node indices, e.g. a tuning data's config_index_to_node) where given, else the
// convolutions, dots and reshapes. Throws HloError naming `source` ("": the module), WorkLimitError
// where the candidates' config features would exceed `limits` (before they are drawn). A tensor
// whose layout a change may not touch (MayChange: an entry parameter's or result's unless
// `change_entry_layouts`, a constrained custom call's) keeps its own layout in every config.
Graph ProgramCandidates(const xla::HloModuleProto& module, int64_t num_candidates, uint64_t seed,
                        const std::string& source, const std::optional<std::vector<int64_t>>& configurable = {},
                        const WorkLimits& limits = {}, bool change_entry_layouts = false);

// candidates.kernel_candidates: an unlabelled tile graph of one kernel module whose configs are
// its candidate tile sizes, at most `num_candidates` of them drawn with `seed`.
Graph KernelCandidates(const xla::HloModuleProto& kernel, int64_t num_candidates, uint64_t seed,
                       const std::string& source, const WorkLimits& limits = {});

// candidates.candidate_graphs_from_file: the candidate graphs of an input's module: its program's
// candidate layouts (a tuning data's configurable nodes kept) or, with `kernels`, each fusion's
// (each tuned kernel's) candidate tile sizes. WorkLimitError for more candidates than `limits`
// allow, before the module is featurized.
std::vector<Graph> CandidateGraphsOfInput(const HloInput& input, int64_t num_candidates, bool kernels, uint64_t seed,
                                          const WorkLimits& limits = {}, bool change_entry_layouts = false);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_CANDIDATES_H_
