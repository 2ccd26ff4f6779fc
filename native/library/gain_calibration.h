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
constexpr int kGainBins = 8;

// log(runtime_i / runtime_j) ≈ sign(d) * f(|d|), d = score_i - score_j, f piecewise linear through
// (0, 0) and (knots[k], knot_values[k]), knot_values[last] beyond the last knot; within
// ± half_widths[b] where |d| falls in bin b: bin b holds |d| up to bin_edges[b], the last bin those
// beyond. fitted == 0: the model has none (no measured validation runtimes), so no ratio.
struct GainCalibration {
  int32_t fitted;
  double knots[kGainBins];
  double knot_values[kGainBins];
  double bin_edges[kGainBins - 1];
  double half_widths[kGainBins];
};

// f(gap) of calibration.interpolate: np.interp through (0, 0) and the knots, step for step.
inline double InterpolateGain(const GainCalibration& calibration, double gap) {
  double x0 = 0.0, y0 = 0.0;  // the last point at or left of gap (numpy's searchsorted, side "right")
  int next = 0;
  while (next < kGainBins && calibration.knots[next] <= gap) {
    x0 = calibration.knots[next];
    y0 = calibration.knot_values[next];
    ++next;
  }
  if (next == kGainBins) return calibration.knot_values[kGainBins - 1];
  const double span = calibration.knots[next] - x0;
  const double step = span > 0.0 ? (gap - x0) / span : 0.0;
  return y0 + step * (calibration.knot_values[next] - y0);
}

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
  const double sign = difference > 0.0 ? 1.0 : difference < 0.0 ? -1.0 : 0.0;  // numpy's sign
  const double predicted = sign * InterpolateGain(calibration, gap);
  const double half = calibration.half_widths[bin];
  return {std::exp(predicted), std::exp(predicted - half), std::exp(predicted + half)};
}

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_LIBRARY_GAIN_CALIBRATION_H_
