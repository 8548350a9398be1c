// moejit._core.Packed: a moejit_packed_weights_t over arrays in the context's memory, which it
// keeps alive.
#pragma once

#include "context.hpp"

namespace moejit_python {

class Packed {
 public:
  // Describes packed buffers that already exist (what moejit_pack_weights wrote, perhaps in an
  // earlier process): the sizes are the arrays' byte sizes, checked against the shape by every
  // launch. Without buffers (None): a shape for workspace-size queries only.
  // act_dtype: the activations the tiles were packed for (moejit_packed_weights_t::act_dtype).
  Packed(const Context& ctx, int format, uint32_t group_size, int scale_dtype, uint32_t experts, uint32_t n,
         uint32_t k, bool act_and_mul, int act_dtype, nb::object qweight, nb::object scales, nb::object zeros,
         nb::object bias);

  const moejit_packed_weights_t& get() const { return p_; }
  moejit_packed_weights_t& get() { return p_; }
  // The context's memory the buffers live in.
  const Memory& memory() const { return memory_; }

 private:
  moejit_packed_weights_t p_;
  Memory memory_;
  nb::object qweight_, scales_, zeros_, bias_;  // the buffers p_ points into
};

}  // namespace moejit_python
