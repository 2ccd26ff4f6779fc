// The layout half of tpu_graphs_model.h over the classes saved_model_cli aot_compile_cpu wrote for
// one layout model: per size bucket (tpu_graphs/export/aot/layout_shapes.py) a context class (the op
// states no config changes) and a chunk class (scores of C configs given the context and their
// config rows' states), and one rows class (the states of config rows), each compiled for several
// CPU levels. Compiled per model by tpu_graphs/export/aot/native_library.py, which generates
// TPU_GRAPHS_BUCKETS_HEADER: it includes every class's header and defines
// TPU_GRAPHS_FOR_EACH_CPU_LEVEL(X) as X(namespace, level name) per level, oldest first, and
// TPU_GRAPHS_FOR_EACH_LAYOUT_BUCKET(X, LEVEL) as X(LEVEL::context, LEVEL::rows, LEVEL::chunk, hops,
// nodes, edges, configurable, configs) per bucket, smallest first.
//
// A call checks the input as the SavedModel's plain signature does inside its graph
// (saved_model.checked_arrays), prunes the graph as its graph does (layout_pruning.cc), picks the
// smallest bucket the pruned graph fits, computes the context once, the state of each distinct
// config row once (configs repeat a few rows per op), and then the chunks of configs, spread over
// the cores (one thread per core, each with its own buffers), in the code of the newest CPU level
// this CPU runs.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "native/library/layout_pruning.h"
#include "native/library/library_checks.h"
#include "native/library/library_threads.h"
#include "native/library/neighbour_tables.h"
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
using tpu_graphs_library::ThreadsWanted;

constexpr int64_t kNodeFeatures = 140;
constexpr int64_t kLayoutValues = 18;
constexpr float kLowestLayoutValue = -1, kHighestLayoutValue = 5;  // graphs.LAYOUT_VALUE_RANGE
constexpr int64_t kNeighbourSlots = TPU_GRAPHS_NEIGHBOUR_SLOTS, kHubRows = TPU_GRAPHS_HUB_ROWS;  // layout_shapes.py
constexpr int64_t kRowsPerCall = TPU_GRAPHS_ROWS_PER_CALL;


int CheckInput(int64_t num_nodes, const float* node_feat, const uint8_t* node_opcode, int64_t num_edges,
               const int64_t* edge_index, int64_t num_configurable, const int64_t* node_config_ids,
               int64_t num_configs, const float* node_config_feat, const float* scores, char* message,
               size_t message_size) {
  if (num_nodes < 1) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "num_nodes is %lld: a graph needs at least one op",
                static_cast<long long>(num_nodes));
  }
  if (num_edges < 0 || num_configs < 0) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "num_edges (%lld) and num_configs (%lld) must be >= 0",
                static_cast<long long>(num_edges), static_cast<long long>(num_configs));
  }
  if (num_configurable < 1) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size,
                "node_config_ids is empty: no node is configurable, so the configs cannot differ and there is "
                "nothing to rank");
  }
  // node_config_feat [num_configs][num_configurable][18]: each count against the bytes it multiplies.
  const int64_t config_row_bytes = sizeof(float) * kLayoutValues;
  int length = CheckArrayLength("node_feat", num_nodes, sizeof(float) * kNodeFeatures, message, message_size);
  if (length == TPU_GRAPHS_OK) length = CheckArrayLength("edge_index", num_edges, 2 * sizeof(int64_t), message, message_size);
  if (length == TPU_GRAPHS_OK) {
    length = CheckArrayLength("node_config_feat", num_configurable, config_row_bytes, message, message_size);
  }
  if (length == TPU_GRAPHS_OK) {
    length = CheckArrayLength("node_config_feat", num_configs, config_row_bytes * num_configurable, message, message_size);
  }
  if (length != TPU_GRAPHS_OK) return length;
  if (node_feat == nullptr || node_opcode == nullptr || node_config_ids == nullptr ||
      (num_edges > 0 && edge_index == nullptr) ||
      (num_configs > 0 && (node_config_feat == nullptr || scores == nullptr))) {
    return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "a null array with a positive count");
  }
  const int graph = CheckOpsAndEdges(num_nodes, node_feat, num_edges, edge_index, message, message_size);
  if (graph != TPU_GRAPHS_OK) return graph;
  std::vector<char> configurable(num_nodes, 0);
  for (int64_t j = 0; j < num_configurable; ++j) {
    const int64_t id = node_config_ids[j];
    if (id < 0 || id >= num_nodes) {
      return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "node_config_ids entry %lld names op %lld, outside [0, %lld)",
                  static_cast<long long>(j), static_cast<long long>(id), static_cast<long long>(num_nodes));
    }
    if (configurable[id]++) {
      return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "node_config_ids lists op %lld more than once",
                  static_cast<long long>(id));
    }
  }
  const int64_t values = num_configs * num_configurable * kLayoutValues;
  for (int64_t i = 0; i < values; ++i) {
    const float value = node_config_feat[i];
    // In range before the cast (NaN is not), so the cast is defined; cheaper than std::round per value.
    if (!(value >= kLowestLayoutValue && value <= kHighestLayoutValue &&
          value == static_cast<float>(static_cast<int>(value)))) {
      const int64_t row = i / kLayoutValues;
      return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size,
                  "node_config_feat holds %g (config %lld, configurable op %lld, value %lld): not a layout value (an "
                  "integer dimension index in [-1, 5], -1 unset)",
                  value, static_cast<long long>(row / num_configurable), static_cast<long long>(row % num_configurable),
                  static_cast<long long>(i % kLayoutValues));
    }
  }
  return TPU_GRAPHS_OK;
}

// The arrays of one call after pruning, as every bucket takes them.
struct PrunedCall {
  const float* node_feat;                 // the whole graph's [num_nodes][140]
  const uint8_t* node_opcode;             // the whole graph's [num_nodes]
  const tpu_graphs::PrunedLayout* pruned;
  int64_t num_configs;
  const float* node_config_feat;          // [num_configs][num_configurable][18]
  float* scores;                          // [num_configs]
};

// What both programs of a bucket read besides the configs: the pruned graph's neighbour tables
// (layout_shapes.py) and each op's configurable slot, built once per call.
struct BucketGraph {
  tpu_graphs::NeighbourTable producers, consumers;
  std::vector<int32_t> op_slot;  // [nodes], `configurable` for an op no config sets
};

// The config rows of a call (one config's 18 layout values on one configurable op) as indices into
// their distinct rows: configs repeat a few rows per op (5 to 8 distinct in the sample's graphs),
// so the rows program runs once per distinct row instead of once per config and op.
struct DistinctRows {
  std::vector<int32_t> of_row;  // [num_configs][num_configurable]: each row's distinct row
  std::vector<int64_t> first;   // per distinct row, where it first occurs (config * num_configurable + slot)
  std::vector<float> states;    // [distinct rows][config units], the rows program's
  int64_t units = 0;
};

// A row's values, validated integers in [-1, 5], three bits each.
uint64_t RowKey(const float* values) {
  uint64_t key = 0;
  for (int64_t i = 0; i < kLayoutValues; ++i) key = key << 3 | static_cast<uint64_t>(values[i] + 1);
  return key;
}

// The distinct rows seen on one configurable op: searched in order while they are few (as they
// usually are), hashed once there are more.
class SlotRows {
 public:
  // The distinct row of `key`, `next` (which it then becomes) if it is new.
  int32_t Find(uint64_t key, int32_t next) {
    if (many_.empty()) {
      for (const auto& [known, row] : few_) {
        if (known == key) return row;
      }
      if (few_.size() < kFew) {
        few_.emplace_back(key, next);
        return next;
      }
      many_.insert(few_.begin(), few_.end());
    }
    return many_.try_emplace(key, next).first->second;
  }

 private:
  static constexpr size_t kFew = 16;
  std::vector<std::pair<uint64_t, int32_t>> few_;
  std::unordered_map<uint64_t, int32_t> many_;
};

DistinctRows FindDistinctRows(const PrunedCall& call) {
  const int64_t slots = static_cast<int64_t>(call.pruned->node_config_ids.size());
  DistinctRows distinct;
  distinct.of_row.resize(call.num_configs * slots);
  std::vector<SlotRows> seen(slots);
  for (int64_t row = 0; row < call.num_configs * slots; ++row) {
    const int32_t next = static_cast<int32_t>(distinct.first.size());
    const int32_t found = seen[row % slots].Find(RowKey(call.node_config_feat + row * kLayoutValues), next);
    if (found == next) distinct.first.push_back(row);
    distinct.of_row[row] = found;
  }
  return distinct;
}

// Runs the rows program over the distinct rows, kRowsPerCall at a time (the last call filled up
// with copies of the first row), each with its op's features and opcode. False with `error` set
// if the program fails.
template <class Rows>
bool ComputeRowStates(const PrunedCall& call, DistinctRows* distinct, std::string* error) {
  thread_local Rows program;
  const tpu_graphs::PrunedLayout& pruned = *call.pruned;
  const int64_t slots = static_cast<int64_t>(pruned.node_config_ids.size());
  const int64_t rows = static_cast<int64_t>(distinct->first.size());
  distinct->units = program.result_fetch_row_states_count() / kRowsPerCall;
  distinct->states.resize(rows * distinct->units);
  for (int64_t start = 0; start < rows; start += kRowsPerCall) {
    for (int64_t i = 0; i < kRowsPerCall; ++i) {
      const int64_t row = distinct->first[start + i < rows ? start + i : 0];
      const int64_t op = pruned.kept_ops[pruned.node_config_ids[row % slots]];
      std::memcpy(program.arg_feed_node_config_feat_data() + i * kLayoutValues,
                  call.node_config_feat + row * kLayoutValues, sizeof(float) * kLayoutValues);
      std::memcpy(program.arg_feed_node_feat_data() + i * kNodeFeatures, call.node_feat + op * kNodeFeatures,
                  sizeof(float) * kNodeFeatures);
      program.arg_feed_node_opcode_data()[i] = call.node_opcode[op];
    }
    if (!program.Run()) {
      *error = program.error_msg();
      return false;
    }
    const int64_t count = std::min(kRowsPerCall, rows - start);
    std::memcpy(distinct->states.data() + start * distinct->units, program.result_fetch_row_states_data(),
                sizeof(float) * count * distinct->units);
  }
  return true;
}

// How many threads score the chunks: tpu_graphs_library::ThreadsWanted(), at most `chunks`.
int64_t ThreadsFor(int64_t chunks) { return std::max<int64_t>(1, std::min(ThreadsWanted(), chunks)); }

// Copies `values` into a program's buffer. An empty vector's data() may be null, which memcpy
// takes from nowhere, even for 0 bytes: an empty vector copies nothing.
template <class T>
void CopyValues(const std::vector<T>& values, T* buffer) {
  if (!values.empty()) std::memcpy(buffer, values.data(), sizeof(T) * values.size());
}

void SetTable(const tpu_graphs::NeighbourTable& table, int32_t* slots, int32_t* degrees, float* hubs,
              int32_t* hub_of) {
  CopyValues(table.slots, slots);
  CopyValues(table.degrees, degrees);
  CopyValues(table.hubs, hubs);
  CopyValues(table.hub_of, hub_of);
}

// The pruned graph (ops and their features gathered from the whole graph's, edges, neighbour
// tables and counts) copied into a program's argument buffers; the context program also takes the
// ops' opcodes. Op and edge rows past the counts are left as they are: the programs mask them, and
// the tables name none.
// Whether a program reads the graph's edges: tfcompile leaves out the arguments a program does not
// read, and the context program of a model without context rounds reads none of them.
template <class Program, class = void>
struct ReadsEdges : std::false_type {};
template <class Program>
struct ReadsEdges<Program, std::void_t<decltype(std::declval<Program&>().arg_feed_edge_index_data())>>
    : std::true_type {};

template <class Program>
void SetGraph(Program* program, const PrunedCall& call, const BucketGraph& graph) {
  const tpu_graphs::PrunedLayout& pruned = *call.pruned;
  const int64_t num_nodes = static_cast<int64_t>(pruned.kept_ops.size());
  const int64_t num_edges = static_cast<int64_t>(pruned.edge_index.size() / 2);
  float* feat = program->arg_feed_node_feat_data();
  for (int64_t i = 0; i < num_nodes; ++i) {
    std::memcpy(feat + i * kNodeFeatures, call.node_feat + pruned.kept_ops[i] * kNodeFeatures,
                sizeof(float) * kNodeFeatures);
  }
  *program->arg_feed_num_nodes_data() = static_cast<int32_t>(num_nodes);
  if constexpr (ReadsEdges<Program>::value) {
    CopyValues(pruned.edge_index, program->arg_feed_edge_index_data());
    SetTable(graph.producers, program->arg_feed_producers_data(), program->arg_feed_producers_degrees_data(),
             program->arg_feed_producers_hubs_data(), program->arg_feed_producers_hub_of_data());
    SetTable(graph.consumers, program->arg_feed_consumers_data(), program->arg_feed_consumers_degrees_data(),
             program->arg_feed_consumers_hubs_data(), program->arg_feed_consumers_hub_of_data());
    *program->arg_feed_num_edges_data() = static_cast<int32_t>(num_edges);
  }
}

// Scores chunks of `configs` configs, taking chunk numbers from `next` until none is left, in
// this thread's own buffers; the last chunk is filled up with copies of the last config.
// Returns false with `error` set if a program fails.
template <class Chunk>
bool ScoreChunks(const PrunedCall& call, const BucketGraph& graph, const DistinctRows& distinct,
                 int64_t configurable_slots, int64_t configs, const float* context, int64_t context_floats,
                 std::atomic<int64_t>* next, std::string* error) {
  thread_local Chunk program;  // one set of buffers per thread and bucket, reused between calls
  SetGraph(&program, call, graph);
  const tpu_graphs::PrunedLayout& pruned = *call.pruned;
  const int64_t num_configurable = static_cast<int64_t>(pruned.node_config_ids.size());
  CopyValues(graph.op_slot, program.arg_feed_op_slot_data());
  std::memcpy(program.arg_feed_context_data(), context, sizeof(float) * context_floats);
  *program.arg_feed_num_configurable_data() = static_cast<int32_t>(num_configurable);
  *program.arg_feed_num_configs_data() = static_cast<int32_t>(configs);
  const int64_t config_values = num_configurable * kLayoutValues;
  const int64_t chunks = (call.num_configs + configs - 1) / configs;
  for (int64_t chunk = next->fetch_add(1); chunk < chunks; chunk = next->fetch_add(1)) {
    const int64_t start = chunk * configs;
    float* rows = program.arg_feed_node_config_feat_data();
    float* row_states = program.arg_feed_row_states_data();
    for (int64_t i = 0; i < configs; ++i) {
      const int64_t config = std::min(start + i, call.num_configs - 1);
      std::memcpy(rows + i * configurable_slots * kLayoutValues, call.node_config_feat + config * config_values,
                  sizeof(float) * config_values);
      for (int64_t slot = 0; slot < num_configurable; ++slot) {
        std::memcpy(row_states + (i * configurable_slots + slot) * distinct.units,
                    distinct.states.data() + distinct.of_row[config * num_configurable + slot] * distinct.units,
                    sizeof(float) * distinct.units);
      }
    }
    if (!program.Run()) {
      *error = program.error_msg();
      return false;
    }
    const int64_t count = std::min(configs, call.num_configs - start);
    std::memcpy(call.scores + start, program.result_fetch_scores_data(), sizeof(float) * count);
  }
  return true;
}

// Scores the pruned graph in the bucket of `Context` and `Chunk`: its neighbour tables, the
// context once, the distinct config rows' states once (`Rows`), then the chunks over
// ThreadsFor(chunks) threads, this one among them.
template <class Context, class Rows, class Chunk>
int ScoreInBucket(int64_t nodes, int64_t edges, int64_t configurable_slots, int64_t configs, const PrunedCall& call,
                  char* message, size_t message_size) {
  const tpu_graphs::PrunedLayout& pruned = *call.pruned;
  BucketGraph graph{
      tpu_graphs::BuildNeighbourTable(pruned.edge_index, 0, nodes, edges, kNeighbourSlots, kHubRows),
      tpu_graphs::BuildNeighbourTable(pruned.edge_index, 1, nodes, edges, kNeighbourSlots, kHubRows),
      std::vector<int32_t>(nodes, static_cast<int32_t>(configurable_slots))};
  for (const auto& [table, direction] : {std::make_pair(&graph.producers, "producers"),
                                         std::make_pair(&graph.consumers, "consumers")}) {
    if (table->num_hubs > kHubRows) {
      return Fail(TPU_GRAPHS_TOO_LARGE, message, message_size,
                  "the pruned graph has %lld ops with more than %lld %s each; this model was compiled for at most "
                  "%lld such ops", static_cast<long long>(table->num_hubs), static_cast<long long>(kNeighbourSlots),
                  direction, static_cast<long long>(kHubRows));
    }
  }
  for (size_t slot = 0; slot < pruned.node_config_ids.size(); ++slot) {
    graph.op_slot[pruned.node_config_ids[slot]] = static_cast<int32_t>(slot);
  }
  if (call.num_configs == 0) return TPU_GRAPHS_OK;
  thread_local Context context_program;
  SetGraph(&context_program, call, graph);
  for (size_t i = 0; i < pruned.kept_ops.size(); ++i) {
    context_program.arg_feed_node_opcode_data()[i] = call.node_opcode[pruned.kept_ops[i]];
  }
  if (!context_program.Run()) {
    return Fail(TPU_GRAPHS_RUN_FAILED, message, message_size, "the compiled program failed: %s",
                context_program.error_msg().c_str());
  }
  const float* context = context_program.result_fetch_context_data();
  const int64_t context_floats = context_program.result_fetch_context_count();
  DistinctRows distinct = FindDistinctRows(call);
  std::string rows_error;
  if (!ComputeRowStates<Rows>(call, &distinct, &rows_error)) {
    return Fail(TPU_GRAPHS_RUN_FAILED, message, message_size, "the compiled program failed: %s", rows_error.c_str());
  }
  const int64_t threads = ThreadsFor((call.num_configs + configs - 1) / configs);
  std::atomic<int64_t> next{0};
  std::vector<std::string> errors(threads);
  std::vector<char> succeeded(threads, 1);
  auto work = [&](int64_t thread) {
    try {
      succeeded[thread] = ScoreChunks<Chunk>(call, graph, distinct, configurable_slots, configs, context,
                                             context_floats, &next, &errors[thread]);
    } catch (const std::exception& failure) {  // std::bad_alloc of a thread's program buffers
      succeeded[thread] = 0;
      errors[thread] = failure.what();
    }
    if (!succeeded[thread]) next = INT64_MAX / 2;  // the others stop after their current chunk
  };
  std::vector<std::thread> helpers;
  try {
    for (int64_t thread = 1; thread < threads; ++thread) helpers.emplace_back(work, thread);
  } catch (const std::system_error&) {  // no more threads: the ones started, and this one, do the work
  }
  work(0);
  for (std::thread& helper : helpers) helper.join();
  for (int64_t thread = 0; thread < threads; ++thread) {
    if (!succeeded[thread]) {
      return Fail(TPU_GRAPHS_RUN_FAILED, message, message_size, "the compiled program failed: %s",
                  errors[thread].c_str());
    }
  }
  return TPU_GRAPHS_OK;
}

// Scores `call` in the smallest bucket of one CPU level's classes it fits; -1 if none.
using LevelScorer = int (*)(const PrunedCall& call, char* message, size_t message_size);

#define TPU_GRAPHS_TRY_BUCKET(Context, Rows, Chunk, hops, nodes, edges, configurable, configs)                  \
  if (static_cast<int64_t>(call.pruned->kept_ops.size()) <= nodes &&                                          \
      static_cast<int64_t>(call.pruned->edge_index.size() / 2) <= edges &&                                    \
      static_cast<int64_t>(call.pruned->node_config_ids.size()) <= configurable) {                            \
    return ScoreInBucket<Context, Rows, Chunk>(nodes, edges, configurable, configs, call, message, message_size); \
  }
#define TPU_GRAPHS_LEVEL_SCORER(LEVEL, name)                                                                  \
  [](const PrunedCall& call, char* message, size_t message_size) -> int {                                     \
    TPU_GRAPHS_FOR_EACH_LAYOUT_BUCKET(TPU_GRAPHS_TRY_BUCKET, LEVEL)                                           \
    return -1;                                                                                                \
  },
const LevelScorer kLevelScorers[] = {TPU_GRAPHS_FOR_EACH_CPU_LEVEL(TPU_GRAPHS_LEVEL_SCORER)};
#define TPU_GRAPHS_LEVEL_NAME(LEVEL, name) name,
const char* const kLevelNames[] = {TPU_GRAPHS_FOR_EACH_CPU_LEVEL(TPU_GRAPHS_LEVEL_NAME)};
#undef TPU_GRAPHS_LEVEL_NAME
#undef TPU_GRAPHS_LEVEL_SCORER
#undef TPU_GRAPHS_TRY_BUCKET

}  // namespace

extern "C" void tpu_graphs_layout_limits(int64_t* max_nodes, int64_t* max_edges, int64_t* max_configurable,
                                         int64_t* prune_hops) {
#define TPU_GRAPHS_LIMITS(Context, Rows, Chunk, hops, nodes, edges, configurable, configs) \
  *max_nodes = nodes, *max_edges = edges, *max_configurable = configurable, *prune_hops = hops;
  TPU_GRAPHS_FOR_EACH_LAYOUT_BUCKET(TPU_GRAPHS_LIMITS, any_level)
#undef TPU_GRAPHS_LIMITS
}

extern "C" int tpu_graphs_score_layout(int64_t num_nodes, const float* node_feat, const uint8_t* node_opcode,
                                       int64_t num_edges, const int64_t* edge_index, int64_t num_configurable,
                                       const int64_t* node_config_ids, int64_t num_configs,
                                       const float* node_config_feat, float* scores, char* message,
                                       size_t message_size) {
  std::string level_error;
  const int level = ChosenCpuLevel(kLevelNames, &level_error);
  if (level < 0) return Fail(TPU_GRAPHS_RUN_FAILED, message, message_size, "%s", level_error.c_str());
  const int checked = CheckInput(num_nodes, node_feat, node_opcode, num_edges, edge_index, num_configurable,
                                 node_config_ids, num_configs, node_config_feat, scores, message, message_size);
  if (checked != TPU_GRAPHS_OK) return checked;
  try {
    tpu_graphs::PrunedLayout pruned;
    std::string error;
    int64_t max_nodes = 0, max_edges = 0, max_configurable = 0, hops = 0;
    tpu_graphs_layout_limits(&max_nodes, &max_edges, &max_configurable, &hops);
    if (!tpu_graphs::PruneLayout(num_nodes, num_edges, edge_index, num_configurable, node_config_ids,
                                 static_cast<int>(hops), max_nodes, &pruned, &error)) {
      return Fail(TPU_GRAPHS_INVALID_INPUT, message, message_size, "%s", error.c_str());
    }
    const int64_t kept_nodes = static_cast<int64_t>(pruned.kept_ops.size());
    const int64_t kept_edges = static_cast<int64_t>(pruned.edge_index.size() / 2);
    if (!pruned.has_edges) {
      return Fail(TPU_GRAPHS_TOO_LARGE, message, message_size,
                  "the graph pruned to its configurable ops and their %lld-hop neighbourhood keeps %lld ops; this "
                  "model was compiled for at most %lld ops", static_cast<long long>(hops), static_cast<long long>(kept_nodes),
                  static_cast<long long>(max_nodes));
    }
    const PrunedCall call{node_feat, node_opcode, &pruned, num_configs, node_config_feat, scores};
    const int status = kLevelScorers[level](call, message, message_size);
    if (status >= 0) return status;
    return Fail(TPU_GRAPHS_TOO_LARGE, message, message_size,
                "the graph pruned to its configurable ops and their %lld-hop neighbourhood has %lld ops, %lld edges "
                "and %lld configurable ops; this model was compiled for at most %lld ops, %lld edges and %lld "
                "configurable ops",
                static_cast<long long>(hops), static_cast<long long>(kept_nodes), static_cast<long long>(kept_edges),
                static_cast<long long>(num_configurable), static_cast<long long>(max_nodes),
                static_cast<long long>(max_edges), static_cast<long long>(max_configurable));
  } catch (const std::exception& error) {  // std::bad_alloc of the pruning, or of the programs' buffers
    return Fail(TPU_GRAPHS_RUN_FAILED, message, message_size, "the compiled program failed: %s", error.what());
  }
}

extern "C" int tpu_graphs_rank_module(const void* module, size_t module_size, int64_t num_candidates, uint64_t seed,
                                      int64_t top_k, const tpu_graphs_rank_options* options,
                                      tpu_graphs_module_ranking** ranking, char* message, size_t message_size) {
  return tpu_graphs::RankModuleWithLibrary(nullptr, &tpu_graphs_score_layout, module, module_size, num_candidates, seed,
                                           top_k, options, ranking, message, message_size, &kGainCalibration);
}
