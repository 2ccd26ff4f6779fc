// What kind of change a layout config makes to each tensor it sets (an entry parameter's or the
// entry result's layout, a custom call's, or an internal one XLA's layout assignment chooses), and
// which kinds candidates may make: the rule of tpu_graphs/hlo/layout_changes.py.
#ifndef TPU_GRAPHS_NATIVE_HLO_LAYOUT_CHANGES_H_
#define TPU_GRAPHS_NATIVE_HLO_LAYOUT_CHANGES_H_

#include <cstdint>
#include <string>
#include <unordered_map>

#include "xla/service/hlo.pb.h"

namespace tpu_graphs {

inline constexpr char kInternalChange[] = "internal";
inline constexpr char kEntryParameterChange[] = "entry parameter";
inline constexpr char kEntryResultChange[] = "entry result";
inline constexpr char kCustomCallChange[] = "custom call";
inline constexpr char kUnknownChange[] = "unknown";  // no module known (an npz file)
inline constexpr char kKeptLayout[] = "kept";         // a described tensor left at its own layout

// layout_changes.change_kinds: instruction id -> the kind of a change to its result's layout, for
// every instruction whose kind is not internal.
std::unordered_map<int64_t, std::string> ChangeKinds(const xla::HloModuleProto& module);

// layout_changes.may_change: internal tensors; entry parameters and results too where
// `change_entry_layouts`; custom calls' never.
bool MayChange(const std::string& kind, bool change_entry_layouts);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_LAYOUT_CHANGES_H_
