// The 140 features of one HLO instruction, in the release's column order: the columns of
// tpu_graphs/hlo/features.py's NODE_FEATURE_GROUPS (documented in docs/features.md), computed
// from the same proto fields, to the same float32 bits.
#ifndef TPU_GRAPHS_NATIVE_HLO_NODE_FEATURES_H_
#define TPU_GRAPHS_NATIVE_HLO_NODE_FEATURES_H_

#include "xla/service/hlo.pb.h"

namespace tpu_graphs {

inline constexpr int kNodeFeatures = 140;

// Writes row[0, 140): the features of `instruction`; `is_root`: whether it is its computation's root.
void NodeFeatures(const xla::HloInstructionProto& instruction, bool is_root, float* row);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_NODE_FEATURES_H_
