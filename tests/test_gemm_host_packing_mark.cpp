// The packing mark of MXFP4 weights (templates/gemm/grouped_gemm_params.cuh, packed_order_mark):
// nothing in the tile bytes says which activations they were packed for, so the packer marks
// each expert's range word and every kernel checks it. Tiles marked for other activations must
// come out NaN on every path (bf16 and f16 activations, fragment and f32 scales, split-K, every
// layout and epilogue, e4m3 on its three mma paths, e2m1), never as numbers; buffers packed
// before the mark (0 there) still run every kernel but the f16 one, which they were never packed
// for. The host backend runs the same kernel source as the GPU.

#include <doctest/doctest.h>

#include "gemm_case.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

constexpr PackedOrder kOrders[] = {PackedOrder::a16, PackedOrder::a8, PackedOrder::a4, PackedOrder::a16f16};

// The 16-bit value a case writes for `order`'s mark.
std::uint32_t mark_of(PackedOrder order) { return packed_order_mark(order) >> 16; }

// Runs `c` with each mark; run_gemm_case checks the results, or NaN throughout where refused.
void run_with_marks(KernelResolver& resolver, Launcher& launcher, GemmCase c, std::initializer_list<std::uint32_t> marks,
                    std::initializer_list<bool> refused) {
  REQUIRE(marks.size() == refused.size());
  auto expect = refused.begin();
  for (std::uint32_t mark : marks) {
    c.packing_mark = mark;
    CAPTURE(mark);
    CHECK(packing_mark_refused(c) == *expect++);  // the rule as this test reads it
    run_gemm_case(resolver, launcher, c, fresh_seed());
  }
}

}  // namespace

TEST_CASE("packing marks: each order accepts its own mark only, and an unmarked buffer all but the f16 order") {
  for (PackedOrder kernel : kOrders) {
    CAPTURE(static_cast<int>(kernel));
    for (PackedOrder packed : kOrders)
      for (std::uint32_t range : {0x0000u, 0x7f7fu, 0xfe00u, 0xffffu})  // the range bits play no part
        CHECK(packed_order_mark_accepts(packed_order_mark(packed) | range, kernel) == (packed == kernel));
    CHECK(packed_order_mark_accepts(0x7f7fu, kernel) == (kernel != PackedOrder::a16f16));
    for (std::uint32_t garbage : {0x0001u, 0x6d2fu, 0x6d34u, 0xffffu, 0x306du})
      CHECK_FALSE(packed_order_mark_accepts(garbage << 16 | 0x7f7fu, kernel));
  }
  // The marks sit above the range: the kernels' range reading ignores them.
  for (PackedOrder order : kOrders) CHECK((packed_order_mark(order) & 0xffffu) == 0);
}

TEST_CASE("host grouped GEMM: MXFP4 tiles marked for other activations give NaN on every path, unmarked ones run as packed") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  const std::uint32_t a16 = mark_of(PackedOrder::a16), a16f16 = mark_of(PackedOrder::a16f16),
                      a8 = mark_of(PackedOrder::a8), a4 = mark_of(PackedOrder::a4);

  SUBCASE("bf16 activations: indexed, silu_and_mul with bias") {
    HostLauncher host(Arch::sm_90a);
    GemmCase c;
    c.epilogue = Epilogue::silu_and_mul;
    c.bias = true;
    run_with_marks(*resolver, host, c, {0, a16, a16f16, a8, 0x1234}, {false, false, true, true, true});
  }
  SUBCASE("f16 activations: contiguous, f32 out, split-K over two runs of stages") {
    HostLauncher host(Arch::sm_90a);
    GemmCase c;
    c.act = DType::f16;
    c.layout = Layout::contiguous;
    c.out = DType::f32;
    c.split_k = 2;
    c.tokens = 20;
    run_with_marks(*resolver, host, c, {a16f16, 0, a16, a4}, {false, true, true, true});
  }
  SUBCASE("f32 scaling (scale bytes too far apart for the fragments): bf16 and f16, masked and indexed top-k") {
    HostLauncher host(Arch::sm_90a);
    for (DType act : {DType::bf16, DType::f16}) {
      CAPTURE(to_string(act));
      GemmCase c;
      c.act = act;
      c.layout = act == DType::bf16 ? Layout::masked : Layout::indexed;
      c.epilogue = act == DType::bf16 ? Epilogue::none : Epilogue::topk_weight;
      c.a_per_pair = c.epilogue == Epilogue::topk_weight;
      c.out = DType::f16;
      c.edit = [](quant::QuantizedWeights& q) {
        std::uint32_t x = 777;
        for (auto& sc : q.scales) {
          x = x * 1103515245u + 12345u;
          sc = static_cast<std::uint16_t>(100 + (x >> 16) % 41);  // a span of 40 binades
        }
      };
      const std::uint32_t own = act == DType::bf16 ? a16 : a16f16, other = act == DType::bf16 ? a16f16 : a16;
      run_with_marks(*resolver, host, c, {own, other}, {false, true});
    }
  }
  SUBCASE("e4m3 activations on the three mma paths (sm_89, sm_90a, sm_120a's block-scaled one)") {
    for (Arch arch : {Arch::sm_89, Arch::sm_90a, Arch::sm_120a}) {
      CAPTURE(to_string(arch));
      HostLauncher host(arch);
      GemmCase c;
      c.act = DType::e4m3;
      c.act_scale = ActScale::token;
      c.layout = Layout::contiguous;
      c.out = DType::f32;
      run_with_marks(*resolver, host, c, {a8, 0, a16, a4}, {false, false, true, true});
    }
  }
  SUBCASE("e2m1 activations (sm_120a)") {
    HostLauncher host(Arch::sm_120a);
    GemmCase c;
    c.act = DType::e2m1;
    c.act_scale = ActScale::block32;
    c.epilogue = Epilogue::swiglu_oai;
    run_with_marks(*resolver, host, c, {a4, 0, a8}, {false, false, true});
  }
}
