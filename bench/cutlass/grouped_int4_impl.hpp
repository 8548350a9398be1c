#pragma once
// Internal to bench/cutlass: CUTLASS's Hopper mixed-input grouped GEMM with int4 weights, "scale
// only" mode with the shuffled weight layout, for one activation type and one tile width:
//   - Bf16Act: bf16 group scales, bf16 activations (CUTLASS example
//     69_hopper_int4_bf16_grouped_gemm);
//   - E4m3Act: e4m3 group scales as 8-entry lookup tables, e4m3 activations (example
//     69_hopper_int4_fp8_grouped_gemm).
// D is bf16 in both. Each grouped_int4_*n*.cu instantiates one.

#include <string>
#include <vector>

#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "bench/cutlass/int4_layout.hpp"
#include "bench/cutlass/plan.hpp"

namespace moejit::bench::cutlass_baseline::int4 {

#if defined(CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)

// The int4 operand must be CUTLASS's A: the narrow type goes through registers (converted and
// scaled there), and CUTLASS's TMA epilogues cannot undo the operand swap the collective would
// otherwise do by itself. So, as the examples do, the problem is swapped and transposed: CUTLASS
// computes D^T[n, m] = W[n, k] . A[m, k]^T, with
//   - CUTLASS A = W: the reordered layout (int4_layout.hpp), one LayoutW<Act> per group;
//   - CUTLASS B = A [m, k] row-major, i.e. (m, k) with k contiguous: column-major B;
//   - D^T (n, m) column-major, which is D [m, n] row-major;
//   - scales (n, k / group) with n contiguous (Stride<_1, int64_t, int64_t>: "MN-major").
// Tile (128 rows of W) x TileN (rows of A) x Act::kTileK (128 bytes of activations); cooperative:
// the two consumer warp groups split the 128 weight rows (64 each, one wgmma M), as in the
// examples.
template <class Act, int TileN>
struct GroupedInt4 {
  using MmaType = typename Act::MmaType;
  using ScaleType = typename Act::ScaleType;
  using LayoutWeights = LayoutW<Act>;
  using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;  // (n, m, k) per group
  using TileShape = Shape<_128, Int<TileN>, Int<Act::kTileK>>;
  using ClusterShape = Shape<_1, _1, _1>;
  using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
  using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
  using LayoutAct = cutlass::layout::ColumnMajor;  // A as CUTLASS's B
  using LayoutOut = cutlass::layout::ColumnMajor;  // D^T
  static constexpr int kAlignAct = 16 / sizeof(MmaType);  // 16 bytes (TMA)
  static constexpr int kAlignOut = 8;                       // 16 bytes of bf16
  static constexpr int kAlignW = 32;                        // 16 bytes of int4

  // ElementC void: no source matrix (beta = 0).
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,
      void, LayoutOut*, kAlignOut,
      OutType, LayoutOut*, kAlignOut,
      EpilogueSchedule>::CollectiveOp;

  // The tuple (int4, scale) selects "scale only" conversion: W * scale, in registers (for e4m3,
  // the table lookup that gives the product directly).
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      cute::tuple<QuantType, ScaleType>, LayoutWeights*, kAlignW,
      MmaType, LayoutAct*, kAlignAct,
      float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;

  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

  using StrideAct = typename CollectiveMainloop::InternalStrideB;
  using StrideScale = typename CollectiveMainloop::StrideScale;
  using StrideOut = typename GemmKernel::InternalStrideD;
  using Shape3 = typename ProblemShape::UnderlyingProblemShape;

  static_assert(std::is_same_v<typename CollectiveMainloop::InternalStrideA, LayoutWeights>);
  static_assert(CollectiveMainloop::KernelConversionMode == cutlass::detail::ConversionMode::ConvertAndScale);

  // `p` and `group` were checked by `fn` (prepare_int4_grouped or prepare_int4_fp8_grouped, in
  // int4_weights.cu).
  static PlanResult prepare(const GroupedProblem& p, int group, const char* fn, const char* name) {
    auto plan = std::make_unique<detail::GemmPlan<Gemm, Shape3>>(name);
    const int groups = static_cast<int>(p.m.size());
    const int scale_k = p.k / group;

    std::vector<Shape3>& shapes = plan->host_shapes;
    std::vector<const QuantType*> w;
    std::vector<const MmaType*> a;
    std::vector<const ScaleType*> s;
    std::vector<OutType*> d;
    std::vector<LayoutWeights> lw;
    std::vector<StrideAct> sa;
    std::vector<StrideScale> ss;
    std::vector<StrideOut> sd;
    for (int g = 0; g < groups; ++g) {
      shapes.push_back({p.n, p.m[g], p.k});  // swapped: CUTLASS's M is n, its N is m
      w.push_back(static_cast<const QuantType*>(p.w[g]));
      a.push_back(static_cast<const MmaType*>(p.a[g]));
      s.push_back(static_cast<const ScaleType*>(p.scales[g]));
      d.push_back(static_cast<OutType*>(p.d[g]));
      lw.push_back(weight_layout<Act>(p.n, p.k));
      sa.push_back(cutlass::make_cute_packed_stride(StrideAct{}, {p.m[g], p.k, 1}));
      ss.push_back(cutlass::make_cute_packed_stride(StrideScale{}, {p.n, scale_k, 1}));
      sd.push_back(cutlass::make_cute_packed_stride(StrideOut{}, {p.n, p.m[g], 1}));
    }

    Shape3* d_shapes = nullptr;
    const QuantType** d_w = nullptr;
    const MmaType** d_a = nullptr;
    const ScaleType** d_s = nullptr;
    OutType** d_d = nullptr;
    LayoutWeights* d_lw = nullptr;
    StrideAct* d_sa = nullptr;
    StrideScale* d_ss = nullptr;
    StrideOut* d_sd = nullptr;
    for (std::string e : {plan->upload(shapes, "problem shapes", d_shapes), plan->upload(w, "W pointers", d_w),
                          plan->upload(a, "A pointers", d_a), plan->upload(s, "scale pointers", d_s),
                          plan->upload(d, "D pointers", d_d), plan->upload(lw, "W layouts", d_lw),
                          plan->upload(sa, "A strides", d_sa), plan->upload(ss, "scale strides", d_ss),
                          plan->upload(sd, "D strides", d_sd)})
      if (!e.empty()) return {nullptr, std::string(fn) + ": " + e};

    cutlass::KernelHardwareInfo hw;
    if (auto e = detail::hardware_info<GemmKernel>(fn, hw); !e.empty()) return {nullptr, e};

    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGrouped,
        {groups, d_shapes, shapes.data()},  // host shapes: a grid no larger than the tile count
        {d_w, d_lw, d_a, d_sa, d_s, d_ss, group},
        {{}, nullptr, nullptr, d_d, d_sd},
        hw};
    detail::plain_product(args.epilogue.thread);

    // can_implement without the host shapes: with them, this mainloop's can_implement reads the
    // per-group strides through their (device) pointers on the host, which is why CUTLASS's
    // example passes none. `fn` checked what it would (16-byte alignment of W, A and the scales,
    // group a multiple of the K tile).
    typename Gemm::Arguments check_args = args;
    check_args.problem_shape = {groups, d_shapes, nullptr};
    if (auto e = plan->initialize(args, check_args); !e.empty()) return {nullptr, std::string(fn) + ": " + e};
    return {std::move(plan), {}};
  }
};

#endif

}  // namespace moejit::bench::cutlass_baseline::int4
