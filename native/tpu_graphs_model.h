/* The C interface of a compiled tpu_graphs model: <run>/export/native/libtpu_graphs_model.so,
 * built by baselines/compile_native.py from the run's SavedModel (docs/compiler.md).
 *
 * The library holds the model's weights and its program, compiled ahead of time by XLA
 * (saved_model_cli aot_compile_cpu), and links no TensorFlow runtime. It scores tile configs:
 * the arrays of one TpuGraphs tile kernel in, one score per config out (lower = predicted faster).
 * Every entry point is thread-safe. */
#ifndef TPU_GRAPHS_NATIVE_TPU_GRAPHS_MODEL_H_
#define TPU_GRAPHS_NATIVE_TPU_GRAPHS_MODEL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tpu_graphs_status {
  TPU_GRAPHS_OK = 0,
  /* More ops or edges than the largest compiled bucket (tpu_graphs_tile_limits): refused, not cut. */
  TPU_GRAPHS_TOO_LARGE = 1,
  /* Input the model cannot score: no ops, NaN or infinite features, an edge naming no op, a
   * negative count, a null array with a positive count. */
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

#ifdef __cplusplus
}
#endif

#endif  /* TPU_GRAPHS_NATIVE_TPU_GRAPHS_MODEL_H_ */
