/* Creates a moejit context with backend AUTO through moejit.h alone and prints what it got:
 * "backend=host arch=sm_..." / "backend=device arch=sm_..." (exit 0), or
 * "error=STATUS message" (exit 1). The suite runs it with MOEJIT_CUDA_LIBRARY naming the null
 * driver (and MOEJIT_NULL_CUDA_CC), or a missing library, since the driver is loaded once per
 * process. Usage: backend_auto CACHE_DIR. */

#include <stdio.h>

#include "moejit/moejit.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: backend_auto CACHE_DIR\n");
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
  moejit_context_destroy(ctx);
  return 0;
}
