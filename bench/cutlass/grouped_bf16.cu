// bf16 x bf16 grouped GEMM: CUTLASS's Hopper ptr-array grouped kernel (as in CUTLASS example
// 57_hopper_grouped_gemm), one group per expert, D_g = A_g . W_g^T.

#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "bench/cutlass/plan.hpp"

namespace moejit::bench::cutlass_baseline {

#if defined(CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)
namespace {

using namespace cute;

using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;  // (m, n, k) per group
using Element = cutlass::bfloat16_t;
constexpr int kAlignment = 8;  // 16 bytes of bf16: TMA's granularity

// A [m, k] row-major; W [n, k] row-major is CUTLASS's column-major B (k contiguous); D [m, n]
// row-major. The pointer layout tags make the strides per-group device arrays.
using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::ColumnMajor;
using LayoutD = cutlass::layout::RowMajor;

// Pingpong: each of the two consumer warp groups owns a whole 128x128 output tile, so one's
// epilogue (and the per-group TMA descriptor switch) overlaps the other's mainloop; with many
// small groups (MoE) a tile's epilogue is a large share of its time. A 128x128x64 tile (64 bf16 =
// one 128-byte swizzle row along k) as in CUTLASS's grouped example; no cluster: at decode sizes
// every group is one tile tall, and a cluster along m would pair each tile with an empty one.
using TileShape = Shape<_128, _128, _64>;
using ClusterShape = Shape<_1, _1, _1>;
using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong;
using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong;

// ElementC void: no source matrix (beta = 0), no C loads and no C shared memory.
using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    void, LayoutD*, kAlignment,
    Element, LayoutD*, kAlignment,
    EpilogueSchedule>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    Element, LayoutA*, kAlignment,
    Element, LayoutB*, kAlignment,
    float, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename CollectiveEpilogue::SharedStorage))>,
    KernelSchedule>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

using StrideA = typename GemmKernel::InternalStrideA;
using StrideB = typename GemmKernel::InternalStrideB;
using StrideD = typename GemmKernel::InternalStrideD;
using Shape3 = typename ProblemShape::UnderlyingProblemShape;

constexpr const char* kName = "cutlass_bf16_grouped: ptr-array TMA warp-specialized pingpong, tile 128x128x64, cluster 1x1x1";

}  // namespace

PlanResult kernels::bf16_grouped(const GroupedProblem& p) {
  constexpr const char* fn = "prepare_bf16_grouped";
  auto plan = std::make_unique<detail::GemmPlan<Gemm, Shape3>>(kName);
  const int groups = static_cast<int>(p.m.size());

  std::vector<Shape3>& shapes = plan->host_shapes;
  std::vector<const Element*> a, w;
  std::vector<Element*> d;
  std::vector<StrideA> sa;
  std::vector<StrideB> sb;
  std::vector<StrideD> sd;
  for (int g = 0; g < groups; ++g) {
    shapes.push_back({p.m[g], p.n, p.k});
    a.push_back(static_cast<const Element*>(p.a[g]));
    w.push_back(static_cast<const Element*>(p.w[g]));
    d.push_back(static_cast<Element*>(p.d[g]));
    sa.push_back(cutlass::make_cute_packed_stride(StrideA{}, {p.m[g], p.k, 1}));
    sb.push_back(cutlass::make_cute_packed_stride(StrideB{}, {p.n, p.k, 1}));
    sd.push_back(cutlass::make_cute_packed_stride(StrideD{}, {p.m[g], p.n, 1}));
  }

  Shape3* d_shapes = nullptr;
  const Element** d_a = nullptr;
  const Element** d_w = nullptr;
  Element** d_d = nullptr;
  StrideA* d_sa = nullptr;
  StrideB* d_sb = nullptr;
  StrideD* d_sd = nullptr;
  for (std::string e : {plan->upload(shapes, "problem shapes", d_shapes), plan->upload(a, "A pointers", d_a),
                        plan->upload(w, "W pointers", d_w), plan->upload(d, "D pointers", d_d),
                        plan->upload(sa, "A strides", d_sa), plan->upload(sb, "W strides", d_sb),
                        plan->upload(sd, "D strides", d_sd)})
    if (!e.empty()) return {nullptr, std::string(fn) + ": " + e};

  cutlass::KernelHardwareInfo hw;
  if (auto e = detail::hardware_info<GemmKernel>(fn, hw); !e.empty()) return {nullptr, e};

  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGrouped,
      {groups, d_shapes, shapes.data()},  // host shapes too: a grid no larger than the tile count
      {d_a, d_sa, d_w, d_sb},
      {{}, nullptr, nullptr, d_d, d_sd},
      hw};
  detail::plain_product(args.epilogue.thread);

  if (auto e = plan->initialize(args, args); !e.empty()) return {nullptr, std::string(fn) + ": " + e};
  return {std::move(plan), {}};
}

#else  // nvcc older than 12.3: no modifiable TMA descriptors, no grouped kernel

PlanResult kernels::bf16_grouped(const GroupedProblem&) {
  return detail::not_built("prepare_bf16_grouped", detail::kToolkitTooOld);
}

#endif

}  // namespace moejit::bench::cutlass_baseline
