/* The C interface of a compiled tpu_graphs model: <run>/export/native/libtpu_graphs_model.so,
 * built from the run's SavedModel by tpu_graphs/export/aot/native_library.py, which
 * baselines/compile_native.py runs (docs/compiler.md).
 *
 * The library holds the model's weights and its program, compiled ahead of time by XLA
 * (saved_model_cli aot_compile_cpu), and the featurizer (native/hlo); it links no TensorFlow
 * runtime (protobuf's lite runtime reads modules). Two questions:
 * - rank a module (tpu_graphs_rank_module): a serialized XLA module in, its best configs out, each
 *   with what it sets (layouts by instruction name, or tile sizes);
 * - score configs (tpu_graphs_score_tile, tpu_graphs_score_layout): the arrays of one TpuGraphs
 *   file in, one score per config out (lower = predicted faster).
 * And one that needs no model: write a module back with a layout candidate applied
 * (tpu_graphs_apply_layout_config).
 * A tile model's library answers for tile configs, a layout model's for layout configs; a library
 * exports the score functions of its model's kind only. Every entry point is thread-safe. */
#ifndef TPU_GRAPHS_NATIVE_TPU_GRAPHS_MODEL_H_
#define TPU_GRAPHS_NATIVE_TPU_GRAPHS_MODEL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tpu_graphs_status {
  TPU_GRAPHS_OK = 0,
  /* More ops or edges (layout: after pruning; or configurable ops) than the largest compiled
   * bucket (tpu_graphs_tile_limits, tpu_graphs_layout_limits), or more work than a
   * tpu_graphs_rank_module call's limits allow (tpu_graphs_rank_options): refused, not cut. */
  TPU_GRAPHS_TOO_LARGE = 1,
  /* Input the model cannot score: no ops, NaN or infinite features, an edge naming no op, a
   * negative count, a null array with a positive count; layout: no or repeated configurable ops,
   * a layout value that is no dimension index, a cycle in edge_index. */
  TPU_GRAPHS_INVALID_INPUT = 2,
  /* The compiled program could not run (e.g. its buffers could not be allocated). */
  TPU_GRAPHS_RUN_FAILED = 3,
};

/* The largest kernel the library scores: at most *max_nodes ops and *max_edges edges. */
void tpu_graphs_tile_limits(int64_t* max_nodes, int64_t* max_edges);

/* Scores every config of one tile kernel; arrays are row-major, as a TpuGraphs tile file holds them:
 *   node_feat   [num_nodes][140] float     node_opcode [num_nodes] uint8
 *   edge_index  [num_edges][2]   int64, rows [consumer, producer], ids in [0, num_nodes)
 *   config_feat [num_configs][24] float    scores      [num_configs] float (written)
 * Any number of configs (they are scored a compiled bucket's worth at a time). Returns
 * TPU_GRAPHS_OK, or a tpu_graphs_status with a NUL-terminated message naming the problem written
 * to message (at most message_size bytes; message may be null); scores then hold nothing to use. */
int tpu_graphs_score_tile(int64_t num_nodes, const float* node_feat, const uint8_t* node_opcode,
                          int64_t num_edges, const int64_t* edge_index, int64_t num_configs,
                          const float* config_feat, float* scores, char* message, size_t message_size);

/* The largest layout graph the library scores, counted after pruning: at most *max_nodes ops,
 * *max_edges edges and *max_configurable configurable ops; *prune_hops: the neighbourhood
 * pruning keeps (the model's setting). */
void tpu_graphs_layout_limits(int64_t* max_nodes, int64_t* max_edges, int64_t* max_configurable,
                              int64_t* prune_hops);

/* Scores every config of one layout graph; arrays are row-major, as a TpuGraphs layout file holds
 * them (its edge_index, stored in Fortran order, read into rows):
 *   node_feat        [num_nodes][140] float   node_opcode [num_nodes] uint8
 *   edge_index       [num_edges][2] int64, rows [consumer, producer], ids in [0, num_nodes), acyclic
 *   node_config_ids  [num_configurable] int64, distinct ids in [0, num_nodes)
 *   node_config_feat [num_configs][num_configurable][18] float, integers in [-1, 5]
 *   scores           [num_configs] float (written)
 * The whole graph goes in: the library prunes it to the configurable ops and their neighbourhood
 * exactly as the model's SavedModel does, then scores the configs a bucket's worth at a time.
 * Returns as tpu_graphs_score_tile does. */
int tpu_graphs_score_layout(int64_t num_nodes, const float* node_feat, const uint8_t* node_opcode,
                            int64_t num_edges, const int64_t* edge_index, int64_t num_configurable,
                            const int64_t* node_config_ids, int64_t num_configs, const float* node_config_feat,
                            float* scores, char* message, size_t message_size);

/* Whose layout a tensor's is, and so what kind of change setting it is (docs/compiler.md#only-changes-it-may-make). */
enum tpu_graphs_layout_change {
  TPU_GRAPHS_KEPT = 0,            /* the tensor's own layout: no change (listed beside a moved one) */
  TPU_GRAPHS_INTERNAL = 1,        /* inside the program: XLA's layout assignment chooses it */
  TPU_GRAPHS_ENTRY_PARAMETER = 2, /* an entry computation parameter's: the program's caller fixes it */
  TPU_GRAPHS_ENTRY_RESULT = 3,    /* the entry computation result's: the same */
  TPU_GRAPHS_CUSTOM_CALL = 4,     /* fixed by a layout-constrained custom call: never changed */
  TPU_GRAPHS_UNKNOWN_CHANGE = 5,  /* no module known */
};

/* A minor-to-major order a config sets on one tensor of one instruction: dims[0, num_dims) are
 * the tensor's minor-most dimensions, minor-most first; its other dimensions are free (a partial
 * order, as XLA's layout assignment may complete it). */
struct tpu_graphs_tensor_layout {
  const char* instruction; /* the instruction's name in the module */
  int32_t operand;         /* -1: the instruction's result; k >= 0: its operand k */
  int32_t num_dims;
  int64_t dims[6];
  int32_t change; /* a tpu_graphs_layout_change */
};

/* One of the best configs of a graph. */
struct tpu_graphs_ranked_config {
  int64_t config; /* its index among the graph's configs: candidate i, or measured run i */
  float score;    /* lower = predicted faster */
  /* Layout models: every tensor layout the config sets on the instructions it moves from the
   * module's own layouts (none: the config keeps them), in instruction order. */
  int64_t num_layouts;
  const struct tpu_graphs_tensor_layout* layouts;
  /* Tile models: the output tile size per dimension of the kernel's result, and a convolution's
   * (input, output) feature tile (num_kernel_tile 0 otherwise). */
  int32_t num_output_tile;
  int64_t output_tile[6];
  int32_t num_kernel_tile;
  int64_t kernel_tile[6];
  /* The predicted gain (docs/compiler.md#predicted-gain): has_predicted_ratio 1 where the model
   * was compiled with a calibration (fitted on its run's validation configs), 0 otherwise (then
   * the three ratios are 0: there is nothing honest to say). predicted_ratio: the config's
   * predicted runtime over config 0's (a module's own configuration, candidate 0; 0.83 = 17%
   * faster); [ratio_low, ratio_high]: the interval that held 80% of the validation pairs. */
  int32_t has_predicted_ratio;
  double predicted_ratio;
  double ratio_low;
  double ratio_high;
};

/* The ranking of one graph: the module's program (layout models) or one fused kernel (tile). */
struct tpu_graphs_graph_ranking {
  const char* graph_id;   /* the module's name, or the fusion's */
  const char* collection; /* "layout:xla:default" or "tile:xla" */
  int64_t num_configs;    /* configs scored */
  int64_t num_best;       /* min(top_k, num_configs) */
  const struct tpu_graphs_ranked_config* best; /* best first; ties keep config order */
  /* The 1-based place of config 0 (the module's own configuration, candidate 0) among the
   * num_configs configs, predicted fastest first: 1 = the model would keep it. */
  int64_t reference_rank;
};

struct tpu_graphs_module_ranking {
  int64_t num_graphs; /* 1 for a layout model; one per fusion for a tile model */
  const struct tpu_graphs_graph_ranking* graphs;
  /* null, or one line saying the model was trained on TPU measurements where the module was
   * compiled for another backend (CPU, GPU: docs/compiler.md#where-the-module-comes-from). */
  const char* backend_note;
};

/* What one tpu_graphs_rank_module call may take on and change; a null pointer takes the defaults. A call
 * beyond a limit is refused with TPU_GRAPHS_TOO_LARGE and a message naming the limit before anything
 * large is allocated. Every limit must be at least 1 (TPU_GRAPHS_INVALID_INPUT otherwise).
 * The defaults suit a compiler's process on a small machine (docs/compiler.md#bounded-work). */
struct tpu_graphs_rank_options {
  int64_t max_candidates;   /* num_candidates at most this */
  int64_t max_module_bytes; /* module_size at most this */
  /* The config features of one graph's candidates at most this many bytes: 4 bytes per feature,
   * 24 features per tile config, 18 per configurable op of a layout config. */
  int64_t max_config_bytes;
  /* Only changes it may make: 0 (the default) keeps the layouts of the entry computation's
   * parameters and result, which the program's caller fixes, in every candidate; 1 lets
   * candidates change them (the caller owns the entry computation layout). A layout-constrained
   * custom call's layouts are kept either way. */
  int32_t change_entry_layouts;
};

#define TPU_GRAPHS_DEFAULT_MAX_CANDIDATES 100000
#define TPU_GRAPHS_DEFAULT_MAX_MODULE_BYTES (INT64_C(64) << 20)
#define TPU_GRAPHS_DEFAULT_MAX_CONFIG_BYTES (INT64_C(128) << 20)
#define TPU_GRAPHS_DEFAULT_RANK_OPTIONS \
  { TPU_GRAPHS_DEFAULT_MAX_CANDIDATES, TPU_GRAPHS_DEFAULT_MAX_MODULE_BYTES, TPU_GRAPHS_DEFAULT_MAX_CONFIG_BYTES, 0 }

/* Ranks the configs of a serialized XLA module (module_size bytes at module): an HloModuleProto
 * (module->ToProto(), JAX's as_serialized_hlo_module_proto(), TensorFlow's
 * experimental_get_compiler_ir(...)(stage='hlo_serialized')), an HloProto (--xla_dump_hlo_as_proto)
 * or the TpuGraphs release's ModuleTuningData / TuningData, measured or not.
 *   num_candidates > 0: up to that many candidate configs, drawn with seed as
 *     tpu_graphs/hlo/candidates.py draws them (the same configs for the same seed): a layout
 *     model's candidate layouts of the program's convolutions, dots and reshapes (config 0 the
 *     defaults), a tile model's candidate tile sizes of each fusion of an optimized module;
 *   num_candidates == 0: the configs the input holds (a tuning data's measured runs).
 * Writes *ranking (free it with tpu_graphs_free_module_ranking) with the top_k best configs of
 * each graph; options (null: the defaults) bound the work. Returns TPU_GRAPHS_OK, or a status with
 * a message as the score functions do: TPU_GRAPHS_INVALID_INPUT for bytes that are no such proto or
 * a malformed module (a dangling operand, a cycle, a negative dimension, no entry computation, ...),
 * a module without fusions for a tile model, or nothing to rank; TPU_GRAPHS_TOO_LARGE for work
 * beyond the options' limits; the score function's status for a graph it refuses (its message
 * then starts with the graph's id); *ranking is then null. */
int tpu_graphs_rank_module(const void* module, size_t module_size, int64_t num_candidates, uint64_t seed,
                           int64_t top_k, const struct tpu_graphs_rank_options* options,
                           struct tpu_graphs_module_ranking** ranking, char* message, size_t message_size);

/* Frees what tpu_graphs_rank_module wrote; null is ignored. */
void tpu_graphs_free_module_ranking(struct tpu_graphs_module_ranking* ranking);

/* The module written back (docs/compiler.md#the-module-written-back): the serialized module
 * (module_size bytes at module, any input tpu_graphs_rank_module takes but a TuningData) with
 * layout candidate `config` applied, the candidates drawn as tpu_graphs_rank_module draws them from
 * the same num_candidates (>= 1), seed and options (change_entry_layouts included): pass those of
 * the call that ranked it and one of its best configs. Each tensor the config sets gets a full
 * minor_to_major order: the listed dims first, then its other dims in the order its layout in the
 * module gives them. A result's order is set on the instruction's shape; an operand is another
 * instruction's result, so where the producer holds another order the instruction reads a `copy`
 * of it in the order wanted, inserted after the producer (*num_copies of them; num_copies may be
 * null). The same wrapper comes out: an HloModuleProto, an HloProto (its module alone), a
 * ModuleTuningData's module. Tile sizes are not written: a module carries none. Writes
 * *written_size bytes to *written (free it with tpu_graphs_free_written_module); the bytes are
 * those tpu_graphs/hlo/module_writer.py writes. Needs no model: any library of either kind
 * exports it. Returns TPU_GRAPHS_OK, or a status with a message as tpu_graphs_rank_module does
 * (TPU_GRAPHS_INVALID_INPUT also for a config outside the candidates drawn); *written is then null.
 * Thread-safe. */
int tpu_graphs_apply_layout_config(const void* module, size_t module_size, int64_t num_candidates, uint64_t seed,
                                   int64_t config, const struct tpu_graphs_rank_options* options, void** written,
                                   size_t* written_size, int64_t* num_copies, char* message, size_t message_size);

/* Frees what tpu_graphs_apply_layout_config wrote; null is ignored. */
void tpu_graphs_free_written_module(void* written);

#ifdef __cplusplus
}
#endif

#endif  /* TPU_GRAPHS_NATIVE_TPU_GRAPHS_MODEL_H_ */
