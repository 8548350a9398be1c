/* An engine's view of moejit from C: <moejit/moejit.h> and nothing else. Creates a host-backend
   context, checks the version and an error report. Usage: consumer_c CACHE_DIR. Prints "ok". */
#include <moejit/moejit.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  moejit_context_options_t o;
  moejit_context_t ctx = NULL;
  moejit_backend_t backend = MOEJIT_BACKEND_AUTO;
  moejit_weights_desc_t d;
  moejit_packed_sizes_t sizes;
  moejit_status_t s;
  char expected[32];

  if (argc != 2) {
    fprintf(stderr, "usage: consumer_c CACHE_DIR\n");
    return 2;
  }
  snprintf(expected, sizeof expected, "%d.%d.%d", MOEJIT_VERSION_MAJOR, MOEJIT_VERSION_MINOR, MOEJIT_VERSION_PATCH);
  if (strcmp(moejit_version(), expected) != 0) {
    fprintf(stderr, "consumer_c: moejit_version() is %s, the header says %s\n", moejit_version(), expected);
    return 1;
  }

  moejit_context_options_init(&o);
  o.backend = MOEJIT_BACKEND_HOST;
  o.cache_dir = argv[1];
  s = moejit_context_create(&o, &ctx);
  if (s != MOEJIT_OK) {
    fprintf(stderr, "consumer_c: moejit_context_create: %s: %s\n", moejit_status_name(s), moejit_last_error());
    return 1;
  }
  if (moejit_context_backend(ctx, &backend, NULL) != MOEJIT_OK || backend != MOEJIT_BACKEND_HOST) {
    fprintf(stderr, "consumer_c: expected the host backend\n");
    return 1;
  }

  /* INT4 with a group size INT4 has not: refused, with a message. */
  moejit_weights_desc_init(&d);
  d.format = MOEJIT_WEIGHT_INT4_SYM;
  d.group_size = 48;
  d.scale_dtype = MOEJIT_DTYPE_BF16;
  d.experts = 1;
  d.n = 32;
  d.k = 96;
  d.source = MOEJIT_SOURCE_PLAIN_CODES;
  s = moejit_packed_weights_size(ctx, &d, &sizes);
  if (s != MOEJIT_ERROR_INVALID_ARGUMENT || strlen(moejit_last_error()) == 0) {
    fprintf(stderr, "consumer_c: group_size 48 gave %s (\"%s\"), expected INVALID_ARGUMENT with a message\n",
            moejit_status_name(s), moejit_last_error());
    return 1;
  }
  if (moejit_context_destroy(ctx) != MOEJIT_OK) {
    fprintf(stderr, "consumer_c: moejit_context_destroy: %s\n", moejit_last_error());
    return 1;
  }
  printf("ok: moejit %s from C, host backend\n", moejit_version());
  return 0;
}
