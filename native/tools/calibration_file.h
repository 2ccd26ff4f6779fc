// The calibration.json an export holds (tpu_graphs/train/calibration.py writes it beside the
// SavedModel), read for //native:rank's predicted ratios of npz files and of --mode=capi.
#ifndef TPU_GRAPHS_NATIVE_TOOLS_CALIBRATION_FILE_H_
#define TPU_GRAPHS_NATIVE_TOOLS_CALIBRATION_FILE_H_

#include <optional>
#include <string>

#include "native/library/gain_calibration.h"

namespace tpu_graphs {

// The calibration in <export_dir>/calibration.json; none where the file is absent (an export made
// before calibrations existed) or holds none ("calibration": null: no measured validation
// runtimes). Throws std::runtime_error naming the file where it is not what calibration.py writes.
std::optional<GainCalibration> ReadGainCalibration(const std::string& export_dir);

// The calibration in the text of such a file, as ReadGainCalibration; `name` is what errors name.
std::optional<GainCalibration> ParseGainCalibration(const std::string& text, const std::string& name);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_TOOLS_CALIBRATION_FILE_H_
