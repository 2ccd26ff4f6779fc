#include "native/tools/ranking_output.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>

#include "native/hlo/layout_changes.h"

namespace tpu_graphs {
namespace {

// Instructions a console line names before it says how many more it moves.
constexpr size_t kInstructionsShown = 3;

std::string Shown(float score) {  // Python's f"{score:.4g}"
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", score);
  return text;
}

// baselines/rank.py's words where the model has no calibration (calibration.NO_CALIBRATION).
constexpr char kNoCalibration[] =
    "no predicted ratio: the model was exported without measured validation runtimes to calibrate on";

std::string Ratio(double ratio) {  // Python's f"{ratio:.3g}"
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", ratio);
  return text;
}

// What follows a best config's line: its predicted ratio to config 0 and interval, or nothing.
std::string PredictedGain(const RankedConfig& config) {
  if (!config.has_predicted_ratio) return "";
  return "; predicted " + Ratio(config.predicted_ratio) + "x config 0's runtime (80% interval " +
         Ratio(config.ratio_low) + "-" + Ratio(config.ratio_high) + ")";
}

std::string List(const std::vector<int64_t>& values) {  // Python's str(list)
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

std::string Number(double value) {
  char text[64];
  const auto result = std::to_chars(text, text + sizeof(text), value);
  return std::string(text, result.ptr);
}

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string Sets(const RankedConfig& config, bool tile) {
  const ConfigDescription& sets = config.sets;
  if (tile) {
    return "output tile " + List(sets.output_tile) + (sets.kernel_tile.empty() ? "" : "; kernel tile " +
                                                                                          List(sets.kernel_tile));
  }
  if (sets.layouts.empty()) return "keeps the module's own layouts";
  const size_t moved = sets.layouts.size();
  std::string text = "moves " + std::to_string(moved) + (moved == 1 ? " instruction: " : " instructions: ");
  for (size_t i = 0; i < moved && i < kInstructionsShown; ++i) {
    text += i ? "; " : "";
    text += sets.layouts[i].instruction;
    for (const TensorLayout& tensor : sets.layouts[i].tensors) {
      text += " " + TensorRole(tensor.tensor) + " " + List(tensor.dims);
      if (tensor.change == kEntryParameterChange || tensor.change == kEntryResultChange ||
          tensor.change == kCustomCallChange) {
        text += " (" + tensor.change + ")";
      }
    }
  }
  if (moved > kInstructionsShown) text += "; and " + std::to_string(moved - kInstructionsShown) + " more";
  return text;
}

std::string JsonOfSets(const ConfigDescription& sets, bool tile) {
  if (tile) return "\"output_tile\": " + List(sets.output_tile) + ", \"kernel_tile\": " + List(sets.kernel_tile);
  std::string text = "\"layouts\": {";
  for (size_t i = 0; i < sets.layouts.size(); ++i) {
    text += std::string(i ? "," : "") + "\n     " + JsonString(sets.layouts[i].instruction) + ": {";
    for (size_t t = 0; t < sets.layouts[i].tensors.size(); ++t) {
      const TensorLayout& tensor = sets.layouts[i].tensors[t];
      text += std::string(t ? ", " : "") + JsonString(TensorRole(tensor.tensor)) + ": {\"dims\": " +
              List(tensor.dims) + ", \"change\": " + JsonString(tensor.change) + "}";
    }
    text += "}";
  }
  return text + (sets.layouts.empty() ? "}" : "\n    }");
}

// The groups of two or more of the best configs that set the same and show the same score, in the
// order listed (baselines/rank.py's repeated_configs).
std::vector<std::vector<int64_t>> RepeatedConfigs(const GraphRanking& ranking, bool tile) {
  std::map<std::string, size_t> group_of;  // shown score and what it sets -> index in groups
  std::vector<std::vector<int64_t>> groups;
  for (const RankedConfig& config : ranking.best) {
    const auto [found, added] =
        group_of.emplace(Shown(config.score) + " " + JsonOfSets(config.sets, tile), groups.size());
    if (added) groups.emplace_back();
    groups[found->second].push_back(config.config);
  }
  groups.erase(std::remove_if(groups.begin(), groups.end(), [](const auto& group) { return group.size() < 2; }),
               groups.end());
  return groups;
}

}  // namespace

std::string RankingText(const GraphRanking& ranking) {
  const bool tile = ranking.collection.rfind("tile", 0) == 0;
  std::string text = ranking.collection + ":" + ranking.graph_id + ": " + std::to_string(ranking.num_configs) +
                     " configs, best first: ";
  for (size_t i = 0; i < ranking.best.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(ranking.best[i].config) + " (" + Shown(ranking.best[i].score) + ")";
  }
  text += "\n";
  text += "  config 0, " + ranking.reference + ", ranks " + std::to_string(ranking.reference_rank) + " of " +
          std::to_string(ranking.num_configs) + (ranking.calibrated ? "" : std::string("; ") + kNoCalibration) + "\n";
  for (const RankedConfig& config : ranking.best) {
    text += "  config " + std::to_string(config.config) + " (" + Shown(config.score) + "): " + Sets(config, tile) +
            PredictedGain(config) + "\n";
  }
  for (const std::vector<int64_t>& configs : RepeatedConfigs(ranking, tile)) {
    std::string ids;
    for (const int64_t config : configs) ids += (ids.empty() ? "" : ", ") + std::to_string(config);
    text += "  configs " + ids + " set the same and score the same: one config, listed " +
            std::to_string(configs.size()) + " times\n";
  }
  return text;
}

std::string RankingJson(const std::vector<GraphRanking>& rankings, const std::string& backend_note) {
  std::string text = "[";
  for (size_t g = 0; g < rankings.size(); ++g) {
    const GraphRanking& ranking = rankings[g];
    const bool tile = ranking.collection.rfind("tile", 0) == 0;
    text += std::string(g ? "," : "") + "\n {\n  \"id\": " + JsonString(ranking.graph_id) + ",\n  \"collection\": " +
            JsonString(ranking.collection) + ",\n  \"num_configs\": " + std::to_string(ranking.num_configs) + ",\n";
    if (!tile) text += "  \"layouts_meaning\": " + JsonString(kLayoutsMeaning) + ",\n";
    if (!backend_note.empty()) text += "  \"backend_note\": " + JsonString(backend_note) + ",\n";
    text += "  \"reference\": " + JsonString(ranking.reference) + ",\n  \"reference_rank\": " +
            std::to_string(ranking.reference_rank) + ",\n";
    if (!ranking.calibrated) text += "  \"predicted_ratio_note\": " + JsonString(kNoCalibration) + ",\n";
    text += "  \"best\": [";
    for (size_t i = 0; i < ranking.best.size(); ++i) {
      const RankedConfig& config = ranking.best[i];
      text += std::string(i ? "," : "") + "\n   {\n    \"config\": " + std::to_string(config.config) +
              ",\n    \"score\": " + Number(config.score) + ",\n    " + JsonOfSets(config.sets, tile);
      if (config.has_predicted_ratio) {
        text += ",\n    \"predicted_ratio\": " + Number(config.predicted_ratio) + ",\n    \"ratio_low\": " +
                Number(config.ratio_low) + ",\n    \"ratio_high\": " + Number(config.ratio_high);
      }
      text += "\n   }";
    }
    text += ranking.best.empty() ? "]\n }" : "\n  ]\n }";
  }
  return text + "\n]\n";
}

}  // namespace tpu_graphs
