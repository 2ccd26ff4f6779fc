// The error of input that cannot be featurized or ranked, with messages worded as the Python
// featurizer words them (tpu_graphs/hlo/featurize.py), so both name a problem alike.
#ifndef TPU_GRAPHS_NATIVE_HLO_HLO_ERROR_H_
#define TPU_GRAPHS_NATIVE_HLO_HLO_ERROR_H_

#include <stdexcept>
#include <string>

namespace tpu_graphs {

// A module, tuning data or graph that cannot be featurized or ranked; what() is
// "<source>: <problem>" (just the problem where the source is empty), as Python's GraphFileError.
class HloError : public std::runtime_error {
 public:
  HloError(const std::string& source, const std::string& problem)
      : std::runtime_error(source.empty() ? problem : source + ": " + problem) {}
};

// `text` as Python's repr() writes a str of printable ASCII: in single quotes, or in double quotes
// where it holds a single quote and no double quote; backslashes and the chosen quote escaped.
std::string Quoted(const std::string& text);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_HLO_HLO_ERROR_H_
