/*
 * moejit — runtime-specialized MoE grouped-GEMM kernels.
 *
 * The stable C ABI that engines link against. Plain C: no C++ types cross this boundary.
 *
 * Conventions
 *  - Every call that can fail returns a moejit_status_t; on failure moejit_last_error() gives a
 *    message (valid until the calling thread's next moejit call) naming the bad argument and the
 *    expected value.
 *  - Structs passed in start with `struct_size` = sizeof(the struct) as the caller compiled it,
 *    so that fields can be added at the end without breaking older callers. Initialize them
 *    with the matching *_init function, which sets struct_size and the defaults. A field added
 *    later starts at or past the older struct's sizeof (a `reserved` field fills what was its
 *    tail padding), so an older caller's struct_size never covers it.
 *  - Pointers to tensors are device memory for the device backend and host memory for the host
 *    backend. `stream` is a CUstream (NULL: the legacy default stream) on the device backend
 *    and ignored on the host backend, which runs synchronously.
 *  - Launch calls (moejit_grouped_gemm, moejit_fused_moe) neither allocate device memory nor
 *    synchronize the host once their kernels are loaded, so an engine may capture them in a
 *    CUDA graph; workspaces come from the caller. Calls that run at the same time on different
 *    streams each need a workspace of their own.
 *  - A context may be used from several threads at once.
 */
#ifndef MOEJIT_MOEJIT_H
#define MOEJIT_MOEJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MOEJIT_VERSION_MAJOR 0
#define MOEJIT_VERSION_MINOR 2
#define MOEJIT_VERSION_PATCH 0

/* ---- Status ---------------------------------------------------------------------------- */

/* Values are part of the ABI and never renumbered. */
typedef enum moejit_status {
  MOEJIT_OK = 0,
  MOEJIT_ERROR_INVALID_ARGUMENT = 1, /* a field or argument is out of range; the message names it */
  MOEJIT_ERROR_NOT_FOUND = 2,        /* a file, entry or symbol does not exist */
  MOEJIT_ERROR_UNAVAILABLE = 3,      /* a run-time dependency (NVRTC, libcuda, a GPU) is missing, or a
                                        compiler died, ran out of memory or time: a later call may work */
  MOEJIT_ERROR_COMPILE = 4,          /* the kernel compiler rejected the source; the message has the log */
  MOEJIT_ERROR_IO = 5,               /* a file-system operation failed */
  MOEJIT_ERROR_CORRUPT = 6,          /* stored data failed verification */
  MOEJIT_ERROR_FROZEN_MISS = 7,      /* frozen mode: the kernel is not in the store */
  MOEJIT_ERROR_UNSUPPORTED = 8,      /* a valid request this build or device cannot honor */
  MOEJIT_ERROR_INTERNAL = 9          /* a bug in moejit (or a kernel trap); please report it */
} moejit_status_t;

/* "MAJOR.MINOR.PATCH" of the loaded library. */
const char* moejit_version(void);

/* A short constant name for a status code ("invalid_argument", ...). */
const char* moejit_status_name(moejit_status_t status);

/* The message of the last failed call on this thread; "" if none. */
const char* moejit_last_error(void);

/* ---- Enumerations (values match the kernel spec's; part of the ABI) ----------------------- */

typedef enum moejit_backend {
  MOEJIT_BACKEND_AUTO = 0,   /* device when there is a GPU; host only when there is no CUDA
                                driver or no device (see moejit_context_create) */
  MOEJIT_BACKEND_DEVICE = 1, /* NVRTC -> CUBIN -> CUDA driver */
  MOEJIT_BACKEND_HOST = 2    /* host C++ compiler -> moejit's SIMT executor (slow; for checks) */
} moejit_backend_t;

typedef enum moejit_dtype {
  MOEJIT_DTYPE_BF16 = 1,
  MOEJIT_DTYPE_F16 = 2,
  MOEJIT_DTYPE_F32 = 3,
  MOEJIT_DTYPE_E4M3 = 4,
  MOEJIT_DTYPE_E8M0 = 5,
  MOEJIT_DTYPE_E2M1 = 6  /* MXFP4 activations: two codes per byte, the even element in the
                            low nibble; with E8M0 scales per 32 (MOEJIT_ACT_SCALE_BLOCK32) */
} moejit_dtype_t;

typedef enum moejit_weight_format {
  MOEJIT_WEIGHT_MXFP4 = 1,    /* E2M1 codes, one E8M0 scale per 32 k */
  MOEJIT_WEIGHT_INT4_SYM = 2, /* (q - 8) * scale per group */
  MOEJIT_WEIGHT_INT4_ASYM = 3 /* (q - zero) * scale per group */
} moejit_weight_format_t;

typedef enum moejit_layout {
  MOEJIT_LAYOUT_INDEXED = 1,    /* vLLM moe_align_block_size: sorted pair ids, block expert ids */
  MOEJIT_LAYOUT_CONTIGUOUS = 2, /* rows grouped by expert, expert_offsets[E + 1] */
  MOEJIT_LAYOUT_MASKED = 3      /* [E, max_m, K] with expert_counts[E] on the device */
} moejit_layout_t;

typedef enum moejit_epilogue {
  MOEJIT_EPILOGUE_NONE = 0,
  MOEJIT_EPILOGUE_SILU_AND_MUL = 1, /* silu(gate) * up; N = 2I in, I out */
  MOEJIT_EPILOGUE_SWIGLU_OAI = 2,   /* gpt-oss clamped SwiGLU, alpha 1.702, limit 7 */
  MOEJIT_EPILOGUE_TOPK_WEIGHT = 3   /* row scaled by its pair's routing weight (indexed only) */
} moejit_epilogue_t;

/* ---- Context --------------------------------------------------------------------------- */

typedef struct moejit_context_s* moejit_context_t;

typedef enum moejit_log_level {
  MOEJIT_LOG_ERROR = 0,
  MOEJIT_LOG_WARN = 1,
  MOEJIT_LOG_INFO = 2,
  MOEJIT_LOG_DEBUG = 3
} moejit_log_level_t;

/* Receives moejit's diagnostics (from any thread; must be thread-safe). */
typedef void (*moejit_log_fn)(void* user_data, moejit_log_level_t level, const char* message);

typedef struct moejit_context_options {
  uint32_t struct_size;
  moejit_backend_t backend;          /* default AUTO */
  int32_t device_ordinal;            /* device backend: the CUDA device (default 0). Work on a
                                        stream runs in that stream's context, which must be of
                                        this device (an error names it otherwise); with the NULL
                                        stream, in the context current on the calling thread if
                                        it is of this device, else the device's primary one. */
  const char* cache_dir;             /* writable store root; NULL: $MOEJIT_CACHE_DIR or default */
  const char* const* read_only_dirs; /* store roots searched first (shipped bundles); may be NULL */
  uint32_t read_only_dir_count;
  uint32_t compile_threads;          /* 0: $MOEJIT_COMPILE_THREADS or the cores (at most 8) */
  int32_t frozen;                    /* nonzero: a kernel missing from the store is an error */
  moejit_log_fn log;                 /* NULL: stderr */
  void* log_user_data;
  const char* usage_manifest;        /* append every spec this context uses to this file, a
                                        grouped GEMM's with the call it was chosen for, and each
                                        fused layer's call (for `moejit warmup --from-usage`);
                                        NULL: none */
  /* Added in 0.2 (read only when struct_size covers it): the target whose kernels the host
     backend runs, e.g. "sm_120a" for the block-scaled paths (E2M1 activations); NULL: sm_90a. */
  const char* host_arch;
} moejit_context_options_t;

void moejit_context_options_init(moejit_context_options_t* options);

/* Creates a context. The device backend needs NVRTC to build kernels and, only for launches and
   transfers, the CUDA driver and a GPU: a context made on a machine without them can still warm
   the store (moejit_warmup). AUTO picks the device when the driver reports one, and the host
   backend (with a warning) only when there is no driver or no device: a GPU moejit has no
   target for (compute capability 7.5, say), or one that fails to open, is an error that names
   it, because the caller's pointers would then be device memory the host backend must not read.
   `options` may be NULL: the defaults of moejit_context_options_init. */
moejit_status_t moejit_context_create(const moejit_context_options_t* options, moejit_context_t* context);
moejit_status_t moejit_context_destroy(moejit_context_t context);

/* The backend the context runs on (AUTO resolved) and its target architecture ("sm_90a"). */
moejit_status_t moejit_context_backend(moejit_context_t context, moejit_backend_t* backend,
                                       const char** arch);

typedef struct moejit_stats {
  uint32_t struct_size;
  uint64_t memory_hits;     /* kernels found in the in-memory table */
  uint64_t disk_hits;       /* kernels loaded from the store */
  uint64_t compiles;        /* kernels compiled by this context */
  double compile_ms;        /* total compile time */
  uint64_t compile_errors;
  uint64_t corrupt_entries; /* store entries that failed verification (moved aside, rebuilt) */
  uint64_t lock_waits;      /* waits for another process compiling the same kernel */
  double lock_wait_ms;
  uint64_t launches;        /* kernel launches */
} moejit_stats_t;

void moejit_stats_init(moejit_stats_t* stats);
moejit_status_t moejit_get_stats(moejit_context_t context, moejit_stats_t* stats);

/* ---- Weights --------------------------------------------------------------------------- */

/* The layouts engines hold. Shapes are for E experts of N x K weights (row n = output n). */
typedef enum moejit_weight_source {
  MOEJIT_SOURCE_PLAIN_CODES = 1, /* codes u8 [E,N,K] (0..15), scales [E,N,K/G], zeros u8 [E,N,K/G] */
  MOEJIT_SOURCE_VLLM_MXFP4 = 2,  /* u8 [E,N,K/2] (low nibble = even k), E8M0 u8 [E,N,K/32] */
  MOEJIT_SOURCE_GPTQ_V1 = 3,     /* qweight i32 [E,K/8,N], qzeros i32 [E,K/G,N/8] (NULL:
                                    symmetric), scales [E,K/G,N]; each qzeros word is the packed
                                    zero points minus 0x11111111 as one 32-bit subtraction (what
                                    GPTQModel writes, and AutoGPTQ where no zero point is 0: its
                                    per-nibble packing turns a 0 into F in that nibble and every
                                    one above it, which no reader can undo), read back by adding
                                    it */
  MOEJIT_SOURCE_GPTQ_V2 = 4,     /* as v1, qzeros holding the zero point itself */
  MOEJIT_SOURCE_AWQ = 5,         /* qweight i32 [E,K,N/8], qzeros i32 [E,K/G,N/8], scales [E,K/G,N] */
  /* Added in 0.2: compressed-tensors "pack-quantized" INT4, as llm-compressor exports it (each
     expert's tensors stacked): weight_packed i32 [E,N,K/8] (nibble i of word j: k = 8j + i),
     weight_scale [E,N,K/G], weight_zero_point i32 [E,N/8,K/G] (INT4_ASYM only; nibble i of word c:
     n = 8c + i), every nibble the signed value + 8. vLLM and SGLang transpose these tensors on
     load; what they then hold is GPTQ_V2. */
  MOEJIT_SOURCE_COMPRESSED_TENSORS = 6
} moejit_weight_source_t;

/* Row order of act-and-mul (gate/up, N = 2I) weights; PLAIN for every other weight. */
typedef enum moejit_row_order {
  MOEJIT_ROWS_PLAIN = 0,
  MOEJIT_ROWS_CONCATENATED = 1, /* gate rows 0..I-1, then up rows (vLLM's w13) */
  MOEJIT_ROWS_INTERLEAVED = 2   /* gate at even rows, up at odd rows (gpt-oss checkpoints) */
} moejit_row_order_t;

typedef struct moejit_weights_desc {
  uint32_t struct_size;
  moejit_weight_format_t format;
  uint32_t group_size;          /* 32 for MXFP4; 32, 64, 128 for INT4; per-channel INT4: 0
                                   (also K, or (uint32_t)-1 as GPTQ configs write it) */
  moejit_dtype_t scale_dtype;   /* E8M0 for MXFP4; BF16 or F16 for INT4 */
  uint32_t experts, n, k;       /* experts 1 to 4096; n and k multiples of 32 of at most 2^20,
                                   with n * k / 2 (one expert's packed bytes) at most 2^31 */
  moejit_weight_source_t source;
  moejit_row_order_t rows;
  const void* qweight;
  const void* scales;
  const void* zeros;            /* per the source; NULL where the format has none (set there: an
                                   error; GPTQ symmetric qzeros are read and must all be 8) */
  const float* bias;            /* optional [E, N] f32 in source row order */
  int32_t source_on_device;     /* device backend: the source tensors are in device memory */
  uint32_t reserved0;           /* not read: keeps the fields added in 0.2 past the end of the
                                   0.1 struct, whose sizeof (struct_size) took in this tail padding */
  /* Added in 0.2 (read only when struct_size covers it): the activations the weights will be
     used with. BF16 is the default; MXFP4 weights have a packing for F16 of their own (the E2M1
     bits where an f16 wants them), INT4 weights share one between BF16 and F16. E4M3 packs the
     tiles for FP8 activations (mma with k = 32) and E2M1 for MXFP4 ones (MXFP4 weights only;
     mma with k = 64): each packing serves its own activation type only. */
  moejit_dtype_t act_dtype;
} moejit_weights_desc_t;

void moejit_weights_desc_init(moejit_weights_desc_t* desc);

/* Weights in moejit's packed layout (templates/README.md). The buffers belong to the caller, who
   sets them and their sizes (from moejit_packed_weights_size) before moejit_pack_weights; that
   call fills them and sets the descriptive fields. Every use checks the sizes against the shape. */
typedef struct moejit_packed_weights {
  uint32_t struct_size;
  moejit_weight_format_t format;
  uint32_t group_size;          /* per-channel: K */
  moejit_dtype_t scale_dtype;
  uint32_t experts, n, k;
  int32_t act_and_mul;          /* columns interleave gate and up (packed from a gate/up order) */
  void* qweight;                /* 16-byte aligned */
  void* scales;                 /* 16-byte aligned */
  void* zeros;                  /* INT4_ASYM, 16-byte aligned; else NULL */
  float* bias;                  /* when the source had a bias (8-byte aligned), else NULL */
  uint64_t qweight_bytes, scales_bytes, zeros_bytes, bias_bytes;  /* sizes of the buffers above */
  /* Added in 0.2 (read only when struct_size covers it; else BF16): the activations the tiles
     were packed for, set by moejit_pack_weights from the source's act_dtype: BF16 (INT4 weights:
     BF16 or F16 activations), F16 (MXFP4 weights packed for F16 activations), E4M3 for FP8 ones,
     E2M1 for MXFP4 ones. MXFP4 weights packed for BF16 are refused with F16 activations and
     the other way round. Before MXFP4 had an F16 packing, F16 activations used the BF16 one:
     MXFP4 buffers packed then (or by a caller whose struct has no act_dtype) must be packed
     again for F16 activations. MXFP4 buffers now record their packing after the scales
     (templates/README.md): a GEMM given MXFP4 tiles packed for other activations than its own,
     or an unmarked buffer (packed before the mark) described as F16, writes NaN for that
     expert's outputs instead of wrong numbers. INT4 buffers carry no such mark. */
  moejit_dtype_t act_dtype;
} moejit_packed_weights_t;

typedef struct moejit_packed_sizes {
  uint64_t qweight_bytes, scales_bytes, zeros_bytes, bias_bytes;
} moejit_packed_sizes_t;

void moejit_packed_weights_init(moejit_packed_weights_t* packed);

/* Buffer sizes moejit_pack_weights needs for `desc`, after checking the description as packing
   does. Reads no tensor: qweight, scales and zeros may be NULL here; bias_bytes is 0 unless
   desc->bias is set (a bias is packed only when one is given). */
moejit_status_t moejit_packed_weights_size(moejit_context_t context, const moejit_weights_desc_t* desc,
                                           moejit_packed_sizes_t* sizes);

/* Packs `source` into the caller's buffers in `packed` (qweight, scales, zeros, bias set to
   buffers of the sizes above, in the context backend's memory). Packing happens on the host;
   device-resident sources and destinations are copied through host memory. Returns when done:
   it synchronizes `stream`, so it must not overlap a CUDA graph capture on the same device
   (pack when the model loads, before capturing). */
moejit_status_t moejit_pack_weights(moejit_context_t context, const moejit_weights_desc_t* source,
                                    moejit_packed_weights_t* packed, void* stream);

/* ---- Grouped GEMM ---------------------------------------------------------------------- */

/* The scales of quantized activations: E4M3 ones with f32 scales (value = e4m3 * scale), E2M1
   ones with E8M0 scales (value = e2m1 * 2^(byte - 127)). */
typedef enum moejit_act_scale {
  MOEJIT_ACT_SCALE_NONE = 0,     /* BF16 / F16 activations */
  MOEJIT_ACT_SCALE_TOKEN = 1,    /* one per A row: a_scales[row] */
  MOEJIT_ACT_SCALE_BLOCK128 = 2, /* one per A row and 128 k: a_scales[row * a_scale_ld + k / 128] */
  MOEJIT_ACT_SCALE_BLOCK32 = 3   /* E2M1 activations: one E8M0 byte per A row and 32 k (the MX
                                    block): a_scales[row * a_scale_ld + k / 32] */
} moejit_act_scale_t;

typedef struct moejit_grouped_gemm_args {
  uint32_t struct_size;
  const moejit_packed_weights_t* weights;
  moejit_dtype_t act_dtype;     /* BF16 or F16 (MXFP4 weights packed for that type); E4M3 (sm_89 and
                                   newer; weights packed for E4M3)
                                   or E2M1 (sm_120a / sm_121a; MXFP4 weights packed for E2M1),
                                   with act_scale and a_scales below */
  moejit_dtype_t out_dtype;     /* BF16, F16 or F32 */
  moejit_layout_t layout;
  moejit_epilogue_t epilogue;   /* act-and-mul epilogues need act_and_mul weights */
  int32_t m;                    /* indexed: pairs (tokens*topk, also the padding sentinel);
                                   contiguous: rows; masked: max rows per expert,
                                   with experts x m at most 2^31 - 1 */
  const void* a;                /* [rows, lda] act dtype, 16-byte aligned rows (E2M1: lda / 2
                                   bytes per row, two codes per byte) */
  int64_t lda;                  /* in elements: at least K, rows 16 bytes apart (a multiple of 8
                                   BF16/F16, 16 E4M3, 32 E2M1 elements) */
  void* c;                      /* [rows, ldc] out dtype (N/2 columns for act-and-mul); 4-byte
                                   aligned (8 for F32) */
  int64_t ldc;                  /* even, at least the output columns. lda, ldc and a_scale_ld
                                   times the rows (m; masked: experts x m) stay below 2^60 */
  /* indexed: vLLM moe_align_block_size output, aligned over THIS weights' experts. The grid
     covers m + min(m, experts) * (block_size - 1) slots, so pairs of experts that live on other
     ranks must get no slots (vLLM's align with an expert_map and invalid experts ignored, or
     moejit_fused_moe, which aligns so). Blocks whose expert is outside [0, experts) are skipped. */
  const int32_t* sorted_token_ids; /* at least *num_tokens_post_pad entries */
  const int32_t* expert_ids;    /* local expert of each block, -1 for unused blocks */
  const int32_t* num_tokens_post_pad; /* a multiple of block_size within the slots above, as
                                         vLLM's align writes it; read on the device, so not
                                         checked: a larger count reads past sorted_token_ids */
  int32_t block_size;           /* the moe_align block size (16, 32, 64 or 128): the tile rows */
  int32_t a_row_divisor;        /* A row = pair id / a_row_divisor: topk, or 1 */
  /* contiguous */
  const int32_t* expert_offsets; /* [E + 1], non-decreasing in [0, m]: expert e's rows are
                                    offsets[e] .. offsets[e + 1] - 1. Read on the device, where
                                    each is clamped to [0, m]: bad offsets give wrong rows, never
                                    reads or writes outside A and C */
  /* masked */
  const int32_t* expert_counts;  /* [E] */
  const float* topk_weights;     /* TOPK_WEIGHT: one per pair id */
  uint32_t rows_per_expert_hint; /* contiguous/masked tile choice; 0: estimated from m */
  void* workspace;               /* moejit_grouped_gemm_workspace_size bytes, 16-byte aligned, zero-filled once
                                    before first use (every call leaves it zero, so one buffer
                                    sized for the largest call serves calls of any size);
                                    NULL if 0 bytes */
  uint64_t workspace_bytes;
  /* Added in 0.2 (read only when struct_size covers them): quantized activations' scales, in the
     memory of `a`, indexed by A row (the rows `a` holds, as lda counts them). E4M3: f32, TOKEN or
     BLOCK128. E2M1: E8M0 bytes, BLOCK32, rows 16-byte aligned. */
  moejit_act_scale_t act_scale;  /* TOKEN or BLOCK128 with E4M3; BLOCK32 with E2M1; NONE otherwise */
  const void* a_scales;          /* f32 (E4M3, 4-byte aligned) or uint8_t E8M0 (E2M1, 16-byte
                                    aligned) */
  int64_t a_scale_ld;            /* BLOCK128: floats between rows, at least K / 128; BLOCK32: bytes
                                    between rows, a multiple of 16 of at least K / 32 */
  /* Added in 0.2 (read only when struct_size covers them; else 0): BLOCK128 scales stored
     column-major, as DeepEP's dispatch and DeepGEMM lay them out, read in place: scale (row,
     k / 128) is a_scales[row * a_scale_ld + (k / 128) * a_scale_k_stride]. E.g. [K / 128][rows]:
     a_scale_ld 1, a_scale_k_stride rows (or more). Masked layout: row t of expert e reads
     a_scales[e * a_scale_expert_stride + t * a_scale_ld + (k / 128) * a_scale_k_stride], so
     DeepEP's low-latency [E][K / 128][m] slabs are a_scale_ld 1, a_scale_k_stride m,
     a_scale_expert_stride (K / 128) * m. Other granularities and layouts: both 0. */
  int64_t a_scale_k_stride;      /* floats between a row's consecutive 128-k blocks; 0 or 1:
                                    row-major (a_scale_ld as above) */
  int64_t a_scale_expert_stride; /* masked: floats between consecutive experts' scales; 0:
                                    m * a_scale_ld (experts' rows follow each other) */
} moejit_grouped_gemm_args_t;

void moejit_grouped_gemm_args_init(moejit_grouped_gemm_args_t* args);
/* Reads shapes only, as moejit_fused_moe_workspace_size does: data pointers and the weights'
   buffers may be NULL. */
moejit_status_t moejit_grouped_gemm_workspace_size(moejit_context_t context,
                                                   const moejit_grouped_gemm_args_t* args, uint64_t* bytes);
moejit_status_t moejit_grouped_gemm(moejit_context_t context, const moejit_grouped_gemm_args_t* args,
                                    void* stream);

/* ---- Fused MoE layer -------------------------------------------------------------------- */

/* output[t] = sum over k of topk_weights[t,k] * w2_e(act(w13_e hidden[t])), e = topk_ids[t,k]:
   routing align -> gate/up GEMM with the activation -> down GEMM with the routing weight ->
   a top-k reduction in fixed k order (deterministic). */
typedef struct moejit_fused_moe_args {
  uint32_t struct_size;
  const moejit_packed_weights_t* w13; /* N = 2I, K = H, act_and_mul; at most 4096 local experts */
  const moejit_packed_weights_t* w2;  /* N = H, K = I; same experts as w13 */
  moejit_dtype_t act_dtype;           /* hidden states: BF16 or F16; E4M3 for W4A8 (sm_89 and
                                         newer), E2M1 for W4A4 (sm_120a / sm_121a) (below).
                                         With W4A8/W4A4 weights, rows moejit quantizes (16-bit
                                         hidden states, and the intermediate) hold at most 65536
                                         values */
  moejit_dtype_t out_dtype;           /* BF16, F16 or F32 */
  moejit_epilogue_t activation;       /* SILU_AND_MUL or SWIGLU_OAI */
  int32_t tokens;                     /* T >= 0; max(T, max_tokens) x topk + 127 x w13->experts
                                         (the routed slots with padding) at most 2^31 - 1.
                                         T = 0 (an expert-parallel rank that got no token):
                                         the shapes are checked, nothing is read or written,
                                         the data pointers may be NULL */
  uint32_t topk;                      /* 1 to 64 */
  uint32_t global_experts;            /* range of topk_ids, at most 2^31 - 1; 0: w13->experts */
  const void* hidden;                 /* [T, H] act dtype, 16-byte aligned (as is output); E2M1:
                                         H / 2 bytes per row */
  const int32_t* topk_ids;            /* [T, topk] global expert ids, 4-byte aligned (as are
                                         topk_weights and expert_map) */
  const float* topk_weights;          /* [T, topk] */
  const int32_t* expert_map;          /* [global_experts] -> local expert in [0, w13->experts)
                                         or -1 (not on this rank: contributes nothing); NULL:
                                         identity, and then global_experts must equal
                                         w13->experts. Checked like topk_ids (see
                                         MOEJIT_CHECK_INPUTS) */
  void* output;                       /* [T, H] out dtype. With F32 each pair's row is still
                                         rounded to the act dtype before the top-k sum
                                         (relative error ~1e-3, not f32-level) */
  void* workspace;                    /* moejit_fused_moe_workspace_size bytes, 256-byte
                                         aligned; any contents (no zeroing needed, nothing kept
                                         between calls) */
  uint64_t workspace_bytes;
  int32_t max_tokens;                 /* workspace sized for up to this many tokens (graph
                                         capture at several T); 0: tokens */
  uint32_t reserved0;                 /* not read: keeps the fields added in 0.2 past the end of
                                         the 0.1 struct, whose sizeof took in this tail padding */
  /* Added in 0.2 (read only when struct_size covers them): W4A8. When w13 and w2 were packed
     with act_dtype E4M3, both GEMMs run on e4m3 activations with f32 scales of granularity
     act_scale (TOKEN or BLOCK128; BLOCK128 needs H and I multiples of 128). The hidden states
     are then either E4M3 (act_dtype E4M3, with hidden_scales) or BF16/F16, which the layer
     quantizes itself; it quantizes the gate/up output the same way for the down projection.
     Its recipe, per row or per 128 columns: amax = max |x| (NaN ignored), scale = amax / 448
     (1 when amax is 0), q = e4m3(x / scale) rounded to nearest even and saturated to +-448;
     hidden states quantized so by the caller give the same output bit for bit.
     W4A4 likewise when they were packed with act_dtype E2M1 (MXFP4 weights; sm_120a / sm_121a,
     H and I multiples of 64): e2m1 activations with E8M0 scales per 32 (BLOCK32), the hidden
     states E2M1 (with hidden_scales) or BF16/F16. The recipe, per 32 columns: amax = max |x|,
     scale = 2^e for the smallest e >= -127 with 6 * 2^e >= amax (1 when amax is 0; E8M0 0xFF,
     NaN, when the block holds NaN or inf), q = e2m1(x / scale) rounded to nearest even; two
     codes per byte, the even column in the low nibble (templates/moe/quantize_params.cuh). */
  moejit_act_scale_t act_scale;       /* NONE for weights packed for 16-bit activations */
  const void* hidden_scales;          /* act_dtype E4M3: f32 [T] (TOKEN) or [T, hidden_scale_ld]
                                         (BLOCK128), 4-byte aligned; E2M1: E8M0 bytes
                                         [T, hidden_scale_ld], 16-byte aligned; in the memory of
                                         hidden */
  int64_t hidden_scale_ld;            /* BLOCK128: floats between rows, at least H / 128;
                                         BLOCK32: bytes, a multiple of 16 of at least H / 32.
                                         With act_dtype E4M3 or E2M1, max(T, max_tokens) x
                                         hidden_scale_ld (and (H / 128 + 1) x
                                         hidden_scale_k_stride) stay below 2^60 */
  /* Added in 0.2 (read only when struct_size covers it; else 0): E4M3 hidden states with
     BLOCK128 scales stored column-major (DeepEP's dispatch, DeepGEMM's MN-major layout), read in
     place: scale (t, h / 128) is hidden_scales[t * hidden_scale_ld + (h / 128) *
     hidden_scale_k_stride]; [H / 128][T] is hidden_scale_ld 1, hidden_scale_k_stride T (or more).
     0 or 1: row-major; negative values are refused, and values above 1 are taken only with
     E4M3 hidden states and BLOCK128 scales. The layer's own scales (of the gate/up output) are
     row-major. */
  int64_t hidden_scale_k_stride;
} moejit_fused_moe_args_t;

void moejit_fused_moe_args_init(moejit_fused_moe_args_t* args);
/* Reads shapes only (the w13/w2 descriptors' formats and shapes, tokens/max_tokens, topk,
   global_experts, dtypes, activation): every data pointer may be NULL, the weights' buffers
   (and their sizes) too, so engines size the workspace at start-up, before loading weights.
   A layer that moejit_fused_moe would refuse for its shapes, dtypes or the context's target is
   refused here with the same message. tokens and max_tokens both 0: 0 bytes. */
moejit_status_t moejit_fused_moe_workspace_size(moejit_context_t context, const moejit_fused_moe_args_t* args,
                                                uint64_t* bytes);
moejit_status_t moejit_fused_moe(moejit_context_t context, const moejit_fused_moe_args_t* args, void* stream);

/* ---- Warm-up --------------------------------------------------------------------------- */

typedef struct moejit_model_desc {
  uint32_t struct_size;
  uint32_t hidden, intermediate, experts, topk;
  moejit_weight_format_t format;
  uint32_t group_size;          /* 32 for MXFP4; 32, 64, 128 for INT4; per-channel INT4: 0
                                   (also (uint32_t)-1 as GPTQ configs write it) */
  moejit_dtype_t scale_dtype;
  moejit_dtype_t act_dtype;     /* default BF16; E4M3: W4A8, E2M1: W4A4 (act_scale below) */
  moejit_dtype_t out_dtype;     /* default BF16 */
  moejit_epilogue_t activation; /* default SILU_AND_MUL */
  uint32_t tensor_parallel;     /* intermediate is split this many ways (default 1) */
  uint32_t expert_parallel;     /* experts are split this many ways (default 1) */
  uint32_t max_tokens;          /* largest T the engine runs (default 8192; 1 to 2^20, and
                                   max_tokens x topk + 127 per local expert below 2^31). Each
                                   rank's weights must be packed shapes: at most 4096 local
                                   experts, hidden and 2 x intermediate per rank at most 2^20,
                                   hidden x intermediate per rank at most 2^31 */
  /* Added in 0.2 (read only when struct_size covers it): with act_dtype E4M3 the layer is W4A8
     (weights packed for E4M3, hidden states in BF16, F16 or E4M3; see moejit_fused_moe_args_t)
     and this is its scales' granularity, TOKEN or BLOCK128; with E2M1 it is W4A4 (MXFP4 weights
     packed for E2M1; targets sm_120a / sm_121a) and this is BLOCK32; NONE otherwise. */
  moejit_act_scale_t act_scale;
} moejit_model_desc_t;

void moejit_model_desc_init(moejit_model_desc_t* model);

/* Added in 0.2: reads a Hugging Face config.json (its text, `length` bytes) into `model`: the
   MoE layer's shape (hidden, intermediate, experts, topk; activation SWIGLU_OAI for gpt_oss, else
   SILU_AND_MUL) and, from its quantization_config, the checkpoint's weights (format, group_size,
   scale_dtype: gpt-oss MXFP4, GPTQ, AutoAWQ, compressed-tensors pack-quantized INT4) and, for a
   compressed-tensors W4AFP8 export, its activations (act_dtype E4M3, act_scale TOKEN or
   BLOCK128). A config without quantization_config leaves the weight fields as they are, or sets
   MXFP4 (group 32, E8M0) where format is unset. Other fields keep their values: initialize
   `model` with moejit_model_desc_init, then set tensor_parallel, expert_parallel, max_tokens.
   A checkpoint moejit cannot run (FP8 or NVFP4 weights, act-order GPTQ, ...) is
   MOEJIT_ERROR_UNSUPPORTED with the reason; a config that is not an MoE model's, or a malformed
   quantization_config, is MOEJIT_ERROR_INVALID_ARGUMENT naming the field. */
moejit_status_t moejit_model_desc_from_hf_config(const char* config_json, size_t length, moejit_model_desc_t* model);

/* Progress: `done` of `total` kernels, `what` describes the last one. */
typedef void (*moejit_progress_fn)(void* user_data, uint32_t done, uint32_t total, const char* what);

/* Compiles into the store every kernel the fused MoE layer of `model` can use, for each of
   `archs` ("sm_90a", ...; NULL or 0: the context's). A plain name with an `a` form ("sm_90",
   "sm_100", "sm_120", ...) warms the `a` form, which is what GPUs of that compute capability
   run. Needs no GPU for the device backend. */
moejit_status_t moejit_warmup(moejit_context_t context, const moejit_model_desc_t* model,
                              const char* const* archs, uint32_t arch_count, moejit_progress_fn progress,
                              void* progress_user_data);

/* Before CUDA graph capture: finds (compiling on a miss, unless frozen) every kernel the fused
   MoE layer of `model` can use for 1..max_tokens tokens on THIS context's device (its
   architecture and SM count), and loads each on the calling thread's current context (the
   device's primary one when none is current), so that fused calls captured afterwards at any
   T <= max_tokens launch without loading a module. Call it with the context of the streams
   the capture will use made current (a stream's work runs in the stream's own context). Needs
   the GPU for the device backend; on the host backend it resolves the kernels only. */
moejit_status_t moejit_prepare(moejit_context_t context, const moejit_model_desc_t* model,
                               moejit_progress_fn progress, void* progress_user_data);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MOEJIT_MOEJIT_H */
