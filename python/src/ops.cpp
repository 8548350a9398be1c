// The launch calls: the fused MoE layer and the grouped GEMM, with their workspace queries. The
// Python layer has checked shapes and dtypes; here arrays become pointers (contiguous, in the
// context's memory; per-128 activation scales through their strides) and the GIL is released
// around the C call, which may compile, log or run the host backend for a long time.

#include "weights.hpp"

namespace moejit_python {

namespace {

const moejit_packed_weights_t* weights_of(const Packed& w, const Context& ctx, const char* name) {
  if (w.memory().on_device != ctx.memory().on_device || w.memory().device != ctx.memory().device)
    invalid_argument(std::string("argument '") + name +
                     "' was packed for another context's memory: expected weights packed for this context");
  return &w.get();
}

// Activation scales as the C ABI reads them: f32 per token a contiguous [rows]; f32 per 128 k
// [rows, K / 128] (masked: or [E, m, K / 128]) through the array's strides, row-major or
// column-major (DeepEP's dispatch and DeepGEMM give them column-major); E8M0 bytes per 32 k
// [rows, >= K / 32] with their row stride.
struct ScaleLayout {
  const void* data = nullptr;
  int64_t ld = 0, k_stride = 0, expert_stride = 0;
};

ScaleLayout scale_layout(const nb::handle& array, int act_scale, const char* name, const Memory& memory) {
  const StridedArray s = optional_strided_of(array, name, memory);
  ScaleLayout l;
  l.data = s.data;
  if (s.data == nullptr) return l;
  if (act_scale == MOEJIT_ACT_SCALE_BLOCK32) {
    // E8M0 bytes of e2m1 rows: [rows, >= K / 32], each row's bytes contiguous.
    if (s.ndim != 2 || s.stride[1] > 1)
      invalid_argument(std::string("argument '") + name + "' is not a [rows, K / 32] uint8 array with contiguous rows");
    l.ld = s.stride[0] != 0 ? s.stride[0] : (s.shape[1] + 15) / 16 * 16;  // one row: any multiple of 16 fits
    return l;
  }
  if (act_scale != MOEJIT_ACT_SCALE_BLOCK128) {
    if (s.ndim != 1 || s.stride[0] > 1)
      invalid_argument(std::string("argument '") + name + "' is not contiguous: expected a contiguous [rows] of "
                       "per-token scales");
    return l;
  }
  const size_t rows = s.ndim - 2, blocks = s.ndim - 1;  // the Python layer checked 2 or 3 dimensions
  l.k_stride = s.stride[blocks] == 0 ? 1 : s.stride[blocks];
  // One row: no row stride to read; the C ABI wants one that fits the layout.
  l.ld = s.stride[rows] != 0 ? s.stride[rows] : l.k_stride > 1 ? 1 : s.shape[blocks];
  if (s.ndim == 3) l.expert_stride = s.stride[0];  // 0 for one expert: the C ABI's default
  return l;
}

struct FusedShape {
  const Packed* w13;
  const Packed* w2;
  int act_dtype, out_dtype, activation;
  int32_t tokens;
  uint32_t topk, global_experts;
  int32_t max_tokens;
  int act_scale;
};

moejit_fused_moe_args_t fused_args(const Context& ctx, const FusedShape& f) {
  moejit_fused_moe_args_t a;
  moejit_fused_moe_args_init(&a);
  a.w13 = weights_of(*f.w13, ctx, "w13");
  a.w2 = weights_of(*f.w2, ctx, "w2");
  a.act_dtype = static_cast<moejit_dtype_t>(f.act_dtype);
  a.out_dtype = static_cast<moejit_dtype_t>(f.out_dtype);
  a.activation = static_cast<moejit_epilogue_t>(f.activation);
  a.tokens = f.tokens;
  a.topk = f.topk;
  a.global_experts = f.global_experts;
  a.max_tokens = f.max_tokens;
  a.act_scale = static_cast<moejit_act_scale_t>(f.act_scale);
  return a;
}

struct GemmShape {
  const Packed* weights;
  int act_dtype, out_dtype, layout, epilogue;
  int32_t m, block_size, a_row_divisor;
  uint32_t rows_per_expert_hint;
  int act_scale;
};

moejit_grouped_gemm_args_t gemm_args(const Context& ctx, const GemmShape& g) {
  moejit_grouped_gemm_args_t a;
  moejit_grouped_gemm_args_init(&a);
  a.weights = weights_of(*g.weights, ctx, "weights");
  a.act_dtype = static_cast<moejit_dtype_t>(g.act_dtype);
  a.out_dtype = static_cast<moejit_dtype_t>(g.out_dtype);
  a.layout = static_cast<moejit_layout_t>(g.layout);
  a.epilogue = static_cast<moejit_epilogue_t>(g.epilogue);
  a.m = g.m;
  a.block_size = g.block_size;
  a.a_row_divisor = g.a_row_divisor;
  a.rows_per_expert_hint = g.rows_per_expert_hint;
  a.act_scale = static_cast<moejit_act_scale_t>(g.act_scale);
  return a;
}

}  // namespace

void bind_ops(nb::module_& m) {
  m.def(
      "fused_moe_workspace_size",
      [](const Context& ctx, const Packed& w13, const Packed& w2, int act_dtype, int out_dtype, int activation,
         int32_t tokens, uint32_t topk, uint32_t global_experts, int32_t max_tokens, int act_scale) {
        moejit_fused_moe_args_t a = fused_args(
            ctx, {&w13, &w2, act_dtype, out_dtype, activation, tokens, topk, global_experts, max_tokens, act_scale});
        uint64_t bytes = 0;
        // Unlocked: the first query may load the CUDA driver and ask the device for its SM count.
        check(call_unlocked(ctx, [&](moejit_context_t c) { return moejit_fused_moe_workspace_size(c, &a, &bytes); }));
        return bytes;
      },
      nb::arg("ctx"), nb::arg("w13"), nb::arg("w2"), nb::arg("act_dtype"), nb::arg("out_dtype"),
      nb::arg("activation"), nb::arg("tokens"), nb::arg("topk"), nb::arg("global_experts"), nb::arg("max_tokens"),
      nb::arg("act_scale"));

  m.def(
      "fused_moe",
      [](const Context& ctx, const Packed& w13, const Packed& w2, int act_dtype, int out_dtype, int activation,
         int32_t tokens, uint32_t topk, uint32_t global_experts, int32_t max_tokens, int act_scale,
         const Array& hidden, nb::handle hidden_scales, const Array& topk_ids,
         const Array& topk_weights, nb::handle expert_map, MutableArray output, nb::handle workspace,
         uintptr_t stream) {
        moejit_fused_moe_args_t a = fused_args(
            ctx, {&w13, &w2, act_dtype, out_dtype, activation, tokens, topk, global_experts, max_tokens, act_scale});
        const Memory& mem = ctx.memory();
        a.hidden = data_of(hidden, "hidden", mem);
        const ScaleLayout scales = scale_layout(hidden_scales, act_scale, "hidden_scales", mem);
        a.hidden_scales = scales.data;
        a.hidden_scale_ld = scales.ld;
        a.hidden_scale_k_stride = scales.k_stride;
        a.topk_ids = static_cast<const int32_t*>(data_of(topk_ids, "topk_ids", mem));
        a.topk_weights = static_cast<const float*>(data_of(topk_weights, "topk_weights", mem));
        a.expert_map = static_cast<const int32_t*>(optional_data_of(expert_map, "expert_map", mem));
        a.output = data_of(output, "output", mem);
        const Buffer w = writable_buffer(workspace, "workspace", mem);
        a.workspace = w.data;
        a.workspace_bytes = w.bytes;
        check(call_unlocked(ctx, [&](moejit_context_t c) { return moejit_fused_moe(c, &a, reinterpret_cast<void*>(stream)); }));
      },
      nb::arg("ctx"), nb::arg("w13"), nb::arg("w2"), nb::arg("act_dtype"), nb::arg("out_dtype"),
      nb::arg("activation"), nb::arg("tokens"), nb::arg("topk"), nb::arg("global_experts"), nb::arg("max_tokens"),
      nb::arg("act_scale"), nb::arg("hidden"), nb::arg("hidden_scales").none(), nb::arg("topk_ids"), nb::arg("topk_weights"), nb::arg("expert_map").none(), nb::arg("output"),
      nb::arg("workspace").none(), nb::arg("stream"));

  m.def(
      "grouped_gemm_workspace_size",
      [](const Context& ctx, const Packed& weights, int act_dtype, int out_dtype, int layout, int epilogue, int32_t m,
         int32_t block_size, int32_t a_row_divisor, uint32_t rows_per_expert_hint, int act_scale) {
        moejit_grouped_gemm_args_t a = gemm_args(ctx, {&weights, act_dtype, out_dtype, layout, epilogue, m, block_size,
                                                       a_row_divisor, rows_per_expert_hint, act_scale});
        uint64_t bytes = 0;
        // Unlocked: the first query may load the CUDA driver and ask the device for its SM count.
        check(call_unlocked(ctx, [&](moejit_context_t c) { return moejit_grouped_gemm_workspace_size(c, &a, &bytes); }));
        return bytes;
      },
      nb::arg("ctx"), nb::arg("weights"), nb::arg("act_dtype"), nb::arg("out_dtype"), nb::arg("layout"),
      nb::arg("epilogue"), nb::arg("m"), nb::arg("block_size"), nb::arg("a_row_divisor"),
      nb::arg("rows_per_expert_hint"), nb::arg("act_scale"));

  m.def(
      "grouped_gemm",
      [](const Context& ctx, const Packed& weights, int act_dtype, int out_dtype, int layout, int epilogue, int32_t m,
         int32_t block_size, int32_t a_row_divisor, uint32_t rows_per_expert_hint, int act_scale, const Array& a_rows,
         int64_t lda, nb::handle a_scales, MutableArray c, int64_t ldc,
         nb::handle sorted_token_ids, nb::handle expert_ids, nb::handle num_tokens_post_pad,
         nb::handle expert_offsets, nb::handle expert_counts, nb::handle topk_weights, nb::handle workspace,
         uintptr_t stream) {
        moejit_grouped_gemm_args_t a = gemm_args(ctx, {&weights, act_dtype, out_dtype, layout, epilogue, m, block_size,
                                                       a_row_divisor, rows_per_expert_hint, act_scale});
        const Memory& mem = ctx.memory();
        a.a = data_of(a_rows, "a", mem);
        a.lda = lda;
        const ScaleLayout scales = scale_layout(a_scales, act_scale, "a_scales", mem);
        a.a_scales = scales.data;
        a.a_scale_ld = scales.ld;
        a.a_scale_k_stride = scales.k_stride;
        a.a_scale_expert_stride = scales.expert_stride;
        a.c = data_of(c, "c", mem);
        a.ldc = ldc;
        a.sorted_token_ids = static_cast<const int32_t*>(optional_data_of(sorted_token_ids, "sorted_token_ids", mem));
        a.expert_ids = static_cast<const int32_t*>(optional_data_of(expert_ids, "expert_ids", mem));
        a.num_tokens_post_pad =
            static_cast<const int32_t*>(optional_data_of(num_tokens_post_pad, "num_tokens_post_pad", mem));
        a.expert_offsets = static_cast<const int32_t*>(optional_data_of(expert_offsets, "expert_offsets", mem));
        a.expert_counts = static_cast<const int32_t*>(optional_data_of(expert_counts, "expert_counts", mem));
        a.topk_weights = static_cast<const float*>(optional_data_of(topk_weights, "topk_weights", mem));
        const Buffer w = writable_buffer(workspace, "workspace", mem);
        a.workspace = w.data;
        a.workspace_bytes = w.bytes;
        check(call_unlocked(
            ctx, [&](moejit_context_t c) { return moejit_grouped_gemm(c, &a, reinterpret_cast<void*>(stream)); }));
      },
      nb::arg("ctx"), nb::arg("weights"), nb::arg("act_dtype"), nb::arg("out_dtype"), nb::arg("layout"),
      nb::arg("epilogue"), nb::arg("m"), nb::arg("block_size"), nb::arg("a_row_divisor"),
      nb::arg("rows_per_expert_hint"), nb::arg("act_scale"), nb::arg("a"), nb::arg("lda"),
      nb::arg("a_scales").none(), nb::arg("c"), nb::arg("ldc"),
      nb::arg("sorted_token_ids").none(), nb::arg("expert_ids").none(), nb::arg("num_tokens_post_pad").none(),
      nb::arg("expert_offsets").none(), nb::arg("expert_counts").none(), nb::arg("topk_weights").none(),
      nb::arg("workspace").none(), nb::arg("stream"));
}

}  // namespace moejit_python
