// Ranks the configs of a TpuGraphs .npz file, or of an XLA module, with a trained model, without
// Python: the call a compiler makes (docs/compiler.md). Prints and writes what baselines/rank.py
// prints and writes (--json), each best config with what it sets.
//
//   bazel run //native:rank -- --mode=aot --model=$PWD/out/tiles/export --input=kernel.npz --top=5 --json=best.json
//   bazel run //native:rank -- --mode=aot --model=$PWD/out/layout/export --hlo=module.pb --num_candidates=100
//   bazel run //native:rank -- --mode=aot --model=$PWD/out/tiles/export --hlo=opt.pb --kernels --num_candidates=50
//
// --mode=aot   (the default) the model's compiled library, <model>/native/libtpu_graphs_model.so
//              (tpu_graphs/export/aot/native_library.py), loaded with dlopen: tile models, and layout
//              models that prune their graphs (the library prunes each graph as the SavedModel
//              does). With --hlo, one call of the library's tpu_graphs_rank_module.
// --mode=capi  the SavedModel itself through TensorFlow's C API (TF_LoadSessionFromSavedModel),
//              libtensorflow_cc.so.2 of the wheel loaded with dlopen: every collection; an --hlo
//              module is featurized here (native/hlo).
// --input=<npz> a TpuGraphs file; --hlo=<pb> an HloModuleProto, HloProto (XLA's
//              --xla_dump_hlo_as_proto) or tuning data: its program's layout configs or, with
//              --kernels, its fusions' tile configs; --num_candidates=N: N candidate configs drawn
//              with --seed (tpu_graphs/hlo/candidates.py) instead of the ones it holds.
// --change_entry_layouts: candidates may change the layouts of the entry computation's parameters
//              and result (kept by default: native/hlo/layout_changes.h).
// --max_candidates, --max_module_bytes, --max_config_bytes: the work an --hlo module may take on
//              (native/hlo/work_limits.h; the defaults of tpu_graphs_rank_options); beyond them it
//              is refused in one line before anything large is allocated.
// --write_module=<pb> also writes the --hlo module back with its best candidate layout config
//              applied (native/hlo/module_writer.h), in the wrapper it came in: the bytes
//              baselines/rank.py --write_module writes; needs --num_candidates, not --kernels.
// --repeat=N (benchmarks/native.py) ranks N more times and prints the median seconds per call
// (with --hlo: also of featurizing in this process) and the process's peak RSS. Exit status 0; 1
// for input or a model that cannot be used (one line naming the problem); 2 for bad flags.

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "native/hlo/descriptions.h"
#include "native/hlo/hlo_input.h"
#include "native/hlo/module_origin.h"
#include "native/hlo/module_ranking.h"
#include "native/hlo/module_writer.h"
#include "native/library/gain_calibration.h"
#include "native/library/tpu_graphs_model.h"
#include "native/npz/npz.h"
#include "native/tools/calibration_file.h"
#include "native/tools/command_line.h"
#include "native/tools/graph_arrays.h"
#include "native/tools/ranking_output.h"
#include "native/tools/tensorflow_c_api.h"

namespace tpu_graphs {
namespace {

// A graph file's arrays, checked against the shapes and dtypes of the TpuGraphs format.
struct GraphFile {
  std::string id, collection, kind;  // kind: "tile" or "layout"
  std::map<std::string, Array> arrays;
  int64_t nodes = 0, edges = 0, configs = 0, configurable = 0;
};

const Array& Expect(const std::string& path, const std::map<std::string, Array>& arrays, const std::string& name,
                    const std::string& dtype, std::vector<int64_t> shape) {
  const auto found = arrays.find(name);
  if (found == arrays.end()) throw NpzError(path + ": missing key '" + name + "'");
  const Array& array = found->second;
  bool same = array.shape.size() == shape.size();
  for (size_t i = 0; same && i < shape.size(); ++i) same = shape[i] < 0 || shape[i] == array.shape[i];
  if (array.dtype != dtype || !same) {
    std::string want;
    for (int64_t d : shape) want += (want.empty() ? "" : ", ") + (d < 0 ? std::string("?") : std::to_string(d));
    throw NpzError(path + ": '" + name + "' must be " + dtype + " of shape (" + want + "), got " + array.dtype + " of rank " +
                   std::to_string(array.shape.size()));
  }
  return array;
}

// The collection named by the folders of the path (.../tile/xla/test/x.npz: "tile:xla"), as
// tpu_graphs.data.npz.infer_collection_and_split reads it.
std::string CollectionOfPath(const std::string& path, const std::string& kind) {
  std::vector<std::string> folders;
  for (size_t start = 0, end; (end = path.find('/', start)) != std::string::npos; start = end + 1) {
    folders.push_back(path.substr(start, end - start));
  }
  for (size_t i = folders.size(); i-- > 0;) {
    const size_t names = folders[i] == "tile" ? 1 : folders[i] == "layout" ? 2 : 0;
    if (names > 0 && i + names < folders.size()) {
      std::string collection = folders[i];
      for (size_t j = 1; j <= names; ++j) collection += ":" + folders[i + j];
      return collection;
    }
  }
  return kind;
}

// Checks the arrays of a graph file and counts what they hold.
GraphFile CheckedGraph(const std::string& path, std::map<std::string, Array> arrays) {
  GraphFile graph;
  graph.arrays = std::move(arrays);
  const auto& held = graph.arrays;
  graph.kind = held.count("config_feat") ? "tile" : held.count("node_config_feat") ? "layout" : "";
  if (graph.kind.empty()) {
    throw NpzError(path + ": missing key 'config_feat' (tile) or 'node_config_feat' (layout); cannot tell the collection");
  }
  graph.nodes = Expect(path, held, "node_feat", "<f4", {-1, 140}).shape[0];
  Expect(path, held, "node_opcode", "|u1", {graph.nodes});
  graph.edges = Expect(path, held, "edge_index", "<i8", {-1, 2}).shape[0];
  if (graph.kind == "tile") {
    graph.configs = Expect(path, held, "config_feat", "<f4", {-1, 24}).shape[0];
  } else {
    graph.configurable = Expect(path, held, "node_config_ids", "<i8", {-1}).shape[0];
    graph.configs = Expect(path, held, "node_config_feat", "<f4", {-1, graph.configurable, 18}).shape[0];
  }
  return graph;
}

// The file's arrays; an error saying where a module or tuning data goes for a file that is no zip archive.
std::map<std::string, Array> ReadNpzInput(const std::string& path) {
  try {
    return ReadNpz(path);
  } catch (const NpzError&) {
    std::error_code status;
    if (!std::filesystem::is_regular_file(path, status)) throw;  // a directory, a missing file: said as it is
    std::ifstream file(path, std::ios::binary);
    char magic[2] = {};
    if (file.read(magic, 2) && std::memcmp(magic, "PK", 2) == 0) throw;
    throw NpzError(path + ": not an npz file (a zip archive of .npy arrays); an XLA module or tuning data (.pb) "
                   "goes to --hlo=" + path);
  }
}

GraphFile ReadGraph(const std::string& path) {
  GraphFile graph = CheckedGraph(path, ReadNpzInput(path));
  const size_t slash = path.rfind('/');
  graph.id = path.substr(slash == std::string::npos ? 0 : slash + 1);
  graph.id = graph.id.substr(0, graph.id.rfind('.'));
  graph.collection = CollectionOfPath(path, graph.kind);
  return graph;
}

// A featurized graph's arrays, to score as a file's.
GraphFile FileOfGraph(const Graph& graph) {
  std::map<std::string, Array> arrays;
  for (auto& [name, array] : GraphArrays(graph)) arrays.emplace(name, std::move(array));
  GraphFile file = CheckedGraph(graph.graph_id, std::move(arrays));
  file.id = graph.graph_id;
  file.collection = graph.collection;
  return file;
}

// Scores of a graph's configs in config order; lower = predicted faster.
using FileScorer = std::function<std::vector<float>(const GraphFile&)>;

// dlopen of `path`; `missing` says what to do where there is no such file.
void* OpenLibrary(const std::string& path, const std::string& missing = "") {
  if (access(path.c_str(), F_OK) != 0) throw std::runtime_error(path + ": not found" + missing);
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) throw std::runtime_error(dlerror());  // "<path>: <why>"
  return library;
}

// The model library's entry points (tpu_graphs_model.h); those of the other kind are null.
struct ModelLibrary {
  decltype(&tpu_graphs_score_tile) score_tile;
  decltype(&tpu_graphs_score_layout) score_layout;
  decltype(&tpu_graphs_rank_module) rank_module;
  decltype(&tpu_graphs_free_module_ranking) free_module_ranking;
};

ModelLibrary LoadModelLibrary(const std::string& path, const std::string& missing) {
  void* library = OpenLibrary(path, missing);
  ModelLibrary functions{
      reinterpret_cast<decltype(&tpu_graphs_score_tile)>(dlsym(library, "tpu_graphs_score_tile")),
      reinterpret_cast<decltype(&tpu_graphs_score_layout)>(dlsym(library, "tpu_graphs_score_layout")),
      reinterpret_cast<decltype(&tpu_graphs_rank_module)>(dlsym(library, "tpu_graphs_rank_module")),
      reinterpret_cast<decltype(&tpu_graphs_free_module_ranking)>(dlsym(library, "tpu_graphs_free_module_ranking"))};
  if (functions.score_tile == nullptr && functions.score_layout == nullptr) {
    throw std::runtime_error(path + ": no tpu_graphs_score_tile or tpu_graphs_score_layout (not a model library)");
  }
  return functions;
}

FileScorer AotScorer(const ModelLibrary& library) {
  return [library](const GraphFile& graph) {
    const bool tile = graph.kind == "tile";
    if (tile ? library.score_tile == nullptr : library.score_layout == nullptr) {
      throw std::runtime_error(graph.id + " is a " + graph.collection + " graph; the model scores " +
                               (tile ? "layout" : "tile") + " graphs");
    }
    std::vector<float> scores(graph.configs);
    char message[512] = "";
    const auto& arrays = graph.arrays;
    const float* node_feat = arrays.at("node_feat").values<float>();
    const uint8_t* node_opcode = arrays.at("node_opcode").values<uint8_t>();
    const int64_t* edge_index = arrays.at("edge_index").values<int64_t>();
    const int status = tile
        ? library.score_tile(graph.nodes, node_feat, node_opcode, graph.edges, edge_index, graph.configs,
                             arrays.at("config_feat").values<float>(), scores.data(), message, sizeof(message))
        : library.score_layout(graph.nodes, node_feat, node_opcode, graph.edges, edge_index, graph.configurable,
                               arrays.at("node_config_ids").values<int64_t>(), graph.configs,
                               arrays.at("node_config_feat").values<float>(), scores.data(), message, sizeof(message));
    if (status != TPU_GRAPHS_OK) {
      throw std::runtime_error(graph.id + ": the model refused it (status " + std::to_string(status) + "): " + message);
    }
    return scores;
  };
}

FileScorer CapiScorer(const std::string& tensorflow_library, const std::string& export_dir, int64_t configs_per_call) {
  setenv("TF_CPP_MIN_LOG_LEVEL", "3", /*overwrite=*/0);  // TensorFlow's start-up log, unless asked for
  auto model = std::make_shared<SavedModelSession>(OpenLibrary(tensorflow_library), export_dir);
  return [model, configs_per_call](const GraphFile& graph) {
    if (graph.kind != model->kind()) {
      throw std::runtime_error(graph.id + " is a " + graph.collection + " graph; the model scores " + model->kind() +
                               " graphs");
    }
    const bool tile = graph.kind == "tile";
    const Array& configs = graph.arrays.at(tile ? "config_feat" : "node_config_feat");
    const int64_t row = configs.size() / std::max<int64_t>(graph.configs, 1);  // values per config
    std::vector<float> scores;
    for (int64_t start = 0; start < std::max<int64_t>(graph.configs, 1); start += configs_per_call) {
      const int64_t count = std::min(configs_per_call, graph.configs - start);
      std::vector<SavedModelSession::Input> inputs;
      for (const char* name : {"node_feat", "node_opcode", "edge_index", tile ? "" : "node_config_ids"}) {
        if (*name) inputs.push_back({name, &graph.arrays.at(name), 0, -1});
      }
      inputs.push_back({tile ? "config_feat" : "node_config_feat", &configs, start * row, count});
      const std::vector<float> part = model->Score(inputs);
      if (static_cast<int64_t>(part.size()) != count) throw std::runtime_error("the SavedModel returned a wrong number of scores");
      scores.insert(scores.end(), part.begin(), part.end());
    }
    return scores;
  };
}

// A graph file's best configs, each described from its features (by node index: a file names no
// instructions).
GraphRanking RankFile(const GraphFile& graph, const std::vector<float>& scores, int64_t top) {
  std::vector<int64_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return scores[a] < scores[b]; });
  order.resize(std::min<size_t>(order.size(), top));
  GraphRanking ranking{graph.id, graph.collection, static_cast<int64_t>(scores.size()), {}};
  for (const int64_t config : order) {
    if (graph.kind == "tile") {
      ranking.best.push_back({config, scores[config],
                              DescribeTileConfig(graph.arrays.at("config_feat").values<float>() + config * 24)});
    } else {
      const Array& ids = graph.arrays.at("node_config_ids");
      const std::vector<int64_t> node_config_ids(ids.values<int64_t>(), ids.values<int64_t>() + graph.configurable);
      ranking.best.push_back(
          {config, scores[config],
           DescribeLayoutConfig(graph.arrays.at("node_config_feat").values<float>() + config * graph.configurable * 18,
                                node_config_ids, {})});
    }
  }
  SetReference(scores, ranking);
  return ranking;
}

// What config 0 is, in baselines/rank.py's words (reference_name): of an npz file, of a module's candidates, or
// of the configs a module or tuning data holds.
std::string ReferenceName(bool npz, bool candidates) {
  if (candidates) return "candidate 0, the module's own configuration";
  if (npz) return "config 0 of the file (its first measured config, which need not be the module's own)";
  return "config 0 of the input (a module's own, or a tuning data's first measured run)";
}

// Each best config's predicted ratio to config 0 under `calibration` (none: no ratio).
void AddPredictedGain(const std::optional<GainCalibration>& calibration, GraphRanking& ranking) {
  ranking.calibrated = calibration.has_value();
  if (!calibration) return;
  for (RankedConfig& config : ranking.best) {
    const PredictedRatio ratio = PredictRatio(*calibration, config.score, ranking.reference_score);
    config.has_predicted_ratio = true;
    config.predicted_ratio = ratio.ratio;
    config.ratio_low = ratio.low;
    config.ratio_high = ratio.high;
  }
}

// The C ranking of tpu_graphs_rank_module, as the rankings //native:rank prints.
std::vector<GraphRanking> RankingsOf(const tpu_graphs_module_ranking& ranking) {
  std::vector<GraphRanking> rankings;
  for (int64_t g = 0; g < ranking.num_graphs; ++g) {
    const tpu_graphs_graph_ranking& graph = ranking.graphs[g];
    GraphRanking& ranked = rankings.emplace_back(GraphRanking{graph.graph_id, graph.collection, graph.num_configs, {}});
    for (int64_t i = 0; i < graph.num_best; ++i) {
      const tpu_graphs_ranked_config& best = graph.best[i];
      ConfigDescription sets;
      sets.output_tile.assign(best.output_tile, best.output_tile + best.num_output_tile);
      sets.kernel_tile.assign(best.kernel_tile, best.kernel_tile + best.num_kernel_tile);
      for (int64_t k = 0; k < best.num_layouts; ++k) {
        const tpu_graphs_tensor_layout& layout = best.layouts[k];
        if (sets.layouts.empty() || sets.layouts.back().instruction != layout.instruction) {
          sets.layouts.push_back({layout.instruction, {}});
        }
        sets.layouts.back().tensors.push_back({layout.operand + 1,
                                               std::vector<int64_t>(layout.dims, layout.dims + layout.num_dims),
                                               kLayoutChangeKinds[layout.change]});
      }
      ranked.best.push_back({best.config, best.score, std::move(sets), best.has_predicted_ratio != 0,
                             best.predicted_ratio, best.ratio_low, best.ratio_high});
    }
    ranked.reference_rank = graph.reference_rank;
    ranked.calibrated = graph.num_best > 0 && graph.best[0].has_predicted_ratio != 0;
  }
  return rankings;
}

// The median of `seconds` (reordered).
double Median(std::vector<double>& seconds) {
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2];
}

// Runs `call` `repeat` times, checking each result equals the first, and prints its median seconds.
template <class Call>
void PrintMedian(const char* what, int64_t repeat, Call call) {
  std::vector<double> seconds;
  for (int64_t i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::printf("median %s: %.9f s (%lld calls)\n", what, Median(seconds), static_cast<long long>(repeat));
}

void PrintPeakMemory() {
  std::ifstream status("/proc/self/status");  // VmHWM: this process's peak resident set
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) std::printf("peak RSS: %s\n", line.substr(6).c_str());
  }
}

// libtensorflow_cc.so.2 of the wheel, from the binary's runfiles (Bazel's data dependency).
std::string DefaultTensorflowLibrary() {
  std::vector<std::string> roots;
  if (const char* runfiles = getenv("RUNFILES_DIR")) roots.push_back(runfiles);
  char self[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length > 0) roots.push_back(std::string(self, length) + ".runfiles");
  for (const std::string& root : roots) {
    const std::string candidate = root + "/tensorflow_wheel/libtensorflow_cc.so.2";
    char resolved[PATH_MAX];
    if (realpath(candidate.c_str(), resolved) != nullptr) return resolved;  // its $ORIGIN finds the framework
  }
  return "libtensorflow_cc.so.2";
}

// The rankings of an --hlo module by the compiled library: one tpu_graphs_rank_module call.
std::vector<GraphRanking> RankModuleWithLibrary(const ModelLibrary& library, const std::string& bytes, bool kernels,
                                                int64_t num_candidates, uint64_t seed, int64_t top,
                                                const WorkLimits& limits, bool change_entry_layouts, int64_t repeat,
                                                std::string* backend_note) {
  if (library.rank_module == nullptr) {
    throw std::runtime_error("the model library has no tpu_graphs_rank_module (compiled before it had one): compile "
                             "it again with baselines/compile_native.py");
  }
  const bool tile = library.score_tile != nullptr;
  if (kernels != tile) {
    throw std::runtime_error(std::string("the model scores ") + (tile ? "tile" : "layout") + " graphs; " +
                             (tile ? "rank the tile configs of a module's fusions with --kernels"
                                   : "--kernels asks for tile configs"));
  }
  auto call = [&] {
    tpu_graphs_module_ranking* ranking = nullptr;
    char message[1024] = "";
    const tpu_graphs_rank_options options{limits.max_candidates, limits.max_module_bytes, limits.max_config_bytes,
                                          change_entry_layouts};
    const int status = library.rank_module(bytes.data(), bytes.size(), num_candidates, seed, top, &options, &ranking,
                                           message, sizeof(message));
    if (status != TPU_GRAPHS_OK) {
      throw std::runtime_error("the model library refused it (status " + std::to_string(status) + "): " + message);
    }
    std::vector<GraphRanking> rankings = RankingsOf(*ranking);
    *backend_note = ranking->backend_note == nullptr ? "" : ranking->backend_note;
    library.free_module_ranking(ranking);
    return rankings;
  };
  std::vector<GraphRanking> rankings = call();
  if (repeat > 0) PrintMedian("call", repeat, call);
  return rankings;
}

// Throws, before the model loads, where --write_module cannot write the input back (rank.py's
// refuse_writing_module_of): an npz file, tile configs, or no candidates drawn.
void RefuseWritingModule(const Flags& flags, bool kernels, int64_t num_candidates) {
  if (flags.at("write_module").empty()) return;
  if (flags.at("hlo").empty()) throw std::runtime_error(kWriteModuleNeedsAModule);
  if (kernels) throw std::runtime_error(std::string("--kernels with --write_module: ") + kTileSizesNotWritten);
  if (num_candidates == 0) throw std::runtime_error(kWriteModuleNeedsCandidates);
}

// --write_module: the module at `path` with candidate `config` applied, written atomically.
void WriteModuleOf(const std::string& path, int64_t config, const std::string& output, int64_t num_candidates,
                   uint64_t seed, const WorkLimits& limits, bool change_entry_layouts) {
  const WrittenModule written =
      WriteModule(ParseHloInput(ReadHloFile(path, limits), path), num_candidates, seed, config, limits,
                  change_entry_layouts);
  WriteFileAtomically(output, written.bytes);
  std::printf("%s\n", WrittenLine(output, config, written.num_copies).c_str());
}

int Main(int argc, char** argv) {
  Flags flags = {{"mode", "aot"}, {"model", ""}, {"input", ""}, {"hlo", ""}, {"kernels", "false"},
                 {"num_candidates", "0"}, {"seed", "0"}, {"top", "5"}, {"json", ""}, {"library", ""},
                 {"tensorflow_library", ""}, {"configs_per_call", "2048"}, {"repeat", "0"},
                 {"max_candidates", std::to_string(kDefaultMaxCandidates)},
                 {"max_module_bytes", std::to_string(kDefaultMaxModuleBytes)},
                 {"max_config_bytes", std::to_string(kDefaultMaxConfigBytes)}, {"change_entry_layouts", "false"},
                 {"write_module", ""}};
  ParseFlags(argc, argv, flags);
  if (flags["mode"] != "aot" && flags["mode"] != "capi") throw UsageError("--mode must be aot or capi");
  if (flags["model"].empty() || flags["input"].empty() == flags["hlo"].empty()) {
    throw UsageError("--model and one of --input (an npz file) and --hlo (a module) are required");
  }
  const int64_t top = IntegerFlag(flags, "top", 1), configs_per_call = IntegerFlag(flags, "configs_per_call", 1);
  const int64_t repeat = IntegerFlag(flags, "repeat", 0), num_candidates = IntegerFlag(flags, "num_candidates", 0);
  const uint64_t seed = static_cast<uint64_t>(IntegerFlag(flags, "seed", 0));
  const bool kernels = BooleanFlag(flags, "kernels"), change_entry_layouts = BooleanFlag(flags, "change_entry_layouts");
  if (flags["hlo"].empty() && (kernels || num_candidates > 0)) {
    throw UsageError("--kernels and --num_candidates are for an --hlo module");
  }
  const WorkLimits limits{IntegerFlag(flags, "max_candidates", 1), IntegerFlag(flags, "max_module_bytes", 1),
                          IntegerFlag(flags, "max_config_bytes", 1)};
  CheckCandidateCount(num_candidates, limits);  // before the model loads
  RefuseWritingModule(flags, kernels, num_candidates);
  const std::string model = FromCallerDirectory(flags["model"]);
  auto exists = [](const std::string& path) { return access(path.c_str(), F_OK) == 0; };
  if (!exists(model + "/saved_model.pb") && exists(model + "/export/saved_model.pb")) {  // as baselines/rank.py says
    throw std::runtime_error(model + ": a training run's folder; its serving model is " + model + "/export");
  }
  const bool aot = flags["mode"] == "aot";
  const ModelLibrary library =
      !aot ? ModelLibrary{}
      : flags["library"].empty()
          ? LoadModelLibrary(model + "/native/libtpu_graphs_model.so",
                             "; compile the model into it: python baselines/compile_native.py --model " + model +
                                 " (after bazel build //native:all)")
          : LoadModelLibrary(FromCallerDirectory(flags["library"]), "");
  const FileScorer score = aot ? AotScorer(library)
                               : CapiScorer(flags["tensorflow_library"].empty()
                                                ? DefaultTensorflowLibrary()
                                                : FromCallerDirectory(flags["tensorflow_library"]),
                                            model, configs_per_call);
  std::vector<GraphRanking> rankings;
  std::string backend_note;  // module_origin.h: "" for an npz file or a TPU module
  if (!flags["hlo"].empty()) {
    const std::string path = FromCallerDirectory(flags["hlo"]);
    const std::string bytes = ReadHloFile(path, limits);
    auto featurize = [&] {
      return GraphsToRank(ParseHloInput(bytes, path), kernels, num_candidates, seed, limits, change_entry_layouts);
    };
    const std::vector<Graph> graphs = featurize();  // names the file in errors, and checks it before any call
    if (repeat > 0) PrintMedian("featurize", repeat, featurize);
    if (aot) {
      rankings = RankModuleWithLibrary(library, bytes, kernels, num_candidates, seed, top, limits,
                                       change_entry_layouts, repeat, &backend_note);
    } else {
      backend_note = BackendNote(ParseHloInput(bytes, path));
      auto rank = [&] {
        std::vector<GraphRanking> ranked;
        for (const Graph& graph :
             GraphsToRank(ParseHloInput(bytes, path), kernels, num_candidates, seed, limits, change_entry_layouts)) {
          ranked.push_back(RankGraph(graph, [&](const Graph& g) { return score(FileOfGraph(g)); }, top));
        }
        return ranked;
      };
      rankings = rank();
      if (repeat > 0) PrintMedian("call", repeat, rank);
    }
  } else {
    const GraphFile graph = ReadGraph(FromCallerDirectory(flags["input"]));
    const std::vector<float> scores = score(graph);
    if (repeat > 0) {
      PrintMedian("call", repeat, [&] {
        if (score(graph) != scores) throw std::runtime_error("two calls on the same file scored differently");
      });
    }
    rankings = {RankFile(graph, scores, top)};
  }
  if (repeat > 0) PrintPeakMemory();
  if (!aot || flags["hlo"].empty()) {  // the C call gave its library's ratios; here they come from the export
    const std::optional<GainCalibration> calibration = ReadGainCalibration(model);
    for (GraphRanking& ranking : rankings) AddPredictedGain(calibration, ranking);
  }
  for (GraphRanking& ranking : rankings) ranking.reference = ReferenceName(!flags["input"].empty(), num_candidates > 0);
  if (!backend_note.empty()) std::printf("%s\n", backend_note.c_str());
  for (const GraphRanking& ranking : rankings) std::printf("%s", RankingText(ranking).c_str());
  if (!flags["hlo"].empty() && !rankings.empty() && num_candidates == 0 &&
      std::all_of(rankings.begin(), rankings.end(), [](const GraphRanking& r) { return r.num_configs == 1; })) {
    std::printf("one config to rank: the input holds only its own; --num_candidates N ranks N candidate configs "
                "drawn as XLA's autotuners would try them\n");  // baselines/rank.py's ONE_CONFIG_HINT
  }
  if (!flags["write_module"].empty()) {
    WriteModuleOf(FromCallerDirectory(flags["hlo"]), rankings.at(0).best.at(0).config,
                  FromCallerDirectory(flags["write_module"]), num_candidates, seed, limits, change_entry_layouts);
  }
  if (!flags["json"].empty()) {
    const std::string path = FromCallerDirectory(flags["json"]);
    const std::string temporary = path + ".tmp";
    std::ofstream(temporary) << RankingJson(rankings, backend_note);
    if (std::rename(temporary.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot write " + path);
    std::printf("wrote %s\n", path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace tpu_graphs

int main(int argc, char** argv) {
  return tpu_graphs::RunProgram("rank", "rank [--mode=aot|capi] --model=<export dir> (--input=<npz> | --hlo=<pb> "
                                "[--kernels] [--num_candidates=N] [--seed=S]) [--top=K] [--json=<file>] "
                                "[--library=<.so>] [--tensorflow_library=<.so>] [--configs_per_call=N] [--repeat=N] "
                                "[--max_candidates=N] [--max_module_bytes=N] [--max_config_bytes=N] [--change_entry_layouts]"
                                " [--write_module=<pb>]",
                                tpu_graphs::Main, argc, argv);
}
