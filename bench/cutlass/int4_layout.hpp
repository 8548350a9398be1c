#pragma once
// Internal to bench/cutlass: the global-memory layouts of the int4 weights that the mixed-input
// grouped kernels read (CUTLASS examples 55 and 69, "shuffled" B), one per activation type,
// shared by the weight packing (int4_weights.cu) and the kernels (grouped_int4_impl.hpp), so that
// both use one type.

#include "cutlass/cutlass.h"
#include "cutlass/array.h"
#include "cute/tensor.hpp"
#include "cutlass/detail/layout.hpp"
#include "cutlass/numeric_types.h"

namespace moejit::bench::cutlass_baseline::int4 {

using namespace cute;

using QuantType = cutlass::int4b_t;
using OutType = cutlass::bfloat16_t;  // D, whatever the activations

// W [n, k] with k contiguous: CUTLASS's K-major A after the swap (see grouped_int4_impl.hpp). The
// group mode (third) has stride 0: each group has its own pointer.
using StrideW = cute::remove_pointer_t<cutlass::detail::TagToStrideA_t<cutlass::layout::RowMajor*>>;

// The two activation types the int4 kernels are built for. Each has its own reordering atom: one
// warp's share of a wgmma A fragment for that MMA type, in which the values each thread holds
// are contiguous in memory (one 32-bit shared-memory load instead of byte loads).
// The atoms are written out here so that the kernels' translation units need not include
// cutlass/util/mixed_dtype_utils.hpp (it brings curand's device tables into every module);
// int4_weights.cu checks that each is the type cutlass::compute_memory_reordering_atom returns.

// bf16 activations, bf16 group scales (CUTLASS example 69_hopper_int4_bf16_grouped_gemm). A
// 16 (n) x 16 (k) atom with the value shuffle [0,2,4,6,1,3,5,7], the order in which the int4 ->
// bf16 converter (LayoutAwareConvertImpl in cutlass/detail/collective/mixed_input_utils.hpp)
// unpacks pairs of values with shifts and one lop3.
struct Bf16Act {
  using MmaType = cutlass::bfloat16_t;  // the int4 values are converted to bf16 in registers
  using ScaleType = cutlass::bfloat16_t;
  using ValueShuffle = Layout<Shape<_2, _4>, Stride<_4, _1>>;
  using LayoutAtomQuant = Layout<Shape<Shape<Shape<_8, _2>, _1>, Shape<Shape<_2, _4, _2>, _1>>,
                                 Stride<Stride<Stride<_32, _1>, _0>, Stride<Stride<_4, _8, _2>, _0>>>;
  static constexpr int kTileK = 64;  // the kernels' K tile: 128 bytes of bf16 (TileShapeK in the examples)
};

// e4m3 activations (CUTLASS example 69_hopper_int4_fp8_grouped_gemm, "W4A8 with a lookup
// table"): each int4 value selects its product with the group's scale from an 8-entry e4m3
// table (prmt), so the scale element is that table, cutlass::Array<e4m3, 8> (int4_fp8_scale_bytes),
// and positive values are stored in the "unified" encoding that indexes it (int4_fp8_weight_bytes).
// A 16 (n) x 32 (k) atom, no value shuffle.
struct E4m3Act {
  using MmaType = cutlass::float_e4m3_t;
  using ScaleType = cutlass::Array<cutlass::float_e4m3_t, 8>;
  using ValueShuffle = Layout<_1>;
  using LayoutAtomQuant = Layout<Shape<Shape<Shape<_8, _2>, _1>, Shape<Shape<_4, _4, _2>, _1>>,
                                 Stride<Stride<Stride<_64, _4>, _0>, Stride<Stride<_1, _16, _8>, _0>>>;
  static constexpr int kTileK = 128;  // 128 bytes of e4m3
};

// The atom tiled over (n, k, 1): atoms column-major over (n / atom rows, k / atom columns) blocks.
template <class Act>
using LayoutW = decltype(tile_to_shape(typename Act::LayoutAtomQuant{}, Layout<Shape<int, int, _1>, StrideW>{}));

template <class Act>
constexpr int kAtomN = size<0>(typename Act::LayoutAtomQuant{});
template <class Act>
constexpr int kAtomK = size<1>(typename Act::LayoutAtomQuant{});
static_assert(kAtomN<Bf16Act> == 16 && kAtomK<Bf16Act> == 16, "CUTLASS 4.2's reordering atom for bf16 wgmma is 16x16");
static_assert(kAtomN<E4m3Act> == 16 && kAtomK<E4m3Act> == 32, "CUTLASS 4.2's reordering atom for e4m3 wgmma is 16x32");

// Where value (r, c) of an n x k weight matrix goes, counted in int4 elements (element i is the
// low nibble of byte i / 2 when i is even, the high nibble when odd: cutlass::int4b_t order).
template <class Act>
LayoutW<Act> weight_layout(int n, int k) {
  return tile_to_shape(typename Act::LayoutAtomQuant{}, make_shape(n, k, _1{}));
}

}  // namespace moejit::bench::cutlass_baseline::int4
