#pragma once
// Internal to bench/cutlass: the global-memory layout of the int4 weights that the mixed-input
// grouped kernel reads (CUTLASS examples 55 and 69, "shuffled" B), shared by the weight packing
// (int4_weights.cu) and the kernels (grouped_int4_impl.hpp), so that both use one type.

#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/detail/layout.hpp"
#include "cutlass/numeric_types.h"

namespace moejit::bench::cutlass_baseline::int4 {

using namespace cute;

using MmaType = cutlass::bfloat16_t;  // the int4 values are converted to bf16 in registers
using QuantType = cutlass::int4b_t;

// W [n, k] with k contiguous: CUTLASS's K-major A after the swap (see grouped_int4_impl.hpp). The
// group mode (third) has stride 0: each group has its own pointer.
using StrideW = cute::remove_pointer_t<cutlass::detail::TagToStrideA_t<cutlass::layout::RowMajor*>>;

// The reordering atom, as in the examples: a 16 (n) x 16 (k) block, one warp's share of a wgmma A
// fragment, in which the 8 values each thread holds are contiguous (one 32-bit shared-memory load
// instead of byte loads), in the order [0,2,4,6,1,3,5,7] that the int4 -> bf16 converter
// (LayoutAwareConvertImpl in cutlass/detail/collective/mixed_input_utils.hpp) unpacks with
// shifts and one lop3 per pair of values.
// Written out here so that the kernels' translation units need not include
// cutlass/util/mixed_dtype_utils.hpp (it brings curand's device tables into every module);
// int4_weights.cu checks that it is the type
// cutlass::compute_memory_reordering_atom<MmaType, Layout<Shape<_1, _1>>, ValueShuffle>() returns.
using ValueShuffle = Layout<Shape<_2, _4>, Stride<_4, _1>>;
using LayoutAtomQuant = Layout<Shape<Shape<Shape<_8, _2>, _1>, Shape<Shape<_2, _4, _2>, _1>>,
                               Stride<Stride<Stride<_32, _1>, _0>, Stride<Stride<_4, _8, _2>, _0>>>;
// The atom tiled over (n, k, 1): atoms column-major over (n / 16, k / 16) blocks.
using LayoutW = decltype(tile_to_shape(LayoutAtomQuant{}, Layout<Shape<int, int, _1>, StrideW>{}));

constexpr int kAtomN = size<0>(LayoutAtomQuant{});
constexpr int kAtomK = size<1>(LayoutAtomQuant{});
static_assert(kAtomN == 16 && kAtomK == 16, "CUTLASS 4.2's reordering atom for bf16 wgmma is 16x16");

constexpr int kTileK = 64;  // the kernels' K tile: 128 bytes of bf16 (TileShapeK in the examples)

// Where value (r, c) of an n x k weight matrix goes, counted in int4 elements (element i is the
// low nibble of byte i / 2 when i is even, the high nibble when odd: cutlass::int4b_t order).
inline LayoutW weight_layout(int n, int k) { return tile_to_shape(LayoutAtomQuant{}, make_shape(n, k, _1{})); }

}  // namespace moejit::bench::cutlass_baseline::int4
