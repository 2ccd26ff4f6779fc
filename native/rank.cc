// Ranks the configs of a TpuGraphs .npz file with a trained model, without Python: the call a
// compiler makes (docs/compiler.md). Writes the JSON baselines/rank.py --json writes.
//
//   bazel run //native:rank -- --mode=aot --model=$PWD/out/tiles/export --input=kernel.npz --top=5 --json=best.json
//
// --mode=aot   the model's compiled library, <model>/native/libtpu_graphs_model.so
//              (baselines/compile_native.py), loaded with dlopen: tile models, and layout
//              models that prune their graphs (the library prunes each graph as the SavedModel does).
// --mode=capi  the SavedModel itself through TensorFlow's C API (TF_LoadSessionFromSavedModel),
//              libtensorflow_cc.so.2 of the wheel loaded with dlopen: every collection.
// --repeat=N (benchmarks/native.py) scores the file N more times and prints the median seconds
// per call and the process's peak RSS. Exit status 0; 1 for input or a model that cannot be used (one line naming the problem); 2 for
// bad flags.

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "native/npz.h"
#include "native/tensorflow_c_api.h"
#include "native/tpu_graphs_model.h"

namespace tpu_graphs {
namespace {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A graph file's arrays, checked against the shapes and dtypes of the TpuGraphs format.
struct Graph {
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

Graph ReadGraph(const std::string& path) {
  Graph graph;
  graph.arrays = ReadNpz(path);
  const auto& arrays = graph.arrays;
  graph.kind = arrays.count("config_feat") ? "tile" : arrays.count("node_config_feat") ? "layout" : "";
  if (graph.kind.empty()) {
    throw NpzError(path + ": missing key 'config_feat' (tile) or 'node_config_feat' (layout); cannot tell the collection");
  }
  graph.nodes = Expect(path, arrays, "node_feat", "<f4", {-1, 140}).shape[0];
  Expect(path, arrays, "node_opcode", "|u1", {graph.nodes});
  graph.edges = Expect(path, arrays, "edge_index", "<i8", {-1, 2}).shape[0];
  if (graph.kind == "tile") {
    graph.configs = Expect(path, arrays, "config_feat", "<f4", {-1, 24}).shape[0];
  } else {
    graph.configurable = Expect(path, arrays, "node_config_ids", "<i8", {-1}).shape[0];
    graph.configs = Expect(path, arrays, "node_config_feat", "<f4", {-1, graph.configurable, 18}).shape[0];
  }
  const size_t slash = path.rfind('/');
  graph.id = path.substr(slash == std::string::npos ? 0 : slash + 1);
  graph.id = graph.id.substr(0, graph.id.rfind('.'));
  graph.collection = CollectionOfPath(path, graph.kind);
  return graph;
}

// Scores of a graph's configs in config order; lower = predicted faster.
using Scorer = std::function<std::vector<float>(const Graph&)>;

void* OpenLibrary(const std::string& path) {
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) throw std::runtime_error(std::string("cannot load ") + path + ": " + dlerror());
  return library;
}

Scorer AotScorer(const std::string& library_path) {
  void* library = OpenLibrary(library_path);
  auto* score_tile = reinterpret_cast<decltype(&tpu_graphs_score_tile)>(dlsym(library, "tpu_graphs_score_tile"));
  auto* score_layout = reinterpret_cast<decltype(&tpu_graphs_score_layout)>(dlsym(library, "tpu_graphs_score_layout"));
  if (score_tile == nullptr && score_layout == nullptr) {
    throw std::runtime_error(library_path + ": no tpu_graphs_score_tile or tpu_graphs_score_layout (not a model library)");
  }
  return [score_tile, score_layout](const Graph& graph) {
    const bool tile = graph.kind == "tile";
    if (tile ? score_tile == nullptr : score_layout == nullptr) {
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
        ? score_tile(graph.nodes, node_feat, node_opcode, graph.edges, edge_index, graph.configs,
                     arrays.at("config_feat").values<float>(), scores.data(), message, sizeof(message))
        : score_layout(graph.nodes, node_feat, node_opcode, graph.edges, edge_index, graph.configurable,
                       arrays.at("node_config_ids").values<int64_t>(), graph.configs,
                       arrays.at("node_config_feat").values<float>(), scores.data(), message, sizeof(message));
    if (status != TPU_GRAPHS_OK) {
      throw std::runtime_error(graph.id + ": the model refused it (status " + std::to_string(status) + "): " + message);
    }
    return scores;
  };
}

Scorer CapiScorer(const std::string& tensorflow_library, const std::string& export_dir, int64_t configs_per_call) {
  setenv("TF_CPP_MIN_LOG_LEVEL", "3", /*overwrite=*/0);  // TensorFlow's start-up log, unless asked for
  auto model = std::make_shared<SavedModelSession>(OpenLibrary(tensorflow_library), export_dir);
  return [model, configs_per_call](const Graph& graph) {
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

std::string Number(double value) {
  char text[64];
  const auto result = std::to_chars(text, text + sizeof(text), value);
  return std::string(text, result.ptr);
}

std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// A path relative to where `bazel run` was started (it runs the binary in its runfiles).
std::string FromCallerDirectory(const std::string& path) {
  const char* caller = getenv("BUILD_WORKING_DIRECTORY");
  return path.empty() || path[0] == '/' || caller == nullptr ? path : std::string(caller) + "/" + path;
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

int Main(int argc, char** argv) {
  std::map<std::string, std::string> flags = {{"mode", ""}, {"model", ""}, {"input", ""}, {"top", "5"}, {"json", ""},
                                               {"library", ""}, {"tensorflow_library", ""}, {"configs_per_call", "2048"},
                                               {"repeat", "0"}};
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    const size_t equals = argument.find('=');
    const std::string name = argument.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    if (argument.rfind("--", 0) != 0 || equals == std::string::npos || !flags.count(name)) {
      throw UsageError("unknown argument '" + argument + "'");
    }
    flags[name] = argument.substr(equals + 1);
  }
  if (flags["mode"] != "aot" && flags["mode"] != "capi") throw UsageError("--mode must be aot or capi");
  if (flags["model"].empty() || flags["input"].empty()) throw UsageError("--model and --input are required");
  int64_t top = 0, configs_per_call = 0, repeat = 0;
  for (auto [name, value] : {std::pair<const char*, int64_t*>{"top", &top}, {"configs_per_call", &configs_per_call},
                             {"repeat", &repeat}}) {
    const std::string& text = flags[name];
    const int64_t least = value == &repeat ? 0 : 1;
    if (std::from_chars(text.data(), text.data() + text.size(), *value).ptr != text.data() + text.size() || *value < least) {
      throw UsageError(std::string("--") + name + " must be an integer >= " + std::to_string(least));
    }
  }
  const std::string model = FromCallerDirectory(flags["model"]);
  const Scorer score = flags["mode"] == "aot"
      ? AotScorer(flags["library"].empty() ? model + "/native/libtpu_graphs_model.so" : FromCallerDirectory(flags["library"]))
      : CapiScorer(flags["tensorflow_library"].empty() ? DefaultTensorflowLibrary()
                                                       : FromCallerDirectory(flags["tensorflow_library"]),
                   model, configs_per_call);
  const Graph graph = ReadGraph(FromCallerDirectory(flags["input"]));
  const std::vector<float> scores = score(graph);
  if (repeat > 0) {
    std::vector<double> seconds;
    for (int64_t i = 0; i < repeat; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const bool same = score(graph) == scores;
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (!same) throw std::runtime_error("two calls on the same file scored differently");
    }
    std::nth_element(seconds.begin(), seconds.begin() + repeat / 2, seconds.end());
    std::printf("median call: %.9f s (%lld calls)\n", seconds[repeat / 2], static_cast<long long>(repeat));
    std::ifstream status("/proc/self/status");  // VmHWM: this process's peak resident set
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("VmHWM:", 0) == 0) std::printf("peak RSS: %s\n", line.substr(6).c_str());
    }
  }
  std::vector<int64_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return scores[a] < scores[b]; });
  order.resize(std::min<size_t>(order.size(), top));
  std::string line = graph.collection + ":" + graph.id + ": " + std::to_string(scores.size()) + " configs, best first: ";
  std::string best;
  for (size_t i = 0; i < order.size(); ++i) {
    char shown[32];
    std::snprintf(shown, sizeof(shown), "%.4g", scores[order[i]]);
    line += (i ? ", " : "") + std::to_string(order[i]) + " (" + shown + ")";
    best += std::string(i ? ",\n" : "") + "   {\n    \"config\": " + std::to_string(order[i]) + ",\n    \"score\": " +
            Number(scores[order[i]]) + "\n   }";
  }
  std::printf("%s\n", line.c_str());
  if (!flags["json"].empty()) {
    const std::string path = FromCallerDirectory(flags["json"]);
    const std::string text = "[\n {\n  \"id\": " + Quoted(graph.id) + ",\n  \"collection\": " + Quoted(graph.collection) +
                             ",\n  \"num_configs\": " + std::to_string(scores.size()) + ",\n  \"best\": [" +
                             (best.empty() ? "]" : "\n" + best + "\n  ]") + "\n }\n]\n";
    const std::string temporary = path + ".tmp";
    std::ofstream(temporary) << text;
    if (std::rename(temporary.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot write " + path);
    std::printf("wrote %s\n", path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace tpu_graphs

int main(int argc, char** argv) {
  try {
    return tpu_graphs::Main(argc, argv);
  } catch (const tpu_graphs::UsageError& error) {
    std::fprintf(stderr, "rank: %s\nusage: rank --mode=aot|capi --model=<export dir> --input=<npz> [--top=K] "
                 "[--json=<file>] [--library=<.so>] [--tensorflow_library=<.so>] [--configs_per_call=N] [--repeat=N]\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "rank: error: %s\n", error.what());
    return 1;
  }
}
