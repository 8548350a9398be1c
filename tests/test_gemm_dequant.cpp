// The grouped GEMM's in-register dequantization (templates/gemm/dequant.cuh) on the host: every
// nibble of a packed word lands in the B-fragment position the packed layout promises, with the
// value of its code.

#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "gemm/dequant.cuh"
#include "gemm/grouped_gemm_params.cuh"

using namespace moejit;

namespace {

constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

float half_value(gemm::Half h, u32 reg, u32 which) {
  const u16 bits = static_cast<u16>(reg >> (16 * which));
  return h == gemm::Half::bf16 ? prim::twin::bf16_to_f32(bits) : prim::twin::f16_to_f32(bits);
}

// Fragment element e (0..7) of the dequantized registers: step e / 4, register (e / 2) % 2,
// half e % 2, i.e. out[2 * (e / 4) + (e / 2) % 2], half e % 2.
float fragment_element(gemm::Half h, const u32 (&out)[4], u32 e) {
  return half_value(h, out[2 * (e / 4) + (e / 2) % 2], e % 2);
}

// k offset within the tile of fragment element e for lane (., t): as mma's B fragment says.
u32 fragment_k(u32 lane, u32 e) { return 16 * (e / 4) + 8 * ((e / 2) % 2) + 2 * (lane % 4) + e % 2; }

}  // namespace

TEST_CASE("int4 words dequantize to q - z in the promised fragment positions") {
  std::mt19937 rng(std::random_device{}());
  for (gemm::Half h : {gemm::Half::bf16, gemm::Half::f16}) {
    for (int rep = 0; rep < 2000; ++rep) {
      const u32 lane = rng() % 32, zero = rng() % 16;
      // Codes by k offset, placed in nibbles the way a packer must place them.
      u32 code_at_k[32] = {};
      u32 word = 0;
      for (u32 p = 0; p < 8; ++p) {
        const u32 code = rng() % 16;
        word |= code << (4 * p);
        code_at_k[packed_k_of_nibble(NibbleOrder::int4_pairs_p_p4, lane, p)] = code;
      }
      u32 out[4];
      if (h == gemm::Half::bf16) gemm::dequant_int4<gemm::Half::bf16>(word, zero, out);
      else gemm::dequant_int4<gemm::Half::f16>(word, zero, out);
      for (u32 e = 0; e < 8; ++e) {
        CAPTURE(e);
        CHECK(fragment_element(h, out, e) ==
              static_cast<float>(static_cast<int>(code_at_k[fragment_k(lane, e)]) - static_cast<int>(zero)));
      }
    }
  }
}

TEST_CASE("E2M1 words dequantize to their values, signs included, in the promised positions") {
  std::mt19937 rng(std::random_device{}());
  for (gemm::Half h : {gemm::Half::bf16, gemm::Half::f16}) {
    for (int rep = 0; rep < 2000; ++rep) {
      const u32 lane = rng() % 32;
      u32 code_at_k[32] = {};
      u32 word = 0;
      for (u32 p = 0; p < 8; ++p) {
        const u32 code = rng() % 16;
        word |= code << (4 * p);
        code_at_k[packed_k_of_nibble(NibbleOrder::e2m1_pairs_2q, lane, p)] = code;
      }
      u32 out[4];
      if (h == gemm::Half::bf16) gemm::dequant_e2m1<gemm::Half::bf16>(word, out);
      else gemm::dequant_e2m1<gemm::Half::f16>(word, out);
      for (u32 e = 0; e < 8; ++e) {
        const u32 code = code_at_k[fragment_k(lane, e)];
        const float expected = (code & 8 ? -1.0f : 1.0f) * kE2M1[code & 7];
        const float got = fragment_element(h, out, e);
        CAPTURE(code);
        CHECK(got == expected);
        CHECK(std::signbit(got) == ((code & 8) != 0));  // -0 stays -0
      }
    }
  }
}

TEST_CASE("E8M0 scales: 0x00 is 2^-127, 0xFE is 2^127, 0xFF is NaN") {
  CHECK(gemm::e8m0_to_f32(0x00) == std::ldexp(1.0f, -127));
  CHECK(gemm::e8m0_to_f32(0x01) == std::ldexp(1.0f, -126));
  CHECK(gemm::e8m0_to_f32(0x7f) == 1.0f);
  CHECK(gemm::e8m0_to_f32(0xfe) == std::ldexp(1.0f, 127));
  CHECK(std::isnan(gemm::e8m0_to_f32(0xff)));
  for (u32 s = 1; s < 255; ++s) CHECK(gemm::e8m0_to_f32(s) == std::ldexp(1.0f, static_cast<int>(s) - 127));
}
