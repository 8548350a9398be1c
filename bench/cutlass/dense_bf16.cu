// Dense bf16 GEMM for the device's bf16 matrix rate: CUTLASS's Hopper TMA warp-specialized
// cooperative kernel from the collective builders (CUTLASS examples 48/49).

#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "bench/cutlass/plan.hpp"

namespace moejit::bench::cutlass_baseline {

#if defined(CUTLASS_ARCH_MMA_SM90_SUPPORTED)
namespace {

using namespace cute;

using Element = cutlass::bfloat16_t;
constexpr int kAlignment = 8;
using LayoutA = cutlass::layout::RowMajor;     // A [m, k]
using LayoutB = cutlass::layout::ColumnMajor;  // W [n, k], k contiguous
using LayoutD = cutlass::layout::RowMajor;     // D [m, n]

// The large-tile configuration CUTLASS's profiler finds fastest for big bf16 GEMMs on H100:
// cooperative (both consumer warp groups on one 128x256 tile: 128 accumulator registers per
// thread, the most reuse per shared-memory byte) with a 2x1 cluster (each W tile multicast to the
// two CTAs of the cluster), 64-deep k (one 128-byte swizzle row), as many stages as fit.
using TileShape = Shape<_128, _256, _64>;
using ClusterShape = Shape<_2, _1, _1>;
using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    void, LayoutD, kAlignment,  // no C (beta = 0)
    Element, LayoutD, kAlignment,
    EpilogueSchedule>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    Element, LayoutA, kAlignment,
    Element, LayoutB, kAlignment,
    float, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename CollectiveEpilogue::SharedStorage))>,
    KernelSchedule>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

constexpr const char* kName = "cutlass_bf16_dense: TMA warp-specialized cooperative, tile 128x256x64, cluster 2x1x1";

}  // namespace

PlanResult kernels::bf16_dense(int m, int n, int k, const void* a, const void* w, void* d) {
  constexpr const char* fn = "prepare_bf16_dense";
  const std::string f = fn;
  auto plan = std::make_unique<detail::GemmPlan<Gemm>>(kName);
  cutlass::KernelHardwareInfo hw;
  if (auto e = detail::hardware_info<GemmKernel>(fn, hw); !e.empty()) return {nullptr, e};

  using StrideA = typename GemmKernel::StrideA;
  using StrideB = typename GemmKernel::StrideB;
  using StrideD = typename GemmKernel::StrideD;
  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {m, n, k, 1},
      {static_cast<const Element*>(a), cutlass::make_cute_packed_stride(StrideA{}, {m, k, 1}),
       static_cast<const Element*>(w), cutlass::make_cute_packed_stride(StrideB{}, {n, k, 1})},
      {{}, nullptr, {}, static_cast<Element*>(d), cutlass::make_cute_packed_stride(StrideD{}, {m, n, 1})},
      hw};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;

  if (auto e = plan->initialize(args, args); !e.empty()) return {nullptr, f + ": " + e};
  return {std::move(plan), {}};
}

#else

PlanResult kernels::bf16_dense(int, int, int, const void*, const void*, void*) {
  return detail::not_built("prepare_bf16_dense", detail::kToolkitTooOld);
}

#endif

}  // namespace moejit::bench::cutlass_baseline
