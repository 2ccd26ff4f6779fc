/* The C interface of a compiled tpu_graphs model: <run>/export/native/libtpu_graphs_model.so,
 * built by baselines/compile_native.py from the run's SavedModel (docs/compiler.md).
 *
 * The library holds the model's weights and its program, compiled ahead of time by XLA
 * (saved_model_cli aot_compile_cpu), and links no TensorFlow runtime. A tile model's library
 * scores tile configs (tpu_graphs_score_tile), a layout model's layout configs
 * (tpu_graphs_score_layout): the arrays of one TpuGraphs file in, one score per config out
 * (lower = predicted faster). A library exports the functions of its model's kind only. Every
 * entry point is thread-safe. */
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
   * bucket (tpu_graphs_tile_limits, tpu_graphs_layout_limits): refused, not cut. */
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

#ifdef __cplusplus
}
#endif

#endif  /* TPU_GRAPHS_NATIVE_TPU_GRAPHS_MODEL_H_ */
