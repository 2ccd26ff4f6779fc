// The C interface of tpu_graphs_model.h over the classes saved_model_cli aot_compile_cpu wrote for
// one model per size bucket (tpu_graphs/export/aot/tile_shapes.py) and CPU level. Compiled per model
// by tpu_graphs/export/aot/native_library.py, which generates TPU_GRAPHS_BUCKETS_HEADER: it includes every
// class's header and defines TPU_GRAPHS_FOR_EACH_CPU_LEVEL(X) as X(namespace, level name) per
// level, oldest first, and per bucket, smallest first, either TPU_GRAPHS_FOR_EACH_SPLIT_BUCKET(X,
// LEVEL) as X(LEVEL::kernel, LEVEL::configs, LEVEL::join, nodes, edges, configs) (a late-join
// model: the kernel's half, the configs' half and their join, tile_shapes.py's split buckets) or
// TPU_GRAPHS_FOR_EACH_BUCKET(X, LEVEL) as X(LEVEL::class, nodes, edges, configs) (another model, one
// class). Calls run the newest level this CPU runs; a split bucket's two halves run at once, the
// configs' on the helper thread (library_threads.h: TaskBeside) where it is free.
//
// A compiled program cannot refuse its input, so the checks the SavedModel's plain signature makes
// inside its graph (saved_model.checked_arrays) happen here, before any call.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "native/library/library_checks.h"
#include "native/library/library_threads.h"
#include "native/library/rank_module.h"
#include "native/library/tpu_graphs_model.h"
#include TPU_GRAPHS_BUCKETS_HEADER

namespace {

// The model's calibration of the predicted gain (gain_calibration.h), written into
// TPU_GRAPHS_BUCKETS_HEADER by native_library.py (fitted 0 where the model has none).
constexpr tpu_graphs::GainCalibration kGainCalibration = TPU_GRAPHS_GAIN_CALIBRATION;

using tpu_graphs_library::CheckArrayLength;
using tpu_graphs_library::CheckOpsAndEdges;
using tpu_graphs_library::ChosenCpuLevel;
using tpu_graphs_library::Fail;
using tpu_graphs_library::FirstNonFinite;
using tpu_graphs_library::TaskBeside;

constexpr int64_t kNodeFeatures = 140;
constexpr int64_t kConfigFeatures = 24;
constexpr uintptr_t kAlignBytes = 64;  // what XLA's compiled programs may assume of a buffer
constexpr int64_t kAlignFloats = kAlignBytes / sizeof(float);

int CheckInput(int64_t num_nodes, const float* node_feat, const uint8_t* node_opcode, int64_t num_edges,
               const int64_t* edge_index, int64_t num_configs, const float* config_feat, const float* scores,
               char* message, size_t message_size) {
  if (num_nodes < 1) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size,
                "num_nodes is %lld: a kernel needs at least one op", static_cast<long long>(num_nodes));
  }
  if (num_edges < 0 || num_configs < 0) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "num_edges (%lld) and num_configs (%lld) must be >= 0",
                static_cast<long long>(num_edges), static_cast<long long>(num_configs));
  }
  int length = CheckArrayLength("node_feat", num_nodes, sizeof(float) * kNodeFeatures, message, message_size);
  if (length == TPU_GRAPHS_OK) length = CheckArrayLength("edge_index", num_edges, 2 * sizeof(int64_t), message, message_size);
  if (length == TPU_GRAPHS_OK) {
    length = CheckArrayLength("config_feat", num_configs, sizeof(float) * kConfigFeatures, message, message_size);
  }
  if (length != TPU_GRAPHS_OK) return length;
  if (node_feat == nullptr || node_opcode == nullptr || (num_edges > 0 && edge_index == nullptr) ||
      (num_configs > 0 && (config_feat == nullptr || scores == nullptr))) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "a null array with a positive count");
  }
  const int graph = CheckOpsAndEdges(num_nodes, node_feat, num_edges, edge_index, message, message_size);
  if (graph != TPU_GRAPHS_OK) return graph;
  const int64_t bad = FirstNonFinite(config_feat, num_configs * kConfigFeatures);
  if (bad >= 0) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "config_feat holds NaN or infinite values (config %lld, feature %lld)",
                static_cast<long long>(bad / kConfigFeatures), static_cast<long long>(bad % kConfigFeatures));
  }
  return TPU_GRAPHS_OK;
}

// Copies the kernel's arrays and counts into a program's argument buffers (a whole bucket's or a
// split bucket's kernel half); rows past the counts are left as they are.
template <class Program>
void SetKernel(Program* program, int64_t num_nodes, const float* node_feat, const uint8_t* node_opcode,
               int64_t num_edges, const int64_t* edge_index) {
  std::memcpy(program->arg_feed_node_feat_data(), node_feat, sizeof(float) * num_nodes * kNodeFeatures);
  std::memcpy(program->arg_feed_node_opcode_data(), node_opcode, num_nodes);
  if (num_edges > 0) {  // edge_index may be null without edges, and memcpy takes no null source even for 0 bytes
    std::memcpy(program->arg_feed_edge_index_data(), edge_index, sizeof(int64_t) * num_edges * 2);
  }
  *program->arg_feed_num_nodes_data() = static_cast<int32_t>(num_nodes);
  *program->arg_feed_num_edges_data() = static_cast<int32_t>(num_edges);
}

// Scores in the bucket of `Model`: the kernel's arrays are copied into the bucket's argument
// buffers once, then the configs `configs` at a time. The rows past the counts are left as they
// are: the program puts them in a filler graph component that the kernel's scores never read.
template <class Model>
int ScoreInBucket(int64_t configs, int64_t num_nodes, const float* node_feat, const uint8_t* node_opcode,
                  int64_t num_edges, const int64_t* edge_index, int64_t num_configs, const float* config_feat,
                  float* scores, char* message, size_t message_size) {
  thread_local Model model;  // one set of buffers per thread and bucket, reused between calls
  SetKernel(&model, num_nodes, node_feat, node_opcode, num_edges, edge_index);
  for (int64_t start = 0; start < num_configs; start += configs) {
    const int64_t count = num_configs - start < configs ? num_configs - start : configs;
    std::memcpy(model.arg_feed_config_feat_data(), config_feat + start * kConfigFeatures,
                sizeof(float) * count * kConfigFeatures);
    *model.arg_feed_num_configs_data() = static_cast<int32_t>(count);
    if (!model.Run()) {
      return Fail(TPU_GRAPHS_RUN_FAILED, message, message_size, "the compiled program failed: %s",
                  model.error_msg().c_str());
    }
    std::memcpy(scores + start, model.result_fetch_scores_data(), sizeof(float) * count);
  }
  return TPU_GRAPHS_OK;
}

// The configs' halves (`configs` rows of config_part each, `part` floats) of the chunks of
// `configs` configs, taking chunk numbers from `next` until none is left, into `parts` (chunk i
// at i * part), in this thread's own buffers. Returns an empty string, or why a program failed.
template <class Configs>
std::string ConfigHalves(int64_t configs, int64_t num_configs, const float* config_feat, int64_t part, float* parts,
                         std::atomic<int64_t>* next) {
  try {
    thread_local Configs program;  // one set of buffers per thread, reused between calls
    const int64_t chunks = (num_configs + configs - 1) / configs;
    for (int64_t chunk = next->fetch_add(1); chunk < chunks; chunk = next->fetch_add(1)) {
      const int64_t count = std::min(configs, num_configs - chunk * configs);
      std::memcpy(program.arg_feed_config_feat_data(), config_feat + chunk * configs * kConfigFeatures,
                  sizeof(float) * count * kConfigFeatures);
      if (!program.Run()) return program.error_msg();
      std::memcpy(parts + chunk * part, program.result_fetch_config_part_data(), sizeof(float) * part);
    }
    return "";
  } catch (const std::exception& failure) {  // std::bad_alloc of the program's buffers
    return failure.what();
  }
}

// Scores in a split bucket: the kernel's half on this thread while the helper thread computes the
// configs' halves chunk by chunk (this thread takes the chunks left when its half is done, all of
// them without a free helper), then each chunk's join here. Rows past the counts are left as they
// are: the programs mask them.
template <class Kernel, class Configs, class Join>
int ScoreInSplitBucket(int64_t configs, int64_t num_nodes, const float* node_feat, const uint8_t* node_opcode,
                       int64_t num_edges, const int64_t* edge_index, int64_t num_configs, const float* config_feat,
                       float* scores, char* message, size_t message_size) {
  if (num_configs == 0) return TPU_GRAPHS_OK;
  thread_local Kernel kernel;
  thread_local Join join;
  thread_local std::vector<float> parts;
  const int64_t part = join.arg_feed_config_part_count();
  parts.resize((num_configs + configs - 1) / configs * part + kAlignFloats);
  // The join reads each chunk's part where it lies, so each starts at XLA's alignment for buffers
  // (part is a multiple of it); the helper thread has its own `parts` and gets the pointer.
  float* const parts_data = reinterpret_cast<float*>(
      (reinterpret_cast<uintptr_t>(parts.data()) + kAlignBytes - 1) / kAlignBytes * kAlignBytes);
  std::atomic<int64_t> next{0};
  std::string helper_error;
  TaskBeside beside([&, parts_data] {
    helper_error = ConfigHalves<Configs>(configs, num_configs, config_feat, part, parts_data, &next);
  });
  SetKernel(&kernel, num_nodes, node_feat, node_opcode, num_edges, edge_index);
  const bool kernel_ran = kernel.Run();
  const std::string own_error = ConfigHalves<Configs>(configs, num_configs, config_feat, part, parts_data, &next);
  beside.Wait();
  const std::string& error = !kernel_ran ? kernel.error_msg() : !own_error.empty() ? own_error : helper_error;
  if (!error.empty()) {
    return Fail(TPU_GRAPHS_RUN_FAILED, message, message_size, "the compiled program failed: %s", error.c_str());
  }
  join.set_arg_feed_kernel_part_data(kernel.result_fetch_kernel_part_data());
  for (int64_t start = 0; start < num_configs; start += configs) {
    const int64_t count = std::min(configs, num_configs - start);
    join.set_arg_feed_config_part_data(parts_data + start / configs * part);
    *join.arg_feed_num_configs_data() = static_cast<int32_t>(count);
    if (!join.Run()) {
      return Fail(TPU_GRAPHS_RUN_FAILED, message, message_size, "the compiled program failed: %s",
                  join.error_msg().c_str());
    }
    std::memcpy(scores + start, join.result_fetch_scores_data(), sizeof(float) * count);
  }
  return TPU_GRAPHS_OK;
}

// Scores a kernel in the smallest bucket of one CPU level's classes it fits; -1 if none.
using LevelScorer = int (*)(int64_t num_nodes, const float* node_feat, const uint8_t* node_opcode, int64_t num_edges,
                            const int64_t* edge_index, int64_t num_configs, const float* config_feat, float* scores,
                            char* message, size_t message_size);

#define TPU_GRAPHS_TRY_BUCKET(Model, nodes, edges, configs)                                                   \
  if (num_nodes <= nodes && num_edges <= edges) {                                                              \
    return ScoreInBucket<Model>(configs, num_nodes, node_feat, node_opcode, num_edges, edge_index, num_configs, \
                                config_feat, scores, message, message_size);                                   \
  }
#define TPU_GRAPHS_TRY_SPLIT_BUCKET(Kernel, Configs, Join, nodes, edges, configs)                               \
  if (num_nodes <= nodes && num_edges <= edges) {                                                              \
    return ScoreInSplitBucket<Kernel, Configs, Join>(configs, num_nodes, node_feat, node_opcode, num_edges,     \
                                                     edge_index, num_configs, config_feat, scores, message,     \
                                                     message_size);                                             \
  }
#ifdef TPU_GRAPHS_FOR_EACH_SPLIT_BUCKET
#define TPU_GRAPHS_TRY_BUCKETS(LEVEL) TPU_GRAPHS_FOR_EACH_SPLIT_BUCKET(TPU_GRAPHS_TRY_SPLIT_BUCKET, LEVEL)
#else
#define TPU_GRAPHS_TRY_BUCKETS(LEVEL) TPU_GRAPHS_FOR_EACH_BUCKET(TPU_GRAPHS_TRY_BUCKET, LEVEL)
#endif
#define TPU_GRAPHS_LEVEL_SCORER(LEVEL, name)                                                                        \
  [](int64_t num_nodes, const float* node_feat, const uint8_t* node_opcode, int64_t num_edges,                    \
     const int64_t* edge_index, int64_t num_configs, const float* config_feat, float* scores, char* message,        \
     size_t message_size) -> int {                                                                                 \
    TPU_GRAPHS_TRY_BUCKETS(LEVEL)                                                                                   \
    return -1;                                                                                                      \
  },
const LevelScorer kLevelScorers[] = {TPU_GRAPHS_FOR_EACH_CPU_LEVEL(TPU_GRAPHS_LEVEL_SCORER)};
#define TPU_GRAPHS_LEVEL_NAME(LEVEL, name) name,
const char* const kLevelNames[] = {TPU_GRAPHS_FOR_EACH_CPU_LEVEL(TPU_GRAPHS_LEVEL_NAME)};
#undef TPU_GRAPHS_LEVEL_NAME
#undef TPU_GRAPHS_LEVEL_SCORER
#undef TPU_GRAPHS_TRY_BUCKETS
#undef TPU_GRAPHS_TRY_SPLIT_BUCKET
#undef TPU_GRAPHS_TRY_BUCKET

}  // namespace

extern "C" void tpu_graphs_tile_limits(int64_t* max_nodes, int64_t* max_edges) {
#ifdef TPU_GRAPHS_FOR_EACH_SPLIT_BUCKET
#define TPU_GRAPHS_LIMITS(Kernel, Configs, Join, nodes, edges, configs) *max_nodes = nodes, *max_edges = edges;
  TPU_GRAPHS_FOR_EACH_SPLIT_BUCKET(TPU_GRAPHS_LIMITS, any_level)
#else
#define TPU_GRAPHS_LIMITS(Model, nodes, edges, configs) *max_nodes = nodes, *max_edges = edges;
  TPU_GRAPHS_FOR_EACH_BUCKET(TPU_GRAPHS_LIMITS, any_level)
#endif
#undef TPU_GRAPHS_LIMITS
}

extern "C" int tpu_graphs_score_tile(int64_t num_nodes, const float* node_feat, const uint8_t* node_opcode,
                                     int64_t num_edges, const int64_t* edge_index, int64_t num_configs,
                                     const float* config_feat, float* scores, char* message, size_t message_size) {
  std::string level_error;
  const int level = ChosenCpuLevel(kLevelNames, &level_error);
  if (level < 0) return Fail(TPU_GRAPHS_RUN_FAILED, message, message_size, "%s", level_error.c_str());
  const int checked = CheckInput(num_nodes, node_feat, node_opcode, num_edges, edge_index, num_configs, config_feat,
                                 scores, message, message_size);
  if (checked != TPU_GRAPHS_OK) return checked;
  try {
    const int status = kLevelScorers[level](num_nodes, node_feat, node_opcode, num_edges, edge_index, num_configs,
                                            config_feat, scores, message, message_size);
    if (status >= 0) return status;
  } catch (const std::exception& error) {
    return Fail(TPU_GRAPHS_RUN_FAILED, message, message_size, "the compiled program failed: %s", error.what());
  }
  int64_t max_nodes = 0, max_edges = 0;
  tpu_graphs_tile_limits(&max_nodes, &max_edges);
  return Fail(TPU_GRAPHS_TOO_LARGE, message, message_size,
              "the kernel has %lld ops and %lld edges; this model was compiled for at most %lld ops and %lld edges",
              static_cast<long long>(num_nodes), static_cast<long long>(num_edges), static_cast<long long>(max_nodes),
              static_cast<long long>(max_edges));
}

extern "C" int tpu_graphs_rank_module(const void* module, size_t module_size, int64_t num_candidates, uint64_t seed,
                                      int64_t top_k, const tpu_graphs_rank_options* options,
                                      tpu_graphs_module_ranking** ranking, char* message, size_t message_size) {
  return tpu_graphs::RankModuleWithLibrary(&tpu_graphs_score_tile, nullptr, module, module_size, num_candidates, seed,
                                           top_k, options, ranking, message, message_size, &kGainCalibration);
}
