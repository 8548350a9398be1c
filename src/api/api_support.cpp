#include "api/api_support.hpp"

#include "gemm/grouped_gemm_params.cuh"
#include "quant/formats.hpp"
#include "quant/pack.hpp"
#include "spec/act_scale_rule.hpp"
#include "spec/spec_fields.hpp"

namespace moejit::api {
namespace {
thread_local std::string last_error_message;
}

void set_last_error(const Status& status) { last_error_message = status.message(); }
const char* last_error_text() { return last_error_message.c_str(); }
void clear_last_error() { last_error_message.clear(); }

Status check_struct(const void* p, std::uint32_t struct_size, std::size_t minimum, const char* name) {
  if (p == nullptr)
    return error(Code::invalid_argument, "argument '{}' is null: expected a struct initialized with its *_init function",
                 name);
  if (struct_size < minimum)
    return error(Code::invalid_argument,
                 "argument '{}': struct_size = {}, expected at least {} (initialize it with its *_init function)",
                 name, struct_size, minimum);
  return {};
}

Status check_context(moejit_context_t context) {
  if (context == nullptr)
    return error(Code::invalid_argument, "argument 'context' is null: expected a context from moejit_context_create");
  return {};
}

Result<DType> dtype_of(int value, const char* argument) {
  if (value < static_cast<int>(DType::bf16) || value > static_cast<int>(DType::e2m1))
    return error(Code::invalid_argument, "argument '{}' = {}: expected a moejit_dtype_t (1..6)", argument, value);
  return static_cast<DType>(value);
}

Result<Epilogue> epilogue_of(int value, const char* argument) {
  if (value < 0 || value > static_cast<int>(Epilogue::topk_weight))
    return error(Code::invalid_argument, "argument '{}' = {}: expected a moejit_epilogue_t (0..3)", argument, value);
  return static_cast<Epilogue>(value);
}

Result<ActScale> act_scale_of(int value, const char* argument) {
  if (value < MOEJIT_ACT_SCALE_NONE || value > MOEJIT_ACT_SCALE_BLOCK32)
    return error(Code::invalid_argument, "argument '{}' = {}: expected a moejit_act_scale_t (0..3)", argument, value);
  return static_cast<ActScale>(value);
}

Status check_act_scale(DType act, ActScale scale, const char* argument) {
  if (act_scale_fits(act, scale)) return {};
  const char* expected = act == DType::e4m3   ? "MOEJIT_ACT_SCALE_TOKEN or MOEJIT_ACT_SCALE_BLOCK128"
                         : act == DType::e2m1 ? "MOEJIT_ACT_SCALE_BLOCK32 (E8M0 per 32)"
                                              : "MOEJIT_ACT_SCALE_NONE";
  return error(Code::invalid_argument, "argument '{}' = {} ({}): expected {} with {} activations", argument,
               static_cast<int>(scale), to_string(scale), expected, to_string(act));
}

Result<Layout> layout_of(int value, const char* argument) {
  if (value < static_cast<int>(Layout::indexed) || value > static_cast<int>(Layout::masked))
    return error(Code::invalid_argument, "argument '{}' = {}: expected a moejit_layout_t (1..3)", argument, value);
  return static_cast<Layout>(value);
}

Result<dispatch::PackedWeightsView> packed_view(const moejit_packed_weights_t* w, const char* argument, PackedUse use) {
  MOEJIT_TRY(check_struct(w, w ? w->struct_size : 0, MOEJIT_STRUCT_FIRST_SIZE(moejit_packed_weights_t, act_dtype), argument));
  if (w->format < MOEJIT_WEIGHT_MXFP4 || w->format > MOEJIT_WEIGHT_INT4_ASYM)
    return error(Code::invalid_argument,
                 "argument '{}->format' = {}: expected a moejit_weight_format_t (1..3: MXFP4, INT4_SYM, INT4_ASYM)",
                 argument, static_cast<int>(w->format));
  PackedOrder order = PackedOrder::a16;
  if (MOEJIT_STRUCT_HAS(w, act_dtype)) {
    // The field's full name is formatted only on refusal (this runs on every call).
    auto act_of = dtype_of(w->act_dtype, "act_dtype");
    if (!act_of.ok())
      return error(Code::invalid_argument, "argument '{}->act_dtype' = {}: expected a moejit_dtype_t (1..6)", argument,
                   static_cast<int>(w->act_dtype));
    const DType act = *act_of;
    if (act != DType::bf16 && act != DType::f16 && act != DType::e4m3 && act != DType::e2m1)
      return error(Code::invalid_argument,
                   "argument '{}->act_dtype' = {}: expected BF16, F16 (16-bit activations), E4M3 or E2M1", argument,
                   to_string(act));
    order = quant::packed_order_for(act, static_cast<WeightFormat>(w->format));
  }
  auto scale_of = dtype_of(w->scale_dtype, "scale_dtype");
  if (!scale_of.ok())
    return error(Code::invalid_argument, "argument '{}->scale_dtype' = {}: expected a moejit_dtype_t (1..6)", argument,
                 static_cast<int>(w->scale_dtype));
  const DType scale = *scale_of;
  const bool launch = use == PackedUse::launch;
  if (launch && (w->qweight == nullptr || w->scales == nullptr))
    return error(Code::invalid_argument, "argument '{}->{}' is null: expected the packed buffer moejit_pack_weights filled",
                 argument, w->qweight == nullptr ? "qweight" : "scales");
  if (launch && w->format == MOEJIT_WEIGHT_INT4_ASYM && w->zeros == nullptr)
    return error(Code::invalid_argument, "argument '{}->zeros' is null: expected the packed zero points of int4_asym weights",
                 argument);
  // Bounded before any size is computed from them (unbounded, E x N x K wraps 64 bits).
  if (!quant::packed_extents_fit(w->experts, w->n, w->k))
    return quant::check_packed_extents(w->experts, w->n, w->k, fmt::format("{}->", argument));
  // A descriptor copied from other weights must not pass as these: the scale bytes of MXFP4 do
  // not depend on the group or scale fields, so only this check would catch it.
  const auto format = static_cast<WeightFormat>(w->format);
  if (!quant::check_weight_format(format, w->group_size, scale, w->k).ok())
    return quant::check_weight_format(format, w->group_size, scale, w->k, fmt::format("{}->", argument));
  // The buffers must be exactly what the shape packs to: a wrong size means wrong weights.
  const std::uint64_t e = w->experts, n = w->n, k = w->k, groups = w->k / w->group_size;
  const std::uint64_t want[4] = {e * n * k / 2,
                                 packed_scale_bytes(w->format == MOEJIT_WEIGHT_MXFP4, e, n, k, w->group_size,
                                                    scale == DType::e8m0 ? 1u : 2u),
                                 w->format == MOEJIT_WEIGHT_INT4_ASYM ? e * groups * n : 0, w->bias ? e * n * 4 : 0};
  const std::uint64_t have[4] = {w->qweight_bytes, w->scales_bytes, w->zeros ? w->zeros_bytes : 0,
                                 w->bias ? w->bias_bytes : 0};
  const char* names[4] = {"qweight_bytes", "scales_bytes", "zeros_bytes", "bias_bytes"};
  for (int i = 0; i < 4; ++i)
    if (launch && have[i] != want[i])
      return error(Code::invalid_argument, "argument '{}->{}' = {}: expected {} for E x N x K = {} x {} x {}", argument,
                   names[i], have[i], want[i], e, n, k);
  for (auto [p, name] : {std::pair<const void*, const char*>{w->qweight, "qweight"}, {w->scales, "scales"}, {w->zeros, "zeros"}})
    if (p != nullptr && reinterpret_cast<std::uintptr_t>(p) % 16 != 0)
      return error(Code::invalid_argument, "argument '{}->{}' = {}: expected 16-byte alignment", argument, name, p);
  if (reinterpret_cast<std::uintptr_t>(w->bias) % 8 != 0)  // the epilogue reads f32 pairs
    return error(Code::invalid_argument, "argument '{}->bias' = {}: expected 8-byte alignment", argument,
                 static_cast<const void*>(w->bias));
  dispatch::PackedWeightsView v;
  v.format = format;
  v.group_size = w->group_size;
  v.scale = scale;
  v.experts = w->experts;
  v.n = w->n;
  v.k = w->k;
  v.act_and_mul = w->act_and_mul != 0;
  v.order = order;
  v.qweight = w->qweight;
  v.scales = w->scales;
  v.zeros = w->zeros;
  v.bias = w->bias;
  return v;
}

}  // namespace moejit::api
