// Which XLA backend a module was compiled for, as far as the module shows it (the rule of
// tpu_graphs/hlo/module_origin.py): the models are trained on TPU measurements, so a module another
// backend compiled is ranked with one line saying so.
#ifndef TPU_GRAPHS_NATIVE_HLO_MODULE_ORIGIN_H_
#define TPU_GRAPHS_NATIVE_HLO_MODULE_ORIGIN_H_

#include <string>

#include "native/hlo/hlo_input.h"

namespace tpu_graphs {

// module_origin.backend_note: one line saying the model was trained on TPU measurements where
// the input's module was compiled for another backend (a backend's custom call, or fusions without
// a tiled layout, and no tiled layout anywhere); "" otherwise.
std::string BackendNote(const HloInput& input);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_MODULE_ORIGIN_H_
