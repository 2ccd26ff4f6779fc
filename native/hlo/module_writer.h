// The module written back (tpu_graphs/hlo/module_writer.py): a layout candidate applied to the
// module it was drawn for, each tensor's listed minor-most dims completed to a full minor_to_major
// order (the listed dims, then the others in the tensor's own order), results set on their
// instructions, an operand read in another layout than its producer's through an inserted copy.
// The same bytes as the Python writer's (docs/compiler.md#the-module-written-back).
#ifndef TPU_GRAPHS_NATIVE_HLO_MODULE_WRITER_H_
#define TPU_GRAPHS_NATIVE_HLO_MODULE_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "native/hlo/hlo_input.h"
#include "native/hlo/work_limits.h"
#include "xla/service/hlo.pb.h"

namespace tpu_graphs {

// What a tile config's caller is told: a module carries no tile sizes (module_writer.TILE_SIZES_NOT_WRITTEN).
extern const char kTileSizesNotWritten[];

// --write_module's refusals (module_writer.NEEDS_CANDIDATES, NEEDS_A_MODULE).
extern const char kWriteModuleNeedsCandidates[];
extern const char kWriteModuleNeedsAModule[];

// What rank prints after writing the module (module_writer.written_line).
std::string WrittenLine(const std::string& path, int64_t config, int64_t num_copies);

// module_writer.full_order: the listed minor-most dims, then the other dims of `current` in order.
std::vector<int64_t> FullOrder(const std::vector<int64_t>& listed, const std::vector<int64_t>& current);

// module_writer.apply_layout_config: `module` with the layout config `node_config_feat` ([nc][18])
// of the configurable nodes `node_config_ids` (node i: the module's i-th instruction) applied;
// *num_copies: the copies it inserted. Throws HloError naming `source` for a node outside the
// module, a layout value that is no dim of its tensor, or no id left for a copy.
xla::HloModuleProto ApplyLayoutConfig(const xla::HloModuleProto& module, const std::vector<int64_t>& node_config_ids,
                                      const float* node_config_feat, const std::string& source, int64_t* num_copies);

struct WrittenModule {
  std::string bytes;      // serialized deterministically, in the wrapper the input came in
  int64_t num_copies = 0; // copies inserted for operands read in another layout
};

// module_writer.written_module: candidate `config` of the input's layout candidates (drawn as
// CandidateGraphsOfInput draws them) applied; an HloModuleProto in gives one out, an HloProto an
// HloProto (its module alone), a ModuleTuningData its module. Throws HloError for a TuningData
// (kTileSizesNotWritten) or a config outside the candidates, WorkLimitError beyond `limits`.
WrittenModule WriteModule(const HloInput& input, int64_t num_candidates, uint64_t seed, int64_t config,
                          const WorkLimits& limits = {}, bool change_entry_layouts = false);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_MODULE_WRITER_H_
