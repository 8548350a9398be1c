/*
 * moejit — runtime-specialized MoE grouped-GEMM kernels.
 *
 * The stable C ABI that engines link against. Plain C: no C++ types cross this boundary.
 * Calls that can fail return a moejit_status_t.
 */
#ifndef MOEJIT_MOEJIT_H
#define MOEJIT_MOEJIT_H

#ifdef __cplusplus
extern "C" {
#endif

#define MOEJIT_VERSION_MAJOR 0
#define MOEJIT_VERSION_MINOR 1
#define MOEJIT_VERSION_PATCH 0

/* Status codes. Values are part of the ABI and never renumbered. */
typedef enum moejit_status {
  MOEJIT_OK = 0,
  MOEJIT_ERROR_INVALID_ARGUMENT = 1, /* a field or argument is out of range; the message names it */
  MOEJIT_ERROR_NOT_FOUND = 2,        /* a file, entry or symbol does not exist */
  MOEJIT_ERROR_UNAVAILABLE = 3,      /* a run-time dependency (NVRTC, libcuda, a GPU) is missing */
  MOEJIT_ERROR_COMPILE = 4,          /* the kernel compiler rejected the source; the message has the log */
  MOEJIT_ERROR_IO = 5,               /* a file-system operation failed */
  MOEJIT_ERROR_CORRUPT = 6,          /* stored data failed verification */
  MOEJIT_ERROR_FROZEN_MISS = 7,      /* frozen mode: the kernel is not in the store */
  MOEJIT_ERROR_UNSUPPORTED = 8,      /* a valid request this build or device cannot honor */
  MOEJIT_ERROR_INTERNAL = 9          /* a bug in moejit; please report it */
} moejit_status_t;

/* "MAJOR.MINOR.PATCH" of the loaded library. */
const char* moejit_version(void);

/* A short constant name for a status code ("invalid_argument", ...). */
const char* moejit_status_name(moejit_status_t status);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MOEJIT_MOEJIT_H */
