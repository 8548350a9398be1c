// Weight packing: the sizes moejit's layout needs, and packing checkpoint tensors into it.

#include "weights.hpp"

namespace moejit_python {

namespace {

moejit_weights_desc_t weights_desc(int format, uint32_t group_size, int scale_dtype, uint32_t experts, uint32_t n,
                                   uint32_t k, int source, int rows, int act_dtype) {
  moejit_weights_desc_t d;
  moejit_weights_desc_init(&d);
  d.format = static_cast<moejit_weight_format_t>(format);
  d.group_size = group_size;
  d.scale_dtype = static_cast<moejit_dtype_t>(scale_dtype);
  d.experts = experts;
  d.n = n;
  d.k = k;
  d.source = static_cast<moejit_weight_source_t>(source);
  d.rows = static_cast<moejit_row_order_t>(rows);
  d.act_dtype = static_cast<moejit_dtype_t>(act_dtype);
  return d;
}

// The source tensors: host memory, or the context's device when `on_device`.
void set_sources(moejit_weights_desc_t& d, const Context& ctx, const Array& qweight, const Array& scales,
                 nb::handle zeros, nb::handle bias, bool on_device) {
  const Memory memory = on_device ? ctx.memory() : Memory{};
  d.qweight = data_of(qweight, "qweight", memory);
  d.scales = data_of(scales, "scales", memory);
  d.zeros = optional_data_of(zeros, "zeros", memory);
  d.bias = static_cast<const float*>(optional_data_of(bias, "bias", memory));
  d.source_on_device = on_device ? 1 : 0;
}

}  // namespace

Packed::Packed(const Context& ctx, int format, uint32_t group_size, int scale_dtype, uint32_t experts, uint32_t n,
               uint32_t k, bool act_and_mul, int act_dtype, nb::object qweight, nb::object scales, nb::object zeros,
               nb::object bias)
    : memory_(ctx.memory()),
      qweight_(std::move(qweight)),
      scales_(std::move(scales)),
      zeros_(std::move(zeros)),
      bias_(std::move(bias)) {
  moejit_packed_weights_init(&p_);
  p_.format = static_cast<moejit_weight_format_t>(format);
  p_.group_size = group_size;
  p_.scale_dtype = static_cast<moejit_dtype_t>(scale_dtype);
  p_.experts = experts;
  p_.n = n;
  p_.k = k;
  p_.act_and_mul = act_and_mul ? 1 : 0;
  p_.act_dtype = static_cast<moejit_dtype_t>(act_dtype);
  const Buffer q = writable_buffer(qweight_, "qweight", memory_), s = writable_buffer(scales_, "scales", memory_),
               z = writable_buffer(zeros_, "zeros", memory_), b = writable_buffer(bias_, "bias", memory_);
  p_.qweight = q.data;
  p_.qweight_bytes = q.bytes;
  p_.scales = s.data;
  p_.scales_bytes = s.bytes;
  p_.zeros = z.data;
  p_.zeros_bytes = z.bytes;
  p_.bias = static_cast<float*>(b.data);
  p_.bias_bytes = b.bytes;
}

void bind_weights(nb::module_& m) {
  nb::class_<Packed>(m, "Packed")
      .def(nb::init<const Context&, int, uint32_t, int, uint32_t, uint32_t, uint32_t, bool, int, nb::object,
                    nb::object, nb::object, nb::object>(),
           nb::arg("ctx"), nb::arg("format"), nb::arg("group_size"), nb::arg("scale_dtype"), nb::arg("experts"),
           nb::arg("n"), nb::arg("k"), nb::arg("act_and_mul"), nb::arg("act_dtype"), nb::arg("qweight").none(),
           nb::arg("scales").none(), nb::arg("zeros").none(), nb::arg("bias").none())
      .def_prop_ro("format", [](const Packed& p) { return static_cast<int>(p.get().format); })
      .def_prop_ro("group_size", [](const Packed& p) { return p.get().group_size; })
      .def_prop_ro("scale_dtype", [](const Packed& p) { return static_cast<int>(p.get().scale_dtype); })
      .def_prop_ro("experts", [](const Packed& p) { return p.get().experts; })
      .def_prop_ro("n", [](const Packed& p) { return p.get().n; })
      .def_prop_ro("k", [](const Packed& p) { return p.get().k; })
      .def_prop_ro("act_and_mul", [](const Packed& p) { return p.get().act_and_mul != 0; })
      .def_prop_ro("act_dtype", [](const Packed& p) { return static_cast<int>(p.get().act_dtype); });

  // (qweight, scales, zeros, bias) bytes moejit_pack_weights needs for these source tensors;
  // validates the description.
  m.def(
      "packed_sizes",
      [](const Context& ctx, int format, uint32_t group_size, int scale_dtype, uint32_t experts, uint32_t n, uint32_t k,
         int source, int rows, int act_dtype, const Array& qweight, const Array& scales, nb::handle zeros,
         nb::handle bias, bool source_on_device) {
        moejit_weights_desc_t d = weights_desc(format, group_size, scale_dtype, experts, n, k, source, rows, act_dtype);
        set_sources(d, ctx, qweight, scales, zeros, bias, source_on_device);
        moejit_packed_sizes_t s{};
        check(moejit_packed_weights_size(ctx.use().get(), &d, &s));
        return nb::make_tuple(s.qweight_bytes, s.scales_bytes, s.zeros_bytes, s.bias_bytes);
      },
      nb::arg("ctx"), nb::arg("format"), nb::arg("group_size"), nb::arg("scale_dtype"), nb::arg("experts"),
      nb::arg("n"), nb::arg("k"), nb::arg("source"), nb::arg("rows"), nb::arg("act_dtype"), nb::arg("qweight"),
      nb::arg("scales"), nb::arg("zeros").none(), nb::arg("bias").none(), nb::arg("source_on_device"));

  // Packs the source tensors (host memory, or the context's device) into `out`'s buffers.
  m.def(
      "pack_weights",
      [](const Context& ctx, int format, uint32_t group_size, int scale_dtype, uint32_t experts, uint32_t n, uint32_t k,
         int source, int rows, int act_dtype, const Array& qweight, const Array& scales, nb::handle zeros,
         nb::handle bias, bool source_on_device, Packed& out, uintptr_t stream) {
        moejit_weights_desc_t d = weights_desc(format, group_size, scale_dtype, experts, n, k, source, rows, act_dtype);
        set_sources(d, ctx, qweight, scales, zeros, bias, source_on_device);
        check(call_unlocked(ctx, [&](moejit_context_t c) {
          return moejit_pack_weights(c, &d, &out.get(), reinterpret_cast<void*>(stream));
        }));
      },
      nb::arg("ctx"), nb::arg("format"), nb::arg("group_size"), nb::arg("scale_dtype"), nb::arg("experts"),
      nb::arg("n"), nb::arg("k"), nb::arg("source"), nb::arg("rows"), nb::arg("act_dtype"), nb::arg("qweight"),
      nb::arg("scales"), nb::arg("zeros").none(), nb::arg("bias").none(), nb::arg("source_on_device"), nb::arg("out"),
      nb::arg("stream"));
}

}  // namespace moejit_python
