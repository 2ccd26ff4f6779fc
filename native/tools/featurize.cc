// Featurizes an XLA module or TpuGraphs tuning data into TpuGraphs npz files, one per graph, named
// after it: baselines/featurize.py in C++, without Python (native/hlo).
//
//   bazel run //native:featurize -- --input=module_tuning_data.pb --output_dir=out/featurized
//   bazel run //native:featurize -- --input=module.cpu_after_optimizations.hlo.pb --kernels --output_dir=out/k
//   bazel run //native:featurize -- --input=module.hlo.pb --num_candidates=100 --seed=0 --output_dir=out/c
//
// The input is a ModuleTuningData (one layout graph; no config where nothing was measured yet), a
// TuningData (one tile graph per kernel), or an HloModuleProto or HloProto (XLA's
// --xla_dump_hlo_as_proto): the unlabelled program graph or, with --kernels, one tile graph per
// fusion. --num_candidates: candidate configs instead (tpu_graphs/hlo/candidates.py). Exit status
// 0; 1 for input that cannot be featurized or work beyond native/hlo/work_limits.h's defaults (one line naming the problem); 2 for bad flags.

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "native/hlo/candidates.h"
#include "native/hlo/featurize.h"
#include "native/hlo/hlo_error.h"
#include "native/npz/npz_writer.h"
#include "native/tools/command_line.h"
#include "native/tools/graph_arrays.h"

namespace tpu_graphs {
namespace {

void MakeDirectories(const std::string& path) {
  for (size_t slash = path.find('/', 1); ; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) throw std::runtime_error(prefix + ": cannot create it");
    if (slash == std::string::npos) return;
  }
}

int Main(int argc, char** argv) {
  Flags flags = {{"input", ""}, {"output_dir", "out/featurized"}, {"kernels", "false"}, {"num_candidates", "0"},
                 {"seed", "0"}, {"change_entry_layouts", "false"}};
  ParseFlags(argc, argv, flags);
  if (flags["input"].empty()) throw UsageError("--input is required");
  const bool kernels = BooleanFlag(flags, "kernels");
  const int64_t num_candidates = IntegerFlag(flags, "num_candidates", 0);
  const uint64_t seed = static_cast<uint64_t>(IntegerFlag(flags, "seed", 0));
  const std::string input = FromCallerDirectory(flags["input"]);
  const std::string output_dir = FromCallerDirectory(flags["output_dir"]);
  const WorkLimits limits{};
  CheckCandidateCount(num_candidates, limits);
  const HloInput parsed = ParseHloInput(ReadHloFile(input, limits), input);
  const std::vector<Graph> graphs = num_candidates > 0 ? CandidateGraphsOfInput(parsed, num_candidates, kernels, seed, limits,
                                                                                BooleanFlag(flags, "change_entry_layouts"))
                                                       : GraphsOfInput(parsed, kernels);
  MakeDirectories(output_dir);
  for (const Graph& graph : graphs) {
    std::string name = graph.graph_id;
    for (char& c : name) c = c == '/' ? '_' : c;
    const std::string path = output_dir + "/" + name + ".npz";
    WriteNpz(path, GraphArrays(graph));
    std::printf("%s  %s  nodes=%lld  edges=%lld  configs=%lld%s\n", path.c_str(), graph.collection.c_str(),
                static_cast<long long>(graph.num_nodes()), static_cast<long long>(graph.num_edges()),
                static_cast<long long>(graph.num_configs),
                graph.num_configs ? "" : " (nothing measured yet: rank its candidates, --num_candidates)");
  }
  return 0;
}

}  // namespace
}  // namespace tpu_graphs

int main(int argc, char** argv) {
  return tpu_graphs::RunProgram("featurize", "featurize --input=<.pb> [--output_dir=<dir>] [--kernels] "
                                "[--num_candidates=N] [--seed=S] [--change_entry_layouts]", tpu_graphs::Main, argc, argv);
}
