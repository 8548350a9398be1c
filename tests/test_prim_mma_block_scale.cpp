// Block-scaled mma.sync (templates/common/mma_block_scale.cuh): the host twin lane by lane
// against matrices placed into the fragments by the PTX ISA's tables, written out here again
// (m16n8k32 kind::mxf8f6f4 with e4m3 x e2m1 and e4m3 x e4m3, m16n8k64 kind::mxf4 with e2m1 x e2m1), with every
// selector value and garbage in the lanes and bytes the selectors do not name; and the
// primitives lowered by NVRTC: the instructions on sm_120a and sm_121a, a trap elsewhere.

#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "codegen/generate.hpp"
#include "common/mma_block_scale.cuh"
#include "compile/nvrtc_compiler.hpp"
#include "host_test_support.hpp"
#include "kernels/kernel_def.hpp"
#include "nvrtc_ptx.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"

using namespace moejit;
using namespace moejit::test;
using namespace moejit::prim;

namespace {

// E2M1 magnitudes by code (OCP MX): 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 the sign.
double e2m1(u32 code) {
  static const double magnitude[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (code & 8) ? -magnitude[code & 7] : magnitude[code & 7];
}
double e8m0(u32 code) { return std::ldexp(1.0, static_cast<int>(code) - 127); }

// PTX ISA "Matrix fragments for mma.m16n8k32" (.e4m3 ... .e2m1, one element per byte):
//   A: row = groupID for a0..a3 and a8..a11, groupID + 8 otherwise;
//      col = threadID_in_group * 4 + (i & 3), + 16 for a8..a15
//   B: row = threadID_in_group * 4 + (i & 3), + 16 for b4..b7; col = groupID
// "Matrix fragments for mma.m16n8k64" (.e2m1, eight per register):
//   A: row = groupID for a0..a7 and a16..a23, groupID + 8 otherwise;
//      col = threadID_in_group * 8 + (i & 7), + 32 for a16..a31
//   B: row = threadID_in_group * 8 + (i & 7), + 32 for b8..b15; col = groupID
//   C/D: row = groupID for c0, c1, groupID + 8 for c2, c3; col = threadID_in_group * 2 + (i & 1)
struct Layout {
  bool k64;
  u32 k() const { return k64 ? 64 : 32; }
  u32 per_reg() const { return k64 ? 8 : 4; }
  void a(u32 lane, u32 i, u32& row, u32& col) const {
    const u32 group = lane >> 2, tig = lane % 4, half = k64 ? 8 : 4;
    row = ((i >= half && i < 2 * half) || i >= 3 * half) ? group + 8 : group;
    col = tig * half + (i & (half - 1)) + (i >= 2 * half ? 4 * half : 0);
  }
  void b(u32 lane, u32 i, u32& row, u32& col) const {
    const u32 half = k64 ? 8 : 4;
    row = (lane % 4) * half + (i & (half - 1)) + (i >= half ? 4 * half : 0);
    col = lane >> 2;
  }
};
void c_index(u32 lane, u32 i, u32& row, u32& col) {
  row = (lane >> 2) + (i >= 2 ? 8 : 0);
  col = (lane % 4) * 2 + (i & 1);
}

// One random problem placed into the 32 lanes, with scales where the selectors say ("Block
// Scaling for mma.sync": thread-id-a picks the quad's lower (0) or upper (1) lane pair, whose
// lower lane scales row groupID and upper lane row groupID + 8; thread-id-b picks the lane of the
// quad that scales column groupID; byte-id picks the byte, 2X the byte pair, k 0..31 first), and
// random bytes everywhere else.
// A random finite e4m3 byte (not 0x7f / 0xff, the NaNs).
u32 finite_e4m3(std::mt19937& rng) { return static_cast<u32>((rng() & 0x7e) | (rng() & 0x80)); }

void check_block_scale(twin::BlockScaleKind kind, twin::BlockScaleSelect sel, std::mt19937& rng) {
  const bool k64 = kind == twin::BlockScaleKind::mxf4, b_e4m3 = kind == twin::BlockScaleKind::mxf8f6f4_e4m3_e4m3;
  const Layout layout{k64};
  const u32 K = layout.k(), blocks = k64 ? 2 : 1;
  u32 a[16][64], b[64][8], sa[16][2], sb[2][8];
  float c[16][8];
  for (auto& row : a)
    for (auto& v : row) v = k64 ? rng() % 16 : finite_e4m3(rng);
  for (auto& row : b)
    for (auto& v : row) v = b_e4m3 ? finite_e4m3(rng) : rng() % 16;
  for (auto& row : sa)
    for (auto& v : row) v = 118 + rng() % 20;
  for (auto& row : sb)
    for (auto& v : row) v = 118 + rng() % 20;
  for (auto& row : c)
    for (auto& v : row) v = static_cast<float>(rng() % 100) - 50;

  twin::BlockScaleLane lanes[32];
  for (u32 l = 0; l < 32; ++l) {
    twin::BlockScaleLane& x = lanes[l];
    x = {};
    for (u32 i = 0; i < 4 * layout.per_reg(); ++i) {
      u32 r, col;
      layout.a(l, i, r, col);
      x.a[i / layout.per_reg()] |= k64 ? a[r][col] << (4 * (i % 8)) : a[r][col] << (8 * (i % 4));
    }
    for (u32 i = 0; i < 2 * layout.per_reg(); ++i) {
      u32 r, col;
      layout.b(l, i, r, col);
      // mxf8f6f4: an e4m3 byte, or the e2m1 value in the middle four bits of its byte.
      x.b[i / layout.per_reg()] |= k64 ? b[r][col] << (4 * (i % 8)) : b[r][col] << (8 * (i % 4) + (b_e4m3 ? 0 : 2));
    }
    for (u32 i = 0; i < 4; ++i) {
      u32 r, col;
      c_index(l, i, r, col);
      x.c[i] = c[r][col];
    }
    x.scale_a = static_cast<u32>(rng());
    x.scale_b = static_cast<u32>(rng());
  }
  for (u32 l = 0; l < 32; ++l) {
    const u32 quad = l / 4, in_quad = l % 4;
    if (in_quad / 2 == sel.thread_a) {
      const u32 row = quad + 8 * (in_quad % 2);
      for (u32 blk = 0; blk < blocks; ++blk) {
        const u32 shift = 8 * (sel.byte_a + blk);
        lanes[l].scale_a = (lanes[l].scale_a & ~(0xffu << shift)) | sa[row][blk] << shift;
      }
    }
    if (in_quad == sel.thread_b)
      for (u32 blk = 0; blk < blocks; ++blk) {
        const u32 shift = 8 * (sel.byte_b + blk);
        lanes[l].scale_b = (lanes[l].scale_b & ~(0xffu << shift)) | sb[blk][quad] << shift;
      }
  }

  for (u32 l = 0; l < 32; ++l) {
    float d[4];
    twin::block_scale_mma_lane(kind, sel, lanes, l, d);
    for (u32 i = 0; i < 4; ++i) {
      u32 r, col;
      c_index(l, i, r, col);
      double expected = c[r][col];
      for (u32 kk = 0; kk < K; ++kk) {
        const double av = k64 ? e2m1(a[r][kk]) : prim::twin::e4m3_to_f32(static_cast<u8>(a[r][kk]));
        const double bv = b_e4m3 ? prim::twin::e4m3_to_f32(static_cast<u8>(b[kk][col])) : e2m1(b[kk][col]);
        expected += av * e8m0(sa[r][kk / 32]) * bv * e8m0(sb[kk / 32][col]);
      }
      CAPTURE(l);
      CAPTURE(i);
      CHECK(d[i] == static_cast<float>(expected));
    }
  }
}

}  // namespace

TEST_CASE("block-scaled mma twins: every lane's D from the PTX fragment and scale layouts, every selector") {
  const unsigned seed = std::random_device{}();
  INFO("seed: " << seed);
  std::mt19937 rng(seed);
  for (u32 byte = 0; byte < 4; ++byte)
    for (u32 ta = 0; ta < 2; ++ta)
      for (u32 tb = 0; tb < 4; ++tb) {
        CAPTURE(byte);
        CAPTURE(ta);
        CAPTURE(tb);
        check_block_scale(twin::BlockScaleKind::mxf8f6f4_e4m3_e2m1, {byte, ta, 3 - byte, tb}, rng);
        check_block_scale(twin::BlockScaleKind::mxf8f6f4_e4m3_e4m3, {3 - byte, ta, byte, tb}, rng);
        if (byte % 2 == 0) check_block_scale(twin::BlockScaleKind::mxf4, {byte, ta, 2 - byte, tb}, rng);
      }
}

TEST_CASE("block-scaled mma twin: a 0xFF scale makes its rows NaN, others stay finite") {
  twin::BlockScaleLane lanes[32];
  for (u32 l = 0; l < 32; ++l) {
    lanes[l] = {{0x38383838u, 0x38383838u, 0x38383838u, 0x38383838u}, {0x04040404u, 0x04040404u}, {}, 127, 127};
  }
  lanes[4 * 3].scale_a = 0xff;  // thread-id-a 0: lane 12 scales row 3
  for (u32 l = 0; l < 32; ++l) {
    float d[4];
    twin::block_scale_mma_lane(twin::BlockScaleKind::mxf8f6f4_e4m3_e2m1, {0, 0, 0, 0}, lanes, l, d);
    for (u32 i = 0; i < 4; ++i) {
      u32 r, col;
      c_index(l, i, r, col);
      // e4m3 0x38 = 1.0, e2m1 code 1 (0x04 in its container) = 0.5: 32 x 0.5 = 16.
      if (r == 3) CHECK(std::isnan(d[i]));
      else CHECK(d[i] == 16.0f);
    }
  }
}

namespace {

const char* kBlockScaleKernel = R"(#pragma once
#include "common/mma_block_scale.cuh"
#include "common/platform.cuh"
#include "hosttest/params.cuh"
namespace moejit::kernels {

template <class Spec>
MOEJIT_GLOBAL void block_scale_mma(hosttest::Params p) {
  using namespace moejit::prim;
  const u32* in = p.in + thread_x() * 8;
  const u32 a[4] = {in[0], in[1], in[2], in[3]};
  const u32 b[2] = {in[4], in[5]};
  const float c[4] = {0, 0, 0, 0};
  float d[4], e[4], f[4];
  mma_m16n8k32_e4m3_e2m1_block_scale<1, 1, 2, 3>(d, a, b, c, in[6], in[7]);
  mma_m16n8k64_e2m1_block_scale<2, 0, 0, 1>(e, a, b, d, in[6], in[7]);
  mma_m16n8k32_e4m3_e4m3_block_scale<3, 0, 1, 2>(f, a, b, e, in[6], in[7]);
  for (u32 i = 0; i < 4; ++i) p.out[thread_x() * 4 + i] = __float_as_uint(f[i]);
}

}  // namespace moejit::kernels
)";

const KernelDef kBlockScaleDef =
    test_kernel_def<32>("test/block_scale_mma.cuh", "moejit::kernels::block_scale_mma");

}  // namespace

TEST_CASE("block-scaled mma lowers to the instructions on sm_120a and sm_121a and to a trap elsewhere") {
  auto nvrtc = NvrtcCompiler::create({});
  if (!nvrtc.ok()) {
    toolchain_missing("NVRTC is not available here: " + nvrtc.status().message());
    return;
  }
  const codegen::TemplateSet set =
      templates_with({{std::string(kBlockScaleDef.entry), kBlockScaleKernel}});
  for (const Arch arch : {Arch::sm_120a, Arch::sm_121a, Arch::sm_90a, Arch::sm_100a, Arch::sm_120}) {
    CAPTURE(to_string(arch));
    KernelSpec spec = align_spec(8, 8, 1, arch);
    spec.backend = Backend::device;
    auto g = codegen::generate_from_def(spec, kBlockScaleDef, set);
    REQUIRE_MESSAGE(g.ok(), g.status().message());
    auto compiled = (*nvrtc)->compile(*g, set, spec);
    REQUIRE_MESSAGE(compiled.ok(), compiled.status().message());
    CHECK(compiled->report.spill_store_bytes == 0);
    const ArchInfo& info = arch_info(arch);
    auto ptx = ptx_for(*g, set, "compute_" + std::string(info.name.substr(3)));
    REQUIRE_MESSAGE(ptx.ok(), ptx.status().message());
    const bool native = arch == Arch::sm_120a || arch == Arch::sm_121a;
    CHECK(contains(*ptx, "kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e2m1.f32.ue8m0") == native);
    CHECK(contains(*ptx, "kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0") == native);
    CHECK(contains(*ptx, "kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0") == native);
    CHECK(contains(*ptx, "trap;") == !native);
  }
}
