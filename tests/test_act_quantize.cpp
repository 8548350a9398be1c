// The FP8 activation quantization kernel (templates/moe/quantize.cuh) on the host backend:
// every byte and scale against the recipe written from the e4m3 definition (fp8_reference.hpp),
// over row lengths that take one and several passes, both scale granularities, both input
// dtypes, and rows of zeros, NaN, infinity and values at every magnitude.

#include <doctest/doctest.h>

#include <cstring>
#include <future>
#include <random>
#include <span>

#include "common/numeric.cuh"
#include "fp4_reference.hpp"
#include "fp8_reference.hpp"
#include "host_test_support.hpp"
#include "kernels/act_quantize.hpp"
#include "moe/quantize_params.cuh"
#include "spec/spec_fields.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

constexpr u8 kPoisonByte = 0xa5;

// Rows of `n` values with a random magnitude each (2^-20 .. 2^20 for bf16, 2^-10 .. 2^10 for
// f16), and the special rows: all zero, a NaN among normal values, an infinity (bf16: f16 rows
// keep to finite values the format holds), one huge value among tiny ones.
std::vector<float> test_rows(std::mt19937& rng, std::size_t rows, std::uint32_t n, DType act) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int span = act == DType::bf16 ? 20 : 10;
  std::vector<float> x(rows * n);
  for (std::size_t r = 0; r < rows; ++r) {
    const float magnitude = std::ldexp(1.0f, static_cast<int>(rng() % (2 * span + 1)) - span);
    for (std::uint32_t c = 0; c < n; ++c) x[r * n + c] = normal(rng) * magnitude;
  }
  std::fill_n(x.begin(), n, 0.0f);                                         // row 0: zeros
  x[1 * n + rng() % n] = std::numeric_limits<float>::quiet_NaN();          // row 1: a NaN
  if (act == DType::bf16) x[2 * n + rng() % n] = -std::numeric_limits<float>::infinity();  // row 2
  for (std::uint32_t c = 0; c < n; ++c) x[3 * n + c] *= 1e-3f;             // row 3: one outlier
  x[3 * n + rng() % n] = act == DType::bf16 ? 3e4f : 6e4f;
  return x;
}

// One block per row, as the fused layer launches it.
void run_quantize(const ResolvedKernel& kernel, const ActQuantizeParams& p) {
  HostLaunchShape shape;
  shape.grid = {act_quantize_grid(p.rows).x, 1, 1};
  shape.block = {kernel.meta.block_threads, 1, 1};
  shape.dynamic_shared_bytes = kernel.meta.dynamic_shared_bytes;
  const Status ran = launch_host_kernel(kernel, &p, sizeof p, shape);
  REQUIRE_MESSAGE(ran.ok(), ran.message());
}

u16 narrow(DType act, float v) { return act == DType::bf16 ? prim::twin::f32_to_bf16(v) : prim::twin::f32_to_f16(v); }
float widen(DType act, u16 v) { return act == DType::bf16 ? prim::twin::bf16_to_f32(v) : prim::twin::f16_to_f32(v); }

void check_quantize(const ResolvedKernel& kernel, std::mt19937& rng, std::size_t rows) {
  const KernelSpec& s = kernel.spec;
  const std::uint32_t n = s.n;
  const bool block = s.act_scale == ActScale::block128;
  CAPTURE(to_string(s.act));
  CAPTURE(to_string(s.act_scale));
  CAPTURE(n);
  CAPTURE(rows);
  // Rows wider than n on both sides: the kernel must leave the padding alone.
  const std::uint32_t ld_in = n + 24, ld_out = n + 32;
  const std::uint32_t scale_ld = block ? n / 128 + 3 : 0;
  std::vector<float> x = test_rows(rng, rows, n, s.act);
  std::vector<u16> in(rows * ld_in, 0x7fc1);  // padding: NaN, which must not reach a scale
  for (std::size_t r = 0; r < rows; ++r)
    for (std::uint32_t c = 0; c < n; ++c) {
      in[r * ld_in + c] = narrow(s.act, x[r * n + c]);
      x[r * n + c] = widen(s.act, in[r * ld_in + c]);  // what the kernel sees
    }
  const fp8::Quantized want = fp8::quantize(x, rows, n, block);

  std::vector<u8> out(rows * ld_out, kPoisonByte);
  const std::size_t scale_slots = rows * (block ? scale_ld : 1) + 4;
  std::vector<float> scales(scale_slots, std::numeric_limits<float>::quiet_NaN());
  ActQuantizeParams p{};
  p.in = in.data();
  p.out = out.data();
  p.scales = scales.data();
  p.ld_in = ld_in;
  p.ld_out = ld_out;
  p.scale_ld = scale_ld;
  p.rows = static_cast<i32>(rows);
  run_quantize(kernel, p);

  std::size_t bad = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::uint32_t c = 0; c < ld_out; ++c) {
      const u8 expect = c < n ? want.codes[r * n + c] : kPoisonByte;
      if (out[r * ld_out + c] != expect && bad++ < 8)
        CHECK_MESSAGE(false, "row " << r << " column " << c << ": code 0x" << std::hex << int(out[r * ld_out + c])
                                    << ", expected 0x" << int(expect) << std::dec << " (x = " << (c < n ? x[r * n + c] : 0.0f)
                                    << ")");
    }
    for (std::uint32_t g = 0; g < want.scales_per_row; ++g) {
      const float got = scales[r * (block ? scale_ld : 1) + g], expect = want.scales[r * want.scales_per_row + g];
      if (std::memcmp(&got, &expect, 4) != 0 && bad++ < 8)
        CHECK_MESSAGE(false, "row " << r << " scale " << g << " = " << got << ", expected " << expect);
    }
    if (block)  // the slots between rows' scales are untouched
      for (std::uint32_t g = n / 128; g < scale_ld; ++g) CHECK(std::isnan(scales[r * scale_ld + g]));
  }
  CHECK(bad == 0);
  // The recipe's edges, visible in the bytes: the outlier row saturates at 448, the zero row is
  // zeros with scale 1, the NaN stays NaN.
  CHECK(want.scales[0] == 1.0f);
  CHECK(std::count(want.codes.begin() + 3 * n, want.codes.begin() + 4 * n, u8{0x7e}) +
            std::count(want.codes.begin() + 3 * n, want.codes.begin() + 4 * n, u8{0xfe}) >= 1);
  CHECK(std::count(want.codes.begin() + n, want.codes.begin() + 2 * n, u8{0x7f}) == 1);
}

// Compiles `specs` for the host backend together, then runs `check` on each kernel for every row
// count, on fresh random data (the seed is printed on failure).
template <class Check>
void check_each_kernel(std::span<const KernelSpec> specs, std::initializer_list<std::size_t> row_counts, Check check) {
  TempDir dir;
  auto resolver = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(resolver.ok());
  std::vector<std::future<Result<Resolution>>> pending;
  for (const KernelSpec& spec : specs) pending.push_back((*resolver)->resolve_async(spec));
  const unsigned seed = std::random_device{}();
  INFO("seed: " << seed);
  std::mt19937 rng(seed);
  for (auto& f : pending) {
    auto r = f.get();
    REQUIRE_MESSAGE(r.ok(), r.status().message());
    for (std::size_t rows : row_counts) check(*r->kernel, rng, rows);
  }
}

}  // namespace

TEST_CASE("FP8 activation quantization on the host backend: bytes and scales exactly as the recipe gives them") {
  if (!host_compiler_or_skip()) return;
  // One partial pass, several passes, more warps, a row shorter than a warp's vectors.
  const KernelSpec specs[] = {act_quantize_spec(DType::bf16, ActScale::token, 2048, Arch::sm_90a, Backend::host),
                              act_quantize_spec(DType::f16, ActScale::block128, 384, Arch::sm_90a, Backend::host),
                              act_quantize_spec(DType::bf16, ActScale::block128, 7168, Arch::sm_90a, Backend::host),
                              act_quantize_spec(DType::bf16, ActScale::token, 9216, Arch::sm_90a, Backend::host),
                              act_quantize_spec(DType::f16, ActScale::token, 40, Arch::sm_90a, Backend::host)};
  CHECK(specs[3].warps == 8);  // 9216 columns need more than 4 warps x 2048
  check_each_kernel(specs, {4, 9}, check_quantize);
}

TEST_CASE("FP8 activation quantization specs are checked: input dtype, granularity, row length") {
  KernelSpec s = act_quantize_spec(DType::bf16, ActScale::block128, 7168, Arch::sm_90a, Backend::device);
  CHECK(validate_spec(s).ok());
  KernelSpec bad = s;
  bad.act = DType::e4m3;
  CHECK(contains(validate_spec(bad).message(), "field 'act' = e4m3: expected bf16 or f16"));
  bad = s;
  bad.act_scale = ActScale::none;
  CHECK(contains(validate_spec(bad).message(), "field 'act_scale' = none: expected token or block128"));
  bad = s;
  bad.n = 7168 + 64;
  CHECK(contains(validate_spec(bad).message(), "expected a multiple of 128 with act_scale block128"));
  bad = act_quantize_spec(DType::bf16, ActScale::token, 4 * 2048, Arch::sm_90a, Backend::device);
  CHECK(bad.warps == 4);
  bad.n += 8;
  CHECK(contains(validate_spec(bad).message(), "of at most warps x 2048 = 8192"));
  bad = s;
  bad.bm = 16;
  CHECK(contains(validate_spec(bad).message(), "field 'bm' = 16: op act_quantize does not use it"));
}

namespace {

// MXFP4 (e2m1, block32): every code and scale byte against fp4_reference.hpp's recipe, rows and
// scale rows wider than n (their padding untouched), a NaN block and an infinite one (byte 0xFF),
// a zero row (byte 127, codes 0), subnormal blocks (byte 0), ties of the e2m1 grid and values
// just past 6 * 2^e (the scale rounds up: nothing saturates).
void check_quantize_e2m1(const ResolvedKernel& kernel, std::mt19937& rng, std::size_t rows) {
  const KernelSpec& s = kernel.spec;
  const std::uint32_t n = s.n;
  CAPTURE(to_string(s.act));
  CAPTURE(n);
  CAPTURE(rows);
  const std::uint32_t ld_in = n + 24, ld_out = n / 2 + 16;
  const std::int64_t scale_ld = fp4::scale_ld_for(n) + 16;
  std::vector<float> x = test_rows(rng, rows, n, s.act);
  if (rows > 5) {
    // Row 4: subnormal magnitudes (bf16) or the smallest f16 ones; row 5: e2m1 ties and the
    // values just past a binade of the scale in its first blocks.
    for (std::uint32_t c = 0; c < n; ++c) x[4 * n + c] = std::ldexp(static_cast<float>(c % 7) - 3.0f, s.act == DType::bf16 ? -130 : -20);
    const float ties[8] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, -0.25f};
    for (std::uint32_t c = 0; c < n; ++c) x[5 * n + c] = ties[c % 8] * (c % 64 < 32 ? 1.0f : 4.0f);
    x[5 * n + 31] = 6.0f;                       // block 0: amax exactly 6 * 2^0
    if (n >= 64) x[5 * n + 63] = 6.0f * 4.0f * 1.0078125f;  // block 1: just past 6 * 2^2
  }
  std::vector<u16> in(rows * ld_in, 0x7fc1);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::uint32_t c = 0; c < n; ++c) {
      in[r * ld_in + c] = narrow(s.act, x[r * n + c]);
      x[r * n + c] = widen(s.act, in[r * ld_in + c]);
    }
  const fp4::Quantized want = fp4::quantize(x, rows, n);

  std::vector<u8> out(rows * ld_out, kPoisonByte), scales(rows * scale_ld + 4, kPoisonByte);
  ActQuantizeParams p{};
  p.in = in.data();
  p.out = out.data();
  p.scales = scales.data();
  p.ld_in = ld_in;
  p.ld_out = ld_out;
  p.scale_ld = scale_ld;
  p.rows = static_cast<i32>(rows);
  run_quantize(kernel, p);

  std::size_t bad = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::uint32_t b = 0; b < scale_ld; ++b) {
      const u8 got = scales[r * scale_ld + b], expect = b < n / 32 ? want.scales[r * want.scale_ld + b] : kPoisonByte;
      if (got != expect && bad++ < 8)
        CHECK_MESSAGE(false, "row " << r << " scale " << b << " = 0x" << std::hex << int(got) << ", expected 0x" << int(expect));
    }
    for (std::uint32_t c = 0; c < ld_out * 2; ++c) {
      const u8 got = static_cast<u8>(c % 2 ? out[r * ld_out + c / 2] >> 4 : out[r * ld_out + c / 2] & 15);
      if (c < n && want.scales[r * want.scale_ld + c / 32] == 0xff) continue;  // a NaN block's codes carry nothing
      const u8 expect = c < n ? want.code(r, c) : (c % 2 ? kPoisonByte >> 4 : kPoisonByte & 15);
      if (got != expect && bad++ < 8)
        CHECK_MESSAGE(false, "row " << r << " column " << c << ": code " << int(got) << ", expected " << int(expect)
                                    << " (x = " << (c < n ? x[r * n + c] : 0.0f) << ")");
    }
  }
  CHECK(bad == 0);
  // The recipe's edges: zero row -> byte 127; the NaN row and the infinite one have a 0xFF block.
  CHECK(want.scales[0] == 127);
  CHECK(std::count(want.scales.begin() + want.scale_ld, want.scales.begin() + 2 * want.scale_ld, u8{0xff}) == 1);
  if (s.act == DType::bf16)
    CHECK(std::count(want.scales.begin() + 2 * want.scale_ld, want.scales.begin() + 3 * want.scale_ld, u8{0xff}) == 1);
  if (rows > 5) {
    CHECK(want.scales[5 * want.scale_ld] == 127);  // amax 6: scale 1, code 7 (6) unsaturated
    CHECK(want.code(5, 31) == 7);
    if (n >= 64) CHECK(want.scales[5 * want.scale_ld + 1] == 130);  // past 24: scale 8, not 4
    CHECK(want.code(5, 0) == 0);   // 0.25: tie between 0 and 0.5 -> 0 (even)
    CHECK(want.code(5, 1) == 2);   // 0.75 -> 1.0 (even)
    CHECK(want.code(5, 6) == 6);   // 5.0 -> 4 (even)
  }
}

}  // namespace

TEST_CASE("MXFP4 activation quantization on the host backend: codes and E8M0 bytes exactly as the recipe gives them") {
  if (!host_compiler_or_skip()) return;
  const KernelSpec specs[] = {act_quantize_spec(DType::bf16, ActScale::block32, 2048, Arch::sm_120a, Backend::host),
                              act_quantize_spec(DType::f16, ActScale::block32, 2880, Arch::sm_120a, Backend::host),
                              act_quantize_spec(DType::bf16, ActScale::block32, 96, Arch::sm_121a, Backend::host),
                              act_quantize_spec(DType::bf16, ActScale::block32, 9216, Arch::sm_120a, Backend::host)};
  for (const KernelSpec& spec : specs) CHECK(spec.out == DType::e2m1);
  check_each_kernel(specs, {6, 11}, check_quantize_e2m1);
}

TEST_CASE("MXFP4 activation quantization specs are checked: scales per 32, rows of whole blocks") {
  KernelSpec s = act_quantize_spec(DType::bf16, ActScale::block32, 2880, Arch::sm_120a, Backend::device);
  CHECK(validate_spec(s).ok());
  KernelSpec bad = s;
  bad.act_scale = ActScale::token;
  CHECK(contains(validate_spec(bad).message(), "field 'act_scale' = token: expected block32"));
  bad = s;
  bad.out = DType::e4m3;
  bad.act_scale = ActScale::block32;
  CHECK(contains(validate_spec(bad).message(), "field 'act_scale' = block32: expected token or block128"));
  bad = s;
  bad.n = 2880 + 8;
  CHECK(contains(validate_spec(bad).message(), "expected a multiple of 32 with act_scale block32"));
}
