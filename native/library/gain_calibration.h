// The predicted gain of tpu_graphs/train/calibration.py in C++: a config's runtime relative to a
// reference config (config 0) from the difference of their scores, with the interval that held
// the calibration's share of validation pairs. A model library holds its model's calibration as
// constants (tpu_graphs/export/aot/native_library.py writes TPU_GRAPHS_GAIN_CALIBRATION);
// //native:rank reads the export's calibration.json. Header-only, so both use the same arithmetic.
#ifndef TPU_GRAPHS_NATIVE_LIBRARY_GAIN_CALIBRATION_H_
#define TPU_GRAPHS_NATIVE_LIBRARY_GAIN_CALIBRATION_H_

#include <cmath>
#include <cstdint>

namespace tpu_graphs {

// calibration.NUM_BINS bins of |score difference|.
constexpr int kGainBins = 4;

// log(runtime_i / runtime_j) ≈ slope * (score_i - score_j), within ± half_widths[b] where
// |score_i - score_j| falls in bin b: bin b holds differences up to bin_edges[b], the last bin
// those beyond. fitted == 0: the model has none (no measured validation runtimes), so no ratio.
struct GainCalibration {
  int32_t fitted;
  double slope;
  double bin_edges[kGainBins - 1];
  double half_widths[kGainBins];
};

struct PredictedRatio {
  double ratio, low, high;
};

// The predicted runtime ratio of a config scoring `score` to the reference scoring
// `reference_score`, as Calibration.ratios computes it (numpy's searchsorted, side "left").
inline PredictedRatio PredictRatio(const GainCalibration& calibration, float score, float reference_score) {
  const double difference = static_cast<double>(score) - static_cast<double>(reference_score);
  const double gap = std::fabs(difference);
  int bin = 0;
  while (bin < kGainBins - 1 && calibration.bin_edges[bin] < gap) ++bin;
  const double predicted = calibration.slope * difference;
  const double half = calibration.half_widths[bin];
  return {std::exp(predicted), std::exp(predicted - half), std::exp(predicted + half)};
}

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_LIBRARY_GAIN_CALIBRATION_H_
