#include "native/tools/calibration_file.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace tpu_graphs {
namespace {

// The position just after `"key":` in `text`; throws naming the file where it is missing.
size_t AfterKey(const std::string& text, const std::string& key, const std::string& name) {
  const std::string quoted = "\"" + key + "\"";
  const size_t found = text.find(quoted);
  const size_t colon = found == std::string::npos ? found : text.find(':', found + quoted.size());
  if (colon == std::string::npos) throw std::runtime_error(name + ": no \"" + key + "\" in the calibration");
  return colon + 1;
}

// The number at `position` (after white space), moving `position` past it.
double NumberAt(const std::string& text, size_t& position, const std::string& name) {
  const char* start = text.c_str() + position;
  char* end = nullptr;
  const double value = std::strtod(start, &end);
  if (end == start) throw std::runtime_error(name + ": a calibration value is no number");
  position += static_cast<size_t>(end - start);
  return value;
}

// The `count` numbers of the list `"key": [a, b, ...]`, into `values`.
void ListOf(const std::string& text, const std::string& key, int count, double* values, const std::string& name) {
  size_t position = text.find('[', AfterKey(text, key, name));
  if (position == std::string::npos) throw std::runtime_error(name + ": \"" + key + "\" is no list");
  ++position;
  for (int i = 0; i < count; ++i) {
    if (i > 0) {
      position = text.find(',', position);
      if (position == std::string::npos) throw std::runtime_error(name + ": \"" + key + "\" is too short");
      ++position;
    }
    values[i] = NumberAt(text, position, name);
  }
}

}  // namespace

std::optional<GainCalibration> ParseGainCalibration(const std::string& text, const std::string& name) {
  size_t position = AfterKey(text, "calibration", name);
  position = text.find_first_not_of(" \t\r\n", position);
  if (position != std::string::npos && text.compare(position, 4, "null") == 0) return std::nullopt;
  GainCalibration calibration{1, {}, {}, {}, {}};
  ListOf(text, "knots", kGainBins, calibration.knots, name);
  ListOf(text, "knot_values", kGainBins, calibration.knot_values, name);
  ListOf(text, "bin_edges", kGainBins - 1, calibration.bin_edges, name);
  ListOf(text, "half_widths", kGainBins, calibration.half_widths, name);
  return calibration;
}

std::optional<GainCalibration> ReadGainCalibration(const std::string& export_dir) {
  const std::string path = export_dir + "/calibration.json";
  std::ifstream file(path);
  if (!file) return std::nullopt;
  return ParseGainCalibration(std::string(std::istreambuf_iterator<char>(file), {}), path);
}

}  // namespace tpu_graphs
