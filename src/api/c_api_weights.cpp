// C ABI: packing weights into moejit's layout.

#include "api/api_support.hpp"
#include "dispatch/weight_pack_op.hpp"
#include "spec/spec_fields.hpp"

using namespace moejit;

namespace {

// source_desc casts the ABI's source to the packer's enum: one numbering.
constexpr bool same_value(dispatch::WeightSource s, moejit_weight_source_t c) { return static_cast<int>(s) == c; }
static_assert(same_value(dispatch::WeightSource::plain_codes, MOEJIT_SOURCE_PLAIN_CODES) &&
              same_value(dispatch::WeightSource::vllm_mxfp4, MOEJIT_SOURCE_VLLM_MXFP4) &&
              same_value(dispatch::WeightSource::gptq_v1, MOEJIT_SOURCE_GPTQ_V1) &&
              same_value(dispatch::WeightSource::gptq_v2, MOEJIT_SOURCE_GPTQ_V2) &&
              same_value(dispatch::WeightSource::awq, MOEJIT_SOURCE_AWQ) &&
              same_value(dispatch::WeightSource::compressed_tensors, MOEJIT_SOURCE_COMPRESSED_TENSORS));

Result<dispatch::WeightSourceDesc> source_desc(const moejit_weights_desc_t* d) {
  MOEJIT_TRY(api::check_struct(d, d ? d->struct_size : 0, MOEJIT_STRUCT_FIRST_SIZE(moejit_weights_desc_t, act_dtype), "desc"));
  if (d->format < MOEJIT_WEIGHT_MXFP4 || d->format > MOEJIT_WEIGHT_INT4_ASYM)
    return error(Code::invalid_argument, "argument 'desc->format' = {}: expected a moejit_weight_format_t (1..3)",
                 static_cast<int>(d->format));
  PackedOrder order = PackedOrder::a16;
  if (MOEJIT_STRUCT_HAS(d, act_dtype)) {
    MOEJIT_ASSIGN_OR_RETURN(DType act, api::dtype_of(d->act_dtype, "desc->act_dtype"));
    if (act != DType::bf16 && act != DType::f16 && act != DType::e4m3 && act != DType::e2m1)
      return error(Code::invalid_argument, "argument 'desc->act_dtype' = {}: expected BF16, F16, E4M3 or E2M1 (the "
                   "activations the weights will be used with)", to_string(act));
    order = quant::packed_order_for(act, static_cast<WeightFormat>(d->format));
  }
  if (d->source < MOEJIT_SOURCE_PLAIN_CODES || d->source > MOEJIT_SOURCE_COMPRESSED_TENSORS)
    return error(Code::invalid_argument, "argument 'desc->source' = {}: expected a moejit_weight_source_t (1..6)",
                 static_cast<int>(d->source));
  if (d->rows < MOEJIT_ROWS_PLAIN || d->rows > MOEJIT_ROWS_INTERLEAVED)
    return error(Code::invalid_argument, "argument 'desc->rows' = {}: expected a moejit_row_order_t (0..2)",
                 static_cast<int>(d->rows));
  MOEJIT_ASSIGN_OR_RETURN(DType scale, api::dtype_of(d->scale_dtype, "desc->scale_dtype"));
  // The format's own fields, named as the caller wrote them (before per-channel becomes K).
  const bool mxfp4 = d->format == MOEJIT_WEIGHT_MXFP4;
  const std::uint32_t g = d->group_size;
  if (mxfp4 ? g != 32 : !(g == 32 || g == 64 || g == 128 || g == 0 || g == UINT32_MAX || (g == d->k && g != 0)))
    return error(Code::invalid_argument, "argument 'desc->group_size' = {}: expected {}", g,
                 mxfp4 ? "32 for MXFP4 (one E8M0 scale per 32 k)"
                       : "32, 64 or 128 for INT4, or per-channel: 0 (also K, or (uint32_t)-1)");
  if (mxfp4 ? scale != DType::e8m0 : scale != DType::bf16 && scale != DType::f16)
    return error(Code::invalid_argument, "argument 'desc->scale_dtype' = {}: expected {}", to_string(scale),
                 mxfp4 ? "E8M0 for MXFP4" : "BF16 or F16 for INT4");
  if (g != 0 && g != UINT32_MAX && d->k % g != 0)
    return error(Code::invalid_argument, "argument 'desc->k' = {}: expected a multiple of group_size = {}", d->k, g);
  dispatch::WeightSourceDesc w;
  w.format = static_cast<WeightFormat>(d->format);
  // Per-channel: 0 is the spelling moejit writes; K, and GPTQ's -1, mean the same.
  w.group_size = g == 0 || g == UINT32_MAX ? d->k : g;
  w.scale = scale;
  w.experts = d->experts;
  w.n = d->n;
  w.k = d->k;
  w.source = static_cast<dispatch::WeightSource>(d->source);
  w.rows = static_cast<quant::RowOrder>(d->rows);
  w.order = order;
  w.qweight = d->qweight;
  w.scales = d->scales;
  w.zeros = d->zeros;
  w.bias = d->bias;
  w.on_device = d->source_on_device != 0;
  return w;
}

}  // namespace

extern "C" {

void moejit_weights_desc_init(moejit_weights_desc_t* desc) {
  if (desc == nullptr) return;
  *desc = moejit_weights_desc_t{};
  desc->struct_size = sizeof(moejit_weights_desc_t);
  desc->source = MOEJIT_SOURCE_PLAIN_CODES;
  desc->act_dtype = MOEJIT_DTYPE_BF16;
}

void moejit_packed_weights_init(moejit_packed_weights_t* packed) {
  if (packed == nullptr) return;
  *packed = moejit_packed_weights_t{};
  packed->struct_size = sizeof(moejit_packed_weights_t);
  packed->act_dtype = MOEJIT_DTYPE_BF16;
}

moejit_status_t moejit_packed_weights_size(moejit_context_t context, const moejit_weights_desc_t* desc,
                                           moejit_packed_sizes_t* sizes) {
  return api::guarded([&]() -> Status {
    MOEJIT_TRY(api::check_context(context));
    if (sizes == nullptr) return error(Code::invalid_argument, "argument 'sizes' is null: expected where to store the sizes");
    MOEJIT_ASSIGN_OR_RETURN(dispatch::WeightSourceDesc w, source_desc(desc));
    MOEJIT_ASSIGN_OR_RETURN(dispatch::PackedSizes s, dispatch::packed_sizes(w));
    *sizes = {s.qweight, s.scales, s.zeros, s.bias};
    return {};
  });
}

moejit_status_t moejit_pack_weights(moejit_context_t context, const moejit_weights_desc_t* source,
                                    moejit_packed_weights_t* packed, void* stream) {
  return api::guarded([&]() -> Status {
    MOEJIT_TRY(api::check_context(context));
    MOEJIT_TRY(api::check_struct(packed, packed ? packed->struct_size : 0,
                                 MOEJIT_STRUCT_FIRST_SIZE(moejit_packed_weights_t, act_dtype), "packed"));
    MOEJIT_ASSIGN_OR_RETURN(dispatch::WeightSourceDesc w, source_desc(source));
    if (w.order != PackedOrder::a16 && !MOEJIT_STRUCT_HAS(packed, act_dtype))
      return error(Code::invalid_argument, "argument 'packed': struct_size = {} has no act_dtype field to record {} "
                   "packing; expected a moejit_packed_weights_t initialized with moejit_packed_weights_init",
                   packed->struct_size, to_string(quant::packed_act_of(w.order)));
    MOEJIT_ASSIGN_OR_RETURN(dispatch::PackedSizes need, dispatch::packed_sizes(w));
    const std::uint64_t need_of[4] = {need.qweight, need.scales, need.zeros, need.bias};
    const std::uint64_t have[4] = {packed->qweight_bytes, packed->scales_bytes, packed->zeros_bytes, packed->bias_bytes};
    const char* names[4] = {"qweight_bytes", "scales_bytes", "zeros_bytes", "bias_bytes"};
    for (int i = 0; i < 4; ++i)
      if (need_of[i] > 0 && have[i] < need_of[i])
        return error(Code::invalid_argument, "argument 'packed->{}' = {}: expected at least {} (moejit_packed_weights_size)",
                     names[i], have[i], need_of[i]);
    MOEJIT_ASSIGN_OR_RETURN(Launcher * launcher, context->require_launcher());
    MOEJIT_TRY(dispatch::pack_weights(*launcher, w, {packed->qweight, packed->scales, packed->zeros, packed->bias}, stream));
    packed->format = source->format;
    packed->group_size = w.group_size;  // per-channel as K: what the packed buffers hold
    packed->scale_dtype = source->scale_dtype;
    packed->experts = source->experts;
    packed->n = source->n;
    packed->k = source->k;
    packed->act_and_mul = source->rows != MOEJIT_ROWS_PLAIN;
    if (MOEJIT_STRUCT_HAS(packed, act_dtype))
      packed->act_dtype = static_cast<moejit_dtype_t>(quant::packed_act_of(w.order));
    // The buffers now hold exactly the packed sizes.
    packed->qweight_bytes = need.qweight;
    packed->scales_bytes = need.scales;
    packed->zeros_bytes = need.zeros;
    packed->bias_bytes = need.bias;
    if (source->bias == nullptr) packed->bias = nullptr;
    if (source->format != MOEJIT_WEIGHT_INT4_ASYM) packed->zeros = nullptr;
    return {};
  });
}

}  // extern "C"
