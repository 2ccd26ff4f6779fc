// Calls a compiled model library from several threads at once, as a compiler's threads would, for
// tests/native/test_native.py's ThreadSanitizer test (the library and this program built with
// -fsanitize=thread):
//   library_threads <libtpu_graphs_model.so> <threads> <rounds> <module.pb> <num_candidates> <graph.npz>...
// Scores each graph's first configs (tpu_graphs_score_tile or tpu_graphs_score_layout, whichever the
// library exports) and ranks the module's candidates (tpu_graphs_rank_module) once on one thread;
// then <threads> threads do the same at once, <rounds> times each, every thread going through the
// graphs from its own first one (so different graphs and sizes run at the same time). Prints
// "<calls> calls from <threads> threads agreed with one thread's" or exits 3 naming the first call
// whose scores or ranking differed; exits 2 for input it cannot use.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "native/library/tpu_graphs_model.h"
#include "native/npz/npz.h"

namespace {

constexpr int64_t kTileConfigs = 200;   // over one call of 128
constexpr int64_t kLayoutConfigs = 40;  // over one call of 32

struct Library {
  decltype(&tpu_graphs_score_tile) score_tile;
  decltype(&tpu_graphs_score_layout) score_layout;
  decltype(&tpu_graphs_rank_module) rank_module;
  decltype(&tpu_graphs_free_module_ranking) free_ranking;
};

// One graph's arrays, its configs cut to the first few.
struct Graph {
  std::string path;
  tpu_graphs::Array node_feat, node_opcode, edge_index, node_config_ids;
  std::vector<float> config_feat;  // tile [c][24] or layout [c][nc][18]
  int64_t num_configs = 0;
};

Graph ReadGraph(const std::string& path, bool layout) {
  auto arrays = tpu_graphs::ReadNpz(path);
  Graph graph{path, arrays["node_feat"], arrays["node_opcode"], arrays["edge_index"], arrays["node_config_ids"]};
  const tpu_graphs::Array& configs = arrays[layout ? "node_config_feat" : "config_feat"];
  const int64_t row = configs.size() / configs.shape[0];
  graph.num_configs = std::min<int64_t>(configs.shape[0], layout ? kLayoutConfigs : kTileConfigs);
  graph.config_feat.assign(configs.values<float>(), configs.values<float>() + graph.num_configs * row);
  return graph;
}

// The scores of every config, or the refusal's message.
std::string Score(const Library& library, const Graph& graph, std::vector<float>* scores) {
  scores->assign(graph.num_configs, 0);
  char message[512] = "";
  const int64_t num_nodes = graph.node_opcode.size(), num_edges = graph.edge_index.size() / 2;
  const int status =
      library.score_tile != nullptr
          ? library.score_tile(num_nodes, graph.node_feat.values<float>(), graph.node_opcode.values<uint8_t>(), num_edges,
                               graph.edge_index.values<int64_t>(), graph.num_configs, graph.config_feat.data(),
                               scores->data(), message, sizeof message)
          : library.score_layout(num_nodes, graph.node_feat.values<float>(), graph.node_opcode.values<uint8_t>(),
                                 num_edges, graph.edge_index.values<int64_t>(), graph.node_config_ids.size(),
                                 graph.node_config_ids.values<int64_t>(), graph.num_configs, graph.config_feat.data(),
                                 scores->data(), message, sizeof message);
  return status == TPU_GRAPHS_OK ? "" : graph.path + ": " + message;
}

// What tpu_graphs_rank_module answers, as text: each graph's best configs, scores and what they set.
std::string Rank(const Library& library, const std::string& module, int64_t num_candidates) {
  tpu_graphs_module_ranking* ranking = nullptr;
  char message[512] = "";
  const int status = library.rank_module(module.data(), module.size(), num_candidates, 7, 5, nullptr, &ranking, message,
                                         sizeof message);
  if (status != TPU_GRAPHS_OK) return "status " + std::to_string(status) + ": " + message;
  std::string text;
  for (int64_t g = 0; g < ranking->num_graphs; ++g) {
    const tpu_graphs_graph_ranking& graph = ranking->graphs[g];
    text += std::string(graph.graph_id) + "\n";
    for (int64_t i = 0; i < graph.num_best; ++i) {
      char line[64];
      std::snprintf(line, sizeof line, "  %lld %.9g", static_cast<long long>(graph.best[i].config), graph.best[i].score);
      text += line;
      for (int64_t k = 0; k < graph.best[i].num_layouts; ++k) text += std::string(" ") + graph.best[i].layouts[k].instruction;
      for (int d = 0; d < graph.best[i].num_output_tile; ++d) text += " " + std::to_string(graph.best[i].output_tile[d]);
      text += "\n";
    }
  }
  library.free_ranking(ranking);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: library_threads <library.so> <threads> <rounds> <module.pb> <num_candidates> <graph.npz>...\n");
    return 2;
  }
  void* handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  Library library{reinterpret_cast<decltype(&tpu_graphs_score_tile)>(dlsym(handle, "tpu_graphs_score_tile")),
                  reinterpret_cast<decltype(&tpu_graphs_score_layout)>(dlsym(handle, "tpu_graphs_score_layout")),
                  reinterpret_cast<decltype(&tpu_graphs_rank_module)>(dlsym(handle, "tpu_graphs_rank_module")),
                  reinterpret_cast<decltype(&tpu_graphs_free_module_ranking)>(
                      dlsym(handle, "tpu_graphs_free_module_ranking"))};
  const int threads = std::atoi(argv[2]), rounds = std::atoi(argv[3]);
  std::ifstream file(argv[4], std::ios::binary);
  const std::string module{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  const int64_t num_candidates = std::atoll(argv[5]);
  std::vector<Graph> graphs;
  try {
    for (int i = 6; i < argc; ++i) graphs.push_back(ReadGraph(argv[i], library.score_layout != nullptr));
  } catch (const tpu_graphs::NpzError& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 2;
  }

  // One thread first: what every later call must answer.
  std::vector<std::vector<float>> expected(graphs.size());
  for (size_t g = 0; g < graphs.size(); ++g) {
    const std::string refused = Score(library, graphs[g], &expected[g]);
    if (!refused.empty()) {
      std::fprintf(stderr, "%s\n", refused.c_str());
      return 2;
    }
  }
  const std::string expected_ranking = Rank(library, module, num_candidates);
  if (expected_ranking.rfind("status", 0) == 0) {
    std::fprintf(stderr, "%s\n", expected_ranking.c_str());
    return 2;
  }

  std::vector<std::string> disagreements(threads);
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      std::vector<float> scores;
      for (int round = 0; round < rounds && disagreements[t].empty(); ++round) {
        for (size_t i = 0; i < graphs.size() && disagreements[t].empty(); ++i) {
          const size_t g = (t + i) % graphs.size();
          const std::string refused = Score(library, graphs[g], &scores);
          if (!refused.empty() || std::memcmp(scores.data(), expected[g].data(), sizeof(float) * scores.size()) != 0) {
            disagreements[t] = "thread " + std::to_string(t) + ", " + graphs[g].path + ": scores differ " + refused;
          }
        }
        if (disagreements[t].empty() && Rank(library, module, num_candidates) != expected_ranking) {
          disagreements[t] = "thread " + std::to_string(t) + ": the module's ranking differs";
        }
      }
    });
  }
  for (std::thread& thread : running) thread.join();
  for (const std::string& disagreement : disagreements) {
    if (!disagreement.empty()) {
      std::fprintf(stderr, "%s\n", disagreement.c_str());
      return 3;
    }
  }
  std::printf("%lld calls from %d threads agreed with one thread's\n",
              static_cast<long long>(threads) * rounds * static_cast<long long>(graphs.size() + 1), threads);
  return 0;
}
