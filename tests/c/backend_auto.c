/* Creates a moejit context with backend AUTO through moejit.h alone and prints what it got:
 * "backend=host arch=sm_..." / "backend=device arch=sm_..." (exit 0), or
 * "error=STATUS message" (exit 1). The suite runs it with MOEJIT_CUDA_LIBRARY naming the null
 * driver (and MOEJIT_NULL_CUDA_CC), or a missing library, since the driver is loaded once per
 * process. With "prepare", it then runs moejit_prepare on a small MXFP4 model (every kernel of the
 * layer for 1..2 tokens, loaded on the device) and prints "prepared=N" (N kernels compiled or
 * loaded from the store: a rerun on the same store, as the suite's retry after a LeakSanitizer
 * failure makes one, loads what the first run compiled).
 * Usage: backend_auto CACHE_DIR [prepare]. */

#include <stdio.h>

#include "moejit/moejit.h"

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: backend_auto CACHE_DIR [prepare]\n");
    return 2;
  }
  moejit_context_options_t o;
  moejit_context_options_init(&o);
  o.cache_dir = argv[1];
  moejit_context_t ctx = NULL;
  moejit_status_t s = moejit_context_create(&o, &ctx);
  if (s != MOEJIT_OK) {
    printf("error=%s %s\n", moejit_status_name(s), moejit_last_error());
    return 1;
  }
  moejit_backend_t backend;
  const char* arch = NULL;
  s = moejit_context_backend(ctx, &backend, &arch);
  if (s != MOEJIT_OK) {
    printf("error=%s %s\n", moejit_status_name(s), moejit_last_error());
    return 1;
  }
  printf("backend=%s arch=%s\n", backend == MOEJIT_BACKEND_HOST ? "host" : "device", arch);
  if (argc == 3) {
    moejit_model_desc_t m;
    moejit_model_desc_init(&m);
    m.hidden = 256;
    m.intermediate = 128;
    m.experts = 16;
    m.topk = 4;
    m.format = MOEJIT_WEIGHT_MXFP4;
    m.group_size = 32;
    m.scale_dtype = MOEJIT_DTYPE_E8M0;
    m.max_tokens = 2;
    s = moejit_prepare(ctx, &m, NULL, NULL);
    if (s != MOEJIT_OK) {
      printf("error=%s %s\n", moejit_status_name(s), moejit_last_error());
      moejit_context_destroy(ctx);
      return 1;
    }
    moejit_stats_t stats;
    moejit_stats_init(&stats);
    moejit_get_stats(ctx, &stats);
    printf("prepared=%llu\n", (unsigned long long)(stats.compiles + stats.disk_hits));
  }
  moejit_context_destroy(ctx);
  return 0;
}
