/* A C program written against moejit.h alone: packs INT4 weights, runs one fused MoE layer on
 * the host backend and checks it against a plain double-precision reference computed here.
 * Usage: fused_moe_host CACHE_DIR. Exit status 0 when the relative error is below 1e-2. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moejit/moejit.h"

enum { H = 256, I = 128, E = 8, TOPK = 2, T = 5, GROUP = 64 };

static unsigned long long rng_state = 0x9e3779b97f4a7c15ull;
static unsigned next_u32(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (unsigned)(rng_state >> 33);
}

/* bf16 of a float that bf16 holds exactly (multiples of 1/8 of small magnitude). */
static unsigned short to_bf16(float f) {
  unsigned bits;
  memcpy(&bits, &f, 4);
  return (unsigned short)(bits >> 16);
}

static double silu(double x) { return x / (1.0 + exp(-x)); }

#define CHECK(call)                                                                  \
  do {                                                                               \
    moejit_status_t s_ = (call);                                                     \
    if (s_ != MOEJIT_OK) {                                                           \
      fprintf(stderr, "%s failed: %s: %s\n", #call, moejit_status_name(s_), moejit_last_error()); \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

/* Packs plain INT4 codes [E][n][k] with f16 scales [E][n][k/GROUP] (each scale 2^-6: f16 0x2400). */
static void pack(moejit_context_t ctx, const unsigned char* codes, const unsigned short* scales, unsigned n,
                 unsigned k, moejit_row_order_t rows, moejit_packed_weights_t* out) {
  moejit_weights_desc_t d;
  moejit_weights_desc_init(&d);
  d.format = MOEJIT_WEIGHT_INT4_SYM;
  d.group_size = GROUP;
  d.scale_dtype = MOEJIT_DTYPE_F16;
  d.experts = E;
  d.n = n;
  d.k = k;
  d.source = MOEJIT_SOURCE_PLAIN_CODES;
  d.rows = rows;
  d.qweight = codes;
  d.scales = scales;
  moejit_packed_sizes_t sizes;
  CHECK(moejit_packed_weights_size(ctx, &d, &sizes));
  moejit_packed_weights_init(out);
  out->qweight = aligned_alloc(256, sizes.qweight_bytes);
  out->scales = aligned_alloc(256, (sizes.scales_bytes + 255) / 256 * 256);
  out->qweight_bytes = sizes.qweight_bytes;
  out->scales_bytes = sizes.scales_bytes;
  CHECK(moejit_pack_weights(ctx, &d, out, NULL));
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CACHE_DIR\n", argv[0]);
    return 2;
  }
  moejit_context_options_t options;
  moejit_context_options_init(&options);
  options.backend = MOEJIT_BACKEND_HOST;
  options.cache_dir = argv[1];
  moejit_context_t ctx;
  CHECK(moejit_context_create(&options, &ctx));

  /* Weights: w13 [E][2I][H] (gate rows, then up rows), w2 [E][H][I]; codes 0..15, scale 2^-6. */
  static unsigned char w13[E * 2 * I * H], w2[E * H * I];
  static unsigned short s13[E * 2 * I * (H / GROUP)], s2[E * H * (I / GROUP)];
  for (size_t i = 0; i < sizeof w13; ++i) w13[i] = (unsigned char)(next_u32() % 16);
  for (size_t i = 0; i < sizeof w2; ++i) w2[i] = (unsigned char)(next_u32() % 16);
  for (size_t i = 0; i < sizeof s13 / 2; ++i) s13[i] = 0x2400;
  for (size_t i = 0; i < sizeof s2 / 2; ++i) s2[i] = 0x2400;
  moejit_packed_weights_t p13, p2;
  pack(ctx, w13, s13, 2 * I, H, MOEJIT_ROWS_CONCATENATED, &p13);
  pack(ctx, w2, s2, H, I, MOEJIT_ROWS_PLAIN, &p2);

  /* Tokens: hidden states multiples of 1/8 in [-2, 2); distinct experts per token. */
  unsigned short* hidden = aligned_alloc(256, sizeof(unsigned short) * T * H);
  double hidden_d[T][H];
  int ids[T * TOPK];
  float weights[T * TOPK];
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < H; ++h) {
      float v = (float)((int)(next_u32() % 32) - 16) / 8.0f;
      hidden[t * H + h] = to_bf16(v);
      hidden_d[t][h] = v;
    }
    int first = (int)(next_u32() % E);
    ids[t * TOPK] = first;
    ids[t * TOPK + 1] = (first + 1 + (int)(next_u32() % (E - 1))) % E;
    weights[t * TOPK] = 0.25f + (float)(next_u32() % 8) / 16.0f;
    weights[t * TOPK + 1] = 1.0f - weights[t * TOPK];
  }

  float* output = aligned_alloc(256, sizeof(float) * T * H);
  for (int i = 0; i < T * H; ++i) output[i] = NAN;
  moejit_fused_moe_args_t args;
  moejit_fused_moe_args_init(&args);
  args.w13 = &p13;
  args.w2 = &p2;
  args.act_dtype = MOEJIT_DTYPE_BF16;
  args.out_dtype = MOEJIT_DTYPE_F32;
  args.activation = MOEJIT_EPILOGUE_SILU_AND_MUL;
  args.tokens = T;
  args.topk = TOPK;
  args.hidden = hidden;
  args.topk_ids = ids;
  args.topk_weights = weights;
  args.output = output;
  uint64_t workspace_bytes = 0;
  CHECK(moejit_fused_moe_workspace_size(ctx, &args, &workspace_bytes));
  args.workspace = aligned_alloc(256, (workspace_bytes + 255) / 256 * 256);
  args.workspace_bytes = workspace_bytes;
  CHECK(moejit_fused_moe(ctx, &args, NULL));

  /* Reference: out[t] = sum_k w_k * W2_e (silu(W_gate_e x) * (W_up_e x)), W = (code - 8) / 64. */
  double err2 = 0, ref2 = 0;
  for (int t = 0; t < T; ++t) {
    double out[H] = {0};
    for (int j = 0; j < TOPK; ++j) {
      int e = ids[t * TOPK + j];
      double act[I];
      for (int i = 0; i < I; ++i) {
        double gate = 0, up = 0;
        for (int h = 0; h < H; ++h) {
          gate += hidden_d[t][h] * (w13[((size_t)e * 2 * I + i) * H + h] - 8) / 64.0;
          up += hidden_d[t][h] * (w13[((size_t)e * 2 * I + I + i) * H + h] - 8) / 64.0;
        }
        act[i] = silu(gate) * up;
      }
      for (int h = 0; h < H; ++h) {
        double sum = 0;
        for (int i = 0; i < I; ++i) sum += act[i] * (w2[((size_t)e * H + h) * I + i] - 8) / 64.0;
        out[h] += weights[t * TOPK + j] * sum;
      }
    }
    for (int h = 0; h < H; ++h) {
      double d = output[t * H + h] - out[h];
      if (!isfinite(output[t * H + h])) {
        fprintf(stderr, "output[%d][%d] = %f is not finite\n", t, h, output[t * H + h]);
        return 1;
      }
      err2 += d * d;
      ref2 += out[h] * out[h];
    }
  }
  double rel = sqrt(err2 / ref2);
  moejit_stats_t stats;
  moejit_stats_init(&stats);
  CHECK(moejit_get_stats(ctx, &stats));
  printf("fused MoE on the host backend: relative error %.3e, %llu launches, %llu compiles\n", rel,
         (unsigned long long)stats.launches, (unsigned long long)stats.compiles);
  CHECK(moejit_context_destroy(ctx));
  free(p13.qweight);
  free(p13.scales);
  free(p2.qweight);
  free(p2.scales);
  free(hidden);
  free(output);
  free(args.workspace);
  return rel < 1e-2 ? 0 : 1;
}
