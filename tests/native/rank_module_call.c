/* Calls tpu_graphs_rank_module of a model library from C, as a compiler would, for
 * tests/native/test_native.py: from `threads` threads at once on the same module bytes, each result
 * compared with the first thread's.
 *   rank_module_call <module.pb> <num_candidates> <seed> <top_k> <threads>
 * Prints "status <s>: <message>" for a refused call, else the backend note (if any), per graph
 * "<id> <num_configs>" and per best config "  <config> <score> <what it sets>"; exits 3 when
 * threads disagree. Or tpu_graphs_apply_layout_config, the module written back:
 *   rank_module_call <module.pb> <num_candidates> <seed> --apply <config> <written.pb>
 * calls it from 4 threads at once, writes the module with candidate <config> applied and prints
 * "copies <n>", or "status <s>: <message>"; exits 3 when threads disagree. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpu_graphs_model.h"

struct call {
  const char* bytes;
  size_t size;
  int64_t num_candidates, top_k;
  uint64_t seed;
  int status;
  char message[1024];
  char text[1 << 16];
};

static void describe(const struct tpu_graphs_module_ranking* ranking, char* text, size_t size) {
  size_t used = 0;
  if (ranking->backend_note != NULL) used += snprintf(text, size, "%s\n", ranking->backend_note);
  for (int64_t g = 0; g < ranking->num_graphs; ++g) {
    const struct tpu_graphs_graph_ranking* graph = &ranking->graphs[g];
    used += snprintf(text + used, size - used, "%s %lld\n", graph->graph_id, (long long)graph->num_configs);
    for (int64_t i = 0; i < graph->num_best; ++i) {
      const struct tpu_graphs_ranked_config* best = &graph->best[i];
      used += snprintf(text + used, size - used, "  %lld %.9g", (long long)best->config, best->score);
      for (int j = 0; j < best->num_output_tile; ++j) used += snprintf(text + used, size - used, " o%lld", (long long)best->output_tile[j]);
      for (int j = 0; j < best->num_kernel_tile; ++j) used += snprintf(text + used, size - used, " k%lld", (long long)best->kernel_tile[j]);
      for (int64_t k = 0; k < best->num_layouts; ++k) {
        const struct tpu_graphs_tensor_layout* layout = &best->layouts[k];
        used += snprintf(text + used, size - used, " %s:%d:", layout->instruction, layout->operand);
        for (int d = 0; d < layout->num_dims; ++d) used += snprintf(text + used, size - used, "%lld,", (long long)layout->dims[d]);
      }
      used += snprintf(text + used, size - used, "\n");
    }
  }
}

static void* rank(void* argument) {
  struct call* call = argument;
  struct tpu_graphs_module_ranking* ranking = NULL;
  call->status = tpu_graphs_rank_module(call->bytes, call->size, call->num_candidates, call->seed, call->top_k,
                                        NULL, &ranking, call->message, sizeof call->message);
  if (call->status == TPU_GRAPHS_OK) describe(ranking, call->text, sizeof call->text);
  tpu_graphs_free_module_ranking(ranking);
  return NULL;
}

struct apply_call {
  const char* bytes;
  size_t size;
  int64_t num_candidates, config;
  uint64_t seed;
  int status;
  void* written;
  size_t written_size;
  int64_t copies;
  char message[1024];
};

static void* apply_config(void* argument) {
  struct apply_call* call = argument;
  call->status = tpu_graphs_apply_layout_config(call->bytes, call->size, call->num_candidates, call->seed, call->config,
                                                NULL, &call->written, &call->written_size, &call->copies,
                                                call->message, sizeof call->message);
  return NULL;
}

/* The --apply mode: the call from APPLY_THREADS threads at once, each answer compared with the first's. */
enum { APPLY_THREADS = 4 };

static int apply(const char* bytes, size_t size, char** argv) {
  static struct apply_call calls[APPLY_THREADS];
  pthread_t ids[APPLY_THREADS];
  for (int t = 0; t < APPLY_THREADS; ++t) {
    calls[t] = (struct apply_call){bytes, size, atoll(argv[2]), atoll(argv[5]), strtoull(argv[3], NULL, 10)};
    pthread_create(&ids[t], NULL, apply_config, &calls[t]);
  }
  for (int t = 0; t < APPLY_THREADS; ++t) pthread_join(ids[t], NULL);
  for (int t = 0; t < APPLY_THREADS; ++t) {
    const struct apply_call* call = &calls[t];
    if (call->status != calls[0].status || call->written_size != calls[0].written_size ||
        (call->written == NULL) != (call->status != TPU_GRAPHS_OK) ||
        (call->written != NULL && memcmp(call->written, calls[0].written, call->written_size) != 0)) {
      return 3;
    }
  }
  if (calls[0].status != TPU_GRAPHS_OK) {
    printf("status %d: %s\n", calls[0].status, calls[0].message);
    return 0;
  }
  FILE* out = fopen(argv[6], "wb");
  if (out == NULL || fwrite(calls[0].written, 1, calls[0].written_size, out) != calls[0].written_size ||
      fclose(out) != 0) {
    return 2;
  }
  for (int t = 0; t < APPLY_THREADS; ++t) tpu_graphs_free_written_module(calls[t].written);
  printf("copies %lld\n", (long long)calls[0].copies);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 6 && !(argc == 7 && strcmp(argv[4], "--apply") == 0)) return 2;
  FILE* file = fopen(argv[1], "rb");
  if (file == NULL) return 2;
  static char bytes[64 << 20];
  const size_t size = fread(bytes, 1, sizeof bytes, file);
  fclose(file);
  if (argc == 7) return apply(bytes, size, argv);
  const int threads = atoi(argv[5]);
  struct call* calls = calloc(threads, sizeof *calls);
  pthread_t ids[64];
  for (int t = 0; t < threads && t < 64; ++t) {
    calls[t] = (struct call){bytes, size, atoll(argv[2]), atoll(argv[4]), strtoull(argv[3], NULL, 10)};
    pthread_create(&ids[t], NULL, rank, &calls[t]);
  }
  for (int t = 0; t < threads && t < 64; ++t) pthread_join(ids[t], NULL);
  for (int t = 1; t < threads; ++t) {
    if (calls[t].status != calls[0].status || strcmp(calls[t].text, calls[0].text) != 0) return 3;
  }
  if (calls[0].status != TPU_GRAPHS_OK) {
    printf("status %d: %s\n", calls[0].status, calls[0].message);
  } else {
    fputs(calls[0].text, stdout);
  }
  return 0;
}
