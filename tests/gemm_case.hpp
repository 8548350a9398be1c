#pragma once
// Runs one grouped GEMM on a backend (any Launcher: the host executor or a GPU) against the
// fp64 reference (header-only, shared by the host and device grouped GEMM suites). Fresh random
// data every run; the output is poisoned (0xFF bytes: NaN in every float type) before the launch
// and checked completely afterwards: rows the layout writes must hold no poison and match the
// reference, rows it does not write must still hold poison.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/numeric.cuh"
#include "kernels/grouped_gemm.hpp"
#include "dispatch/tile_configs.hpp"
#include "moe/align_params.cuh"
#include "quant/pack.hpp"
#include "reference/compare.hpp"
#include "reference/quantize.hpp"
#include "reference/reference.hpp"
#include "runtime/device_buffer.hpp"
#include "host/host_launcher.hpp"
#include "spec/spec_fields.hpp"
#include "spec/device_profiles.hpp"
#include "spec/spec_json.hpp"
#include "test_support.hpp"
#include "align_reference.hpp"
#include "fp4_reference.hpp"

namespace moejit::test {

struct GemmCase {
  WeightFormat weight = WeightFormat::mxfp4;
  DType scale = DType::e8m0;
  std::uint32_t group = 32;
  DType act = DType::bf16;
  ActScale act_scale = ActScale::none;  // e4m3 activations: per token or per 128 k; e2m1: block32
  DType out = DType::bf16;
  Layout layout = Layout::indexed;
  Epilogue epilogue = Epilogue::none;
  std::uint32_t n = 128, k = 256;
  std::uint32_t experts = 8;          // the spec's expert count
  std::uint32_t touched_experts = 0;  // experts that get tokens and weights (0: all)
  // indexed: tokens and topk (m = tokens * topk); contiguous: total rows; masked: max_m.
  std::int32_t tokens = 12;
  std::uint32_t topk = 2;
  bool a_per_pair = false;           // indexed: A holds one row per pair (divisor 1), not per token
  dispatch::TileConfig tile{16, 128, 64, 4, 4};
  std::uint16_t split_k = 1;
  bool bias = false;
  bool drop_blocks = false;          // indexed: mark some blocks' expert -1 (expert parallelism)
  // indexed: each block's entries shuffled, so that padding lies between the rows with a token
  // (a caller's own routing may place it so; the align puts it last).
  bool padding_holes = false;
  // contiguous: the rows of each expert (expert_rows.size() == experts; `tokens` unused);
  // masked: each expert's count (at most `tokens`, the max_m). Empty: random.
  std::vector<std::int32_t> expert_rows;
  int a_exponent_shift = 0;          // e4m3: rows' magnitudes times 2^shift (extreme f32 scales)
  // e4m3 block128: the scales stored column-major as DeepEP and DeepGEMM give them, [K / 128]
  // columns of rows (masked: one such slab per expert), with gaps of NaN between columns and
  // slabs, so that a read from the wrong place shows.
  bool a_scales_column_major = false;
  bool a_edge_bytes = false;         // e4m3: rows with a NaN code, with +-448, with subnormals;
                                     // e2m1: blocks with scale bytes 0x00, 0x01, 0xF0, 0xFF
  // Edits the logical weights after quantization (edge scale bytes).
  std::function<void(quant::QuantizedWeights&)> edit;
  // MXFP4: bits 16..31 of every expert's range word replaced by this (packed_order_mark): 0 as a
  // buffer packed before the mark, another order's mark as tiles packed for other activations.
  // Where the kernel's order does not accept it, every written output must be NaN.
  std::optional<std::uint32_t> packing_mark;
};

// The case's kernel refuses its weights' packing mark (GemmCase::packing_mark).
inline bool packing_mark_refused(const GemmCase& c) {
  return c.weight == WeightFormat::mxfp4 && c.packing_mark &&
         !packed_order_mark_accepts(*c.packing_mark << 16, quant::packed_order_for(c.act, c.weight));
}

inline std::string describe(const GemmCase& c) {
  return fmt::format("{} {} g{} act={}{}{} out={} {} {} n={} k={} E={} rows={} topk={} tile={}x{}x{}/{}s/{}w split={}{}",
                     to_string(c.weight), to_string(c.scale), c.group, to_string(c.act),
                     c.act_scale == ActScale::none ? "" : "/", c.act_scale == ActScale::none ? "" : to_string(c.act_scale),
                     to_string(c.out),
                     to_string(c.layout), to_string(c.epilogue), c.n, c.k, c.experts, c.tokens, c.topk,
                     c.tile.bm, c.tile.bn, c.tile.bk, c.tile.stages, c.tile.warps, c.split_k,
                     c.bias ? " bias" : "");
}

inline double out_value(DType out, const std::vector<unsigned char>& c, std::size_t index) {
  if (out == DType::f32) {
    float f;
    std::memcpy(&f, c.data() + 4 * index, 4);
    return f;
  }
  u16 h;
  std::memcpy(&h, c.data() + 2 * index, 2);
  return out == DType::bf16 ? prim::twin::bf16_to_f32(h) : prim::twin::f16_to_f32(h);
}

// The reference as the output dtype can hold it (overflow to infinity included).
inline double as_out_dtype(DType out, double v) {
  const float f = static_cast<float>(v);
  if (out == DType::f32) return f;
  return out == DType::bf16 ? prim::twin::bf16_to_f32(prim::twin::f32_to_bf16(f))
                            : prim::twin::f16_to_f32(prim::twin::f32_to_f16(f));
}

struct GemmOutcome {
  double error = INFINITY;
  std::size_t written_rows = 0;
  std::vector<unsigned char> output;  // C as the kernel left it
};

// The kernel a case runs on `backend` for `arch` (suites resolve these ahead, in parallel).
inline KernelSpec gemm_case_spec(const GemmCase& c, Backend backend, Arch arch) {
  KernelSpec spec{};
  spec.op = Op::grouped_gemm;
  spec.backend = backend;
  spec.arch = arch;
  spec.weight = c.weight;
  spec.scale = c.scale;
  spec.act = c.act;
  spec.act_scale = c.act_scale;
  spec.out = c.out;
  spec.layout = c.layout;
  spec.epilogue = c.epilogue;
  spec.group_size = c.group;
  spec.n = c.n;
  spec.k = c.k;
  spec.experts = c.experts;
  spec = dispatch::with_tile(spec, c.tile);
  spec.split_k = c.split_k;
  return spec;
}

// Memory the launcher's kernels read and write, filled from host data: exact-size host
// allocations for the host backend (so AddressSanitizer sees a kernel overrun one), device
// allocations for the device backend. Transfers go through the Launcher interface on the
// default stream.
class BackendMemory {
 public:
  explicit BackendMemory(Launcher& launcher) : launcher_(launcher) {
    if (launcher.backend() == Backend::device) {
      device_ = dynamic_cast<DeviceLauncher*>(&launcher);
      REQUIRE_MESSAGE(device_ != nullptr, "a device-backend Launcher that is not a DeviceLauncher");
    }
  }

  void* upload(const void* data, std::size_t bytes) {
    void* p = allocate(bytes);
    const Status s = launcher_.copy_to_backend(p, data, bytes, nullptr);
    REQUIRE_MESSAGE(s.ok(), s.message());
    return p;
  }
  template <typename T>
  T* upload(const std::vector<T>& v) {
    return static_cast<T*>(upload(v.data(), v.size() * sizeof(T)));
  }
  void* filled(std::size_t bytes, std::uint8_t value) {
    void* p = allocate(bytes);
    const Status s = launcher_.fill(p, value, bytes, nullptr);
    REQUIRE_MESSAGE(s.ok(), s.message());
    return p;
  }
  // Copies back after everything queued has finished.
  void download(void* dst, const void* src, std::size_t bytes) {
    Status s = launcher_.copy_from_backend(dst, src, bytes, nullptr);
    REQUIRE_MESSAGE(s.ok(), s.message());
    s = launcher_.synchronize(nullptr);
    REQUIRE_MESSAGE(s.ok(), s.message());
  }

 private:
  void* allocate(std::size_t bytes) {
    bytes = std::max<std::size_t>(bytes, 1);
    if (device_ == nullptr) {
      host_.push_back(std::make_unique<unsigned char[]>(bytes));  // new[]: 16-byte aligned
      return host_.back().get();
    }
    auto b = DeviceBuffer::allocate(*device_, bytes);
    REQUIRE_MESSAGE(b.ok(), b.status().message());
    device_buffers_.push_back(std::move(b).value());
    return device_buffers_.back().data();
  }

  Launcher& launcher_;
  DeviceLauncher* device_ = nullptr;
  std::vector<std::unique_ptr<unsigned char[]>> host_;
  std::vector<DeviceBuffer> device_buffers_;
};

// Runs the case on `launcher` (its backend and arch make the spec); every check is a doctest
// assertion.
inline GemmOutcome run_gemm_case(KernelResolver& resolver, Launcher& launcher, const GemmCase& c,
                                 std::uint32_t seed) {
  CAPTURE(describe(c));
  CAPTURE(to_string(launcher.backend()));
  CAPTURE(seed);
  std::mt19937 rng(seed);
  GemmOutcome outcome;
  const bool act_and_mul = c.epilogue == Epilogue::silu_and_mul || c.epilogue == Epilogue::swiglu_oai;
  const std::uint32_t touched = c.touched_experts ? c.touched_experts : c.experts;
  const std::uint32_t out_cols = act_and_mul ? c.n / 2 : c.n;

  // Weights: random, quantized, packed.
  std::normal_distribution<float> wdist(0.0f, 0.05f);
  std::vector<float> w(static_cast<std::size_t>(touched) * c.n * c.k);
  for (auto& v : w) v = wdist(rng);
  auto q = quant::quantize(w, touched, c.n, c.k, {c.weight, c.group, c.scale});
  REQUIRE_MESSAGE(q.ok(), q.status().message());
  if (c.edit) c.edit(*q);
  std::vector<float> bias;
  if (c.bias) {
    bias.resize(static_cast<std::size_t>(touched) * c.n);
    for (auto& v : bias) v = wdist(rng) * 4;
  }
  quant::PackOptions pack_options;
  pack_options.rows = act_and_mul ? quant::RowOrder::concatenated : quant::RowOrder::plain;
  pack_options.bias = bias;
  pack_options.order = quant::packed_order_for(c.act, c.weight);
  auto packed = quant::pack(*q, pack_options);
  REQUIRE_MESSAGE(packed.ok(), packed.status().message());
  if (c.packing_mark) {
    REQUIRE(c.weight == WeightFormat::mxfp4);
    u8* ranges = packed->scales.data() + mxfp4_scale_range_offset(packed->experts, c.n, c.k);
    for (u32 e = 0; e < packed->experts; ++e) {
      u32 word;
      std::memcpy(&word, ranges + 4 * e, 4);
      CHECK((word & 0xffff0000u) == packed_order_mark(pack_options.order));  // the packer's own mark
      word = (word & 0xffffu) | *c.packing_mark << 16;
      std::memcpy(ranges + 4 * e, &word, 4);
    }
  }

  // Rows of the layout.
  BackendMemory memory(launcher);
  GroupedGemmParams p{};
  quant::ReferenceProblem ref;
  ref.layout = c.layout;
  ref.epilogue = c.epilogue;
  ref.weights = &*q;
  ref.bias = bias;
  std::vector<i32> offsets, counts;
  std::vector<float> topk_weights;
  AlignOutputs aligned;
  std::int64_t a_rows = 0, c_rows = 0;
  if (c.layout == Layout::indexed) {
    const i32 numel = c.tokens * static_cast<i32>(c.topk);
    std::vector<i32> ids;
    std::vector<i32> choice(touched);
    std::iota(choice.begin(), choice.end(), 0);
    for (i32 t = 0; t < c.tokens; ++t) {
      std::shuffle(choice.begin(), choice.end(), rng);
      for (std::uint32_t j = 0; j < c.topk; ++j) ids.push_back(choice[j % touched]);
    }
    aligned = reference_align(ids, static_cast<std::int32_t>(c.experts), c.tile.bm);
    if (c.drop_blocks)
      for (std::size_t b = 0; b < aligned.expert_ids.size(); b += 3) aligned.expert_ids[b] = -1;
    if (c.padding_holes)
      for (std::size_t b = 0; b * c.tile.bm < static_cast<std::size_t>(aligned.num_tokens_post_pad); ++b) {
        const auto first = aligned.sorted_token_ids.begin() + static_cast<std::ptrdiff_t>(b * c.tile.bm);
        std::shuffle(first, first + c.tile.bm, rng);
      }
    std::uniform_real_distribution<float> tw(0.1f, 1.0f);
    topk_weights.resize(static_cast<std::size_t>(numel));
    for (auto& v : topk_weights) v = tw(rng);
    p.m = numel;
    p.sorted_token_ids = memory.upload(aligned.sorted_token_ids);
    p.expert_ids = memory.upload(aligned.expert_ids);
    p.num_tokens_post_pad = static_cast<const i32*>(memory.upload(&aligned.num_tokens_post_pad, sizeof aligned.num_tokens_post_pad));
    p.a_row_divisor = c.a_per_pair ? 1 : static_cast<i32>(c.topk);
    p.topk_weights = memory.upload(topk_weights);
    a_rows = c.a_per_pair ? numel : c.tokens;
    c_rows = numel;
    ref.m = numel;
    ref.block_m = c.tile.bm;
    ref.sorted_token_ids = aligned.sorted_token_ids;
    ref.expert_ids = aligned.expert_ids;
    ref.num_tokens_post_pad = aligned.num_tokens_post_pad;
    ref.a_row_divisor = p.a_row_divisor;
    ref.topk_weights = topk_weights;
  } else if (c.layout == Layout::contiguous) {
    offsets.assign(c.experts + 1, 0);
    std::vector<i32> rows(c.experts, 0);
    if (!c.expert_rows.empty()) {
      REQUIRE(c.expert_rows.size() == c.experts);
      rows = c.expert_rows;
    } else {
      for (i32 r = 0; r < c.tokens; ++r) rows[rng() % touched]++;
      if (touched > 2) rows[1] = 0;  // an expert with no rows
    }
    for (std::uint32_t e = 0; e < c.experts; ++e) offsets[e + 1] = offsets[e] + rows[e];
    p.m = offsets[c.experts];
    p.expert_offsets = memory.upload(offsets);
    a_rows = c_rows = p.m;
    ref.m = p.m;
    ref.expert_offsets = offsets;
  } else {
    counts.assign(c.experts, 0);
    if (!c.expert_rows.empty()) {
      REQUIRE(c.expert_rows.size() == c.experts);
      counts = c.expert_rows;
    } else {
      for (std::uint32_t e = 0; e < touched; ++e) counts[e] = static_cast<i32>(rng() % (static_cast<std::uint32_t>(c.tokens) + 1));
      if (touched > 1) counts[0] = c.tokens;  // one full slab
      if (touched > 2) counts[1] = 0;         // one empty expert
    }
    p.m = c.tokens;
    p.expert_counts = memory.upload(counts);
    a_rows = c_rows = static_cast<std::int64_t>(c.experts) * c.tokens;
    ref.m = c.tokens;
    ref.expert_counts = counts;
  }

  // A: random activations, exactly representable in the act dtype. e4m3: quantized per token or
  // per 128 k with f32 scales (amax / 448), and the reference reads e4m3 value * scale, so that
  // it checks the kernel against the quantized inputs it was given.
  const std::int64_t lda = c.k;
  const std::size_t a_count = static_cast<std::size_t>(std::max<std::int64_t>(a_rows, 1) * lda);
  const bool act8 = c.act == DType::e4m3, act4 = c.act == DType::e2m1;
  std::vector<u16> a(act8 || act4 ? 0 : a_count);
  std::vector<u8> a8(act8 ? a_count : 0);
  std::vector<double> a_values(a_count);
  std::normal_distribution<float> adist(0.0f, 1.0f);
  std::vector<float> a_scales;
  std::int64_t a_scale_ld = 0;
  fp4::Quantized a4;
  if (act4) {
    // MXFP4 rows of different magnitudes (per 32-k block too), quantized by the test's own
    // recipe; the reference reads e2m1 value * 2^(byte - 127).
    const std::size_t rows = a_count / lda;
    std::vector<float> x(a_count);
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = adist(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 9) - 4 + c.a_exponent_shift);
    a4 = fp4::quantize(x, rows, c.k);
    if (c.a_edge_bytes) {
      // Row r % 5: 0 one NaN block (0xFF: its row's outputs are NaN), 1 a block at 2^-127, 2 one
      // at 2^-126, 3 one at 2^113, 4 untouched; the block moves along k with the row.
      const std::uint8_t bytes[4] = {0xff, 0x00, 0x01, 0xf0};
      for (std::size_t r = 0; r < rows; ++r)
        if (r % 5 < 4) a4.scales[r * a4.scale_ld + (r * 7) % (c.k / 32)] = bytes[r % 5];
    }
    for (std::size_t r = 0; r < rows; ++r)
      for (std::uint32_t col = 0; col < c.k; ++col) a_values[r * lda + col] = a4.value(r, col);
  } else if (act8) {
    const std::uint32_t block = c.act_scale == ActScale::block128 ? 128 : c.k;
    a_scale_ld = c.k / block;
    a_scales.resize(a_count / block);
    std::vector<float> row(c.k);
    for (std::size_t r = 0; r * lda < a_count; ++r) {
      // Rows of different magnitudes, so that a wrong row's scale shows.
      const float magnitude = std::ldexp(1.0f, static_cast<int>(rng() % 9) - 4 + c.a_exponent_shift);
      for (auto& v : row) v = adist(rng) * magnitude;
      for (std::uint32_t b = 0; b < c.k / block; ++b) {
        float amax = 0.0f;
        for (std::uint32_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(row[b * block + i]));
        const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
        a_scales[r * a_scale_ld + b] = scale;
        for (std::uint32_t i = 0; i < block; ++i) {
          const std::size_t at = r * lda + b * block + i;
          a8[at] = prim::twin::f32_to_e4m3(row[b * block + i] / scale);
          a_values[at] = static_cast<double>(prim::twin::e4m3_to_f32(a8[at])) * scale;
        }
      }
      if (c.a_edge_bytes) {
        // Row r % 4: 0 one NaN code (0x7f or 0xff: the row's outputs are NaN), 1 eight saturated
        // values (+-448), 2 eight subnormals (codes 1..7, either sign), 3 untouched.
        const std::uint32_t edits = r % 4 == 0 ? 1 : r % 4 == 3 ? 0 : 8;
        for (std::uint32_t j = 0; j < edits; ++j) {
          const std::size_t at = r * lda + (r * 37 + j * 29) % c.k;
          const u8 sign = static_cast<u8>((r + j) % 2 ? 0x80 : 0);
          a8[at] = r % 4 == 0 ? static_cast<u8>(0x7f | sign) : r % 4 == 1 ? static_cast<u8>(0x7e | sign)
                                                                        : static_cast<u8>((1 + j % 7) | sign);
          const float scale = a_scales[r * a_scale_ld + (at - r * lda) / block];
          a_values[at] = static_cast<double>(prim::twin::e4m3_to_f32(a8[at])) * scale;
        }
      }
    }
  } else {
    for (std::size_t i = 0; i < a.size(); ++i) {
      const float v = adist(rng);
      a[i] = c.act == DType::bf16 ? prim::twin::f32_to_bf16(v) : prim::twin::f32_to_f16(v);
      a_values[i] = c.act == DType::bf16 ? prim::twin::bf16_to_f32(a[i]) : prim::twin::f16_to_f32(a[i]);
    }
  }
  ref.a = std::span<const double>(a_values).first(static_cast<std::size_t>(a_rows * lda));

  // C: poisoned.
  const std::size_t out_bytes = c.out == DType::f32 ? 4 : 2;
  const std::int64_t ldc = out_cols;
  std::vector<unsigned char> out(static_cast<std::size_t>(std::max<std::int64_t>(c_rows, 1) * ldc) * out_bytes, 0);
  void* const c_backend = memory.filled(out.size(), 0xff);

  const KernelSpec spec = gemm_case_spec(c, launcher.backend(), launcher.arch());
  CAPTURE(spec_to_json(spec));

  if (act4) {
    p.a = memory.upload(a4.packed);
    p.a_scales = memory.upload(a4.scales);
    p.a_scale_ld = a4.scale_ld;
  } else if (act8) {
    p.a = memory.upload(a8);
    p.a_scales = memory.upload(a_scales);
    p.a_scale_ld = a_scale_ld;
    if (c.a_scales_column_major) {
      REQUIRE(c.act_scale == ActScale::block128);
      const bool masked = c.layout == Layout::masked;
      const std::int64_t blocks = a_scale_ld, rows = static_cast<std::int64_t>(a_count) / lda;
      const std::int64_t slab_rows = masked ? c.tokens : rows, slabs = masked ? c.experts : 1;
      const std::int64_t k_stride = slab_rows + 3, expert_stride = blocks * k_stride + 5;
      std::vector<float> stored(static_cast<std::size_t>(slabs * expert_stride), std::numeric_limits<float>::quiet_NaN());
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t e = r / slab_rows, t = r % slab_rows;
        for (std::int64_t b = 0; b < blocks; ++b)
          stored[static_cast<std::size_t>(e * expert_stride + b * k_stride + t)] =
              a_scales[static_cast<std::size_t>(r * a_scale_ld + b)];
      }
      p.a_scales = memory.upload(stored);
      p.a_scale_ld = 1;
      p.a_scale_k_stride = k_stride;
      // The kernel reads row (e * m + t) at (e * m + t) * ld + e * skew: skew = stride - m * ld.
      p.a_scale_expert_skew = masked ? expert_stride - c.tokens : 0;
    }
  } else {
    p.a = memory.upload(a);
  }
  p.lda = lda;
  p.b = memory.upload(packed->qweight);
  p.b_scales = memory.upload(packed->scales);
  if (c.weight == WeightFormat::mxfp4) p.b_scale_ranges = mxfp4_scale_ranges(p.b_scales, packed->experts, c.n, c.k);
  p.b_zeros = packed->zeros.empty() ? nullptr : memory.upload(packed->zeros);
  p.bias = packed->bias.empty() ? nullptr : memory.upload(packed->bias);
  p.c = c_backend;
  p.ldc = ldc;

  const GemmTiles tiles = grouped_gemm_tiles(spec, p.m);
  // Workspace poisoned (NaN): split-K must write before it reads.
  const std::size_t workspace_bytes = grouped_gemm_partial_bytes(spec, tiles) + 4 * sizeof(float);
  std::vector<u32> counters(grouped_gemm_counter_count(spec, tiles) + 1, 0);
  u32* counters_backend = nullptr;
  if (spec.split_k > 1) {
    p.workspace = static_cast<float*>(memory.filled(workspace_bytes, 0xff));
    counters_backend = memory.upload(counters);
    p.tile_counters = counters_backend;
  }
  const Status checked = check_grouped_gemm_params(spec, p);
  REQUIRE_MESSAGE(checked.ok(), checked.message());

  auto resolved = resolver.resolve(spec);
  REQUIRE_MESSAGE(resolved.ok(), resolved.status().message());
  if (tiles.rows > 0) {
    auto grid = grouped_gemm_grid(tiles);
    REQUIRE_MESSAGE(grid.ok(), grid.status().message());
    const Status ran = launcher.launch(*resolved->kernel, launch_dims(*resolved->kernel, *grid), &p, sizeof p, nullptr);
    REQUIRE_MESSAGE(ran.ok(), ran.message());
  }
  memory.download(out.data(), c_backend, out.size());
  if (counters_backend != nullptr) {
    std::fill(counters.begin(), counters.end(), 0xdeadbeefu);
    memory.download(counters.data(), counters_backend, counters.size() * sizeof(u32));
  }
  for (u32 counter : counters) CHECK(counter == 0);  // the kernel leaves split-K counters at zero

  auto expected = quant::reference_grouped_gemm(ref);
  REQUIRE_MESSAGE(expected.ok(), expected.status().message());
  REQUIRE(expected->cols == out_cols);
  REQUIRE(static_cast<std::int64_t>(expected->rows) == c_rows);

  // Written rows: no poison left; rows not written: every byte still poison.
  std::vector<double> got(expected->c.size()), want(expected->c.size());
  std::size_t poisoned_in_written = 0, touched_in_unwritten = 0, numbers_from_refused = 0;
  const bool refused = packing_mark_refused(c);
  for (std::size_t r = 0; r < expected->rows; ++r) {
    const bool written = expected->written[r] != 0;
    outcome.written_rows += written;
    for (std::size_t col = 0; col < out_cols; ++col) {
      const std::size_t index = r * static_cast<std::size_t>(ldc) + col;
      bool poison = true;
      for (std::size_t b = 0; b < out_bytes; ++b) poison &= out[index * out_bytes + b] == 0xff;
      got[r * out_cols + col] = out_value(c.out, out, index);
      want[r * out_cols + col] = as_out_dtype(c.out, expected->c[r * out_cols + col]);
      // An expected NaN may legitimately have the poison's bits (all ones is a NaN): there the
      // comparison below (NaN where NaN is expected) is the check.
      if (written) {
        poisoned_in_written += poison && !std::isnan(want[r * out_cols + col]);
        numbers_from_refused += refused && !std::isnan(got[r * out_cols + col]);
      } else {
        touched_in_unwritten += !poison;
      }
    }
  }
  CHECK(poisoned_in_written == 0);
  CHECK(touched_in_unwritten == 0);
  CHECK(numbers_from_refused == 0);
  outcome.output = std::move(out);
  if (refused) return outcome;  // NaN throughout, checked above
  outcome.error = quant::relative_frobenius_error(got, want, out_cols, expected->written);
  const double tolerance = c.out == DType::f32 ? 5e-3 : 1e-2;
  CHECK(outcome.error < tolerance);
  return outcome;
}

// A fresh seed for a case (printed by run_gemm_case when a check fails).
inline std::uint32_t fresh_seed() { return std::random_device{}(); }

// A resolver over a store in `dir`, as the host suites use it.
inline std::unique_ptr<KernelResolver> host_resolver(const TempDir& dir) {
  auto r = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(r.ok());
  return std::move(r).value();
}

// The case on the host backend (sm_90a's limits), as the host suites run it.
inline GemmOutcome run_gemm_case(KernelResolver& resolver, const GemmCase& c, std::uint32_t seed) {
  HostLauncher host(Arch::sm_90a);
  return run_gemm_case(resolver, host, c, seed);
}

// ---- Case lists shared by the host and device suites ---------------------------------------

struct GemmFormat {
  WeightFormat weight;
  DType scale;
  std::uint32_t group;
};

// The layout x epilogue pairs that exist (topk_weight is indexed-only).
inline std::vector<std::pair<Layout, Epilogue>> layout_epilogues() {
  std::vector<std::pair<Layout, Epilogue>> out;
  for (Layout l : {Layout::indexed, Layout::contiguous, Layout::masked})
    for (Epilogue e : {Epilogue::none, Epilogue::silu_and_mul, Epilogue::swiglu_oai, Epilogue::topk_weight})
      if (e != Epilogue::topk_weight || l == Layout::indexed) out.emplace_back(l, e);
  return out;
}

// Every activation dtype x layout x epilogue for one format at small shapes; output dtypes and
// biases rotate across the cases.
inline std::vector<GemmCase> format_matrix(const GemmFormat& f) {
  std::vector<GemmCase> cases;
  const DType outs[] = {DType::bf16, DType::f16, DType::f32};
  int i = 0;
  for (DType act : {DType::bf16, DType::f16})
    for (auto [layout, epilogue] : layout_epilogues()) {
      GemmCase c;
      c.weight = f.weight;
      c.scale = f.scale;
      c.group = f.group;
      c.act = act;
      c.out = outs[i++ % 3];
      c.layout = layout;
      c.epilogue = epilogue;
      c.a_per_pair = epilogue == Epilogue::topk_weight;  // the down projection reads one row per pair
      c.bias = i % 4 == 0;
      cases.push_back(c);
    }
  return cases;
}

// Quantized activations (`act` with its scale granularities, alternating) for one format, every
// layout x epilogue, output dtypes and biases rotating.
inline std::vector<GemmCase> scaled_act_matrix(const GemmFormat& f, DType act, std::initializer_list<ActScale> scales) {
  std::vector<GemmCase> cases;
  const DType outs[] = {DType::bf16, DType::f16, DType::f32};
  int i = 0;
  for (auto [layout, epilogue] : layout_epilogues()) {
    GemmCase c;
    c.weight = f.weight;
    c.scale = f.scale;
    c.group = f.group;
    c.act = act;
    c.act_scale = scales.begin()[i % scales.size()];
    c.out = outs[i++ % 3];
    c.layout = layout;
    c.epilogue = epilogue;
    c.a_per_pair = epilogue == Epilogue::topk_weight;
    c.bias = i % 4 == 0;
    cases.push_back(c);
  }
  return cases;
}

// W4A8: e4m3 activations per token and per 128 k.
inline std::vector<GemmCase> act8_matrix(const GemmFormat& f) {
  return scaled_act_matrix(f, DType::e4m3, {ActScale::token, ActScale::block128});
}

// W4A4: MXFP4 weights x e2m1 activations (E8M0 per 32 on both sides).
inline std::vector<GemmCase> act4_matrix() {
  return scaled_act_matrix({WeightFormat::mxfp4, DType::e8m0, 32}, DType::e2m1, {ActScale::block32});
}

// MXFP4 with one scale block per expert set to the edge byte 0x00 (2^-127), 0xFE or 0xFF
// (NaN for its block); the rest keep their quantized scales.
inline std::vector<GemmCase> edge_scale_cases() {
  std::vector<GemmCase> cases;
  for (std::uint16_t byte : {0x00, 0xfe, 0xff}) {
    GemmCase c;
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.tokens = 20;
    c.edit = [byte](quant::QuantizedWeights& q) {
      for (std::uint32_t e = 0; e < q.experts; ++e) q.scales[q.group_index(e, e % q.n, e % q.groups())] = byte;
    };
    cases.push_back(c);
  }
  return cases;
}

// A NaN scale (0xFF) in a gate row and in an up row of expert 0, which the masked layout always
// gives a full slab of rows, through both act-and-mul epilogues: output columns 3 and 5 must be
// NaN, as torch's clamp and sigmoid pass NaN on, never clamped into a finite value (SwiGLU-OAI
// clamps up to [-7, 7]).
inline std::vector<GemmCase> nan_act_and_mul_cases() {
  std::vector<GemmCase> cases;
  for (Epilogue epilogue : {Epilogue::silu_and_mul, Epilogue::swiglu_oai}) {
    GemmCase c;
    c.epilogue = epilogue;
    c.out = DType::f32;
    c.layout = Layout::masked;
    c.tokens = 20;
    c.edit = [](quant::QuantizedWeights& q) {
      const std::uint32_t half = q.n / 2;  // canonical rows: gate 0..I-1, up I..2I-1
      q.scales[q.group_index(0, 3, 1)] = 0xff;         // gate row 3
      q.scales[q.group_index(0, half + 5, 0)] = 0xff;  // up row 5
    };
    cases.push_back(c);
  }
  return cases;
}

// MXFP4 with one edge scale byte (0x00 = 2^-127, 0x01, 0xFE = 2^127, 0xFF = NaN) per expert, at
// every column position of a 32-column strip: expert e sets column e of strip e % 4, group
// e % groups (32 experts cover the 32 positions, every k32 tile of a stage among them). Such
// experts take the accumulator path (their bytes span too many binades for the fragment path).
inline std::vector<GemmCase> edge_scale_lane_cases() {
  std::vector<GemmCase> cases;
  for (std::uint16_t byte : {0x00, 0x01, 0xfe, 0xff}) {
    GemmCase c;
    c.out = DType::f32;
    c.experts = 32;
    c.tokens = 48;  // 8 pairs per token: every expert gets rows
    c.topk = 8;
    c.n = 128;
    c.k = 256;
    c.edit = [byte](quant::QuantizedWeights& q) {
      for (std::uint32_t e = 0; e < q.experts; ++e)
        q.scales[q.group_index(e, 32 * (e % (q.n / 32)) + e, e % q.groups())] = byte;
    };
    cases.push_back(c);
  }
  return cases;
}

// MXFP4 experts whose every scale byte lies in a narrow window near the top or the bottom of
// the E8M0 range (within the fragment path's span): the fragment path with its extreme offsets.
// Random bytes per block, so outputs stay finite (and normal) in f32.
inline std::vector<GemmCase> extreme_window_cases() {
  std::vector<GemmCase> cases;
  for (DType act : {DType::bf16, DType::f16})
    for (std::uint16_t low : {0x05, 0x30, 0xa0}) {
      const std::uint16_t span = act == DType::bf16 ? 64 : 14;
      GemmCase c;
      c.act = act;
      c.out = DType::f32;
      c.layout = Layout::contiguous;
      c.tokens = 24;
      c.edit = [low, span](quant::QuantizedWeights& q) {
        std::uint32_t x = 12345;
        for (auto& sc : q.scales) {
          x = x * 1103515245u + 12345u;
          sc = static_cast<std::uint16_t>(low + (x >> 16) % (span + 1));
        }
      };
      cases.push_back(c);
    }
  return cases;
}

struct MoeModel {
  const char* name;
  std::uint32_t hidden, intermediate, experts, topk;
};

inline constexpr MoeModel kLingModel{"Ling-3.0-flash", 2560, 768, 512, 8};
inline constexpr MoeModel kDeepSeekModel{"DeepSeek-V3", 7168, 2048, 256, 8};
inline constexpr MoeModel kGptOssModel{"gpt-oss-120b", 2880, 2880, 128, 4};

// The gate/up and down projections of one layer of `model` for `tokens` tokens whose pairs all
// go to `touched` experts (only those get weights; each sees tokens x topk / touched rows, and
// the tile and split are the ones the planner picks for that on `arch`'s default device).
inline std::pair<GemmCase, GemmCase> model_layer_cases(const MoeModel& model, const GemmFormat& f, Epilogue act,
                                                       std::int32_t tokens, std::uint32_t touched, Arch arch) {
  GemmCase up;
  up.weight = f.weight;
  up.scale = f.scale;
  up.group = f.group;
  up.act = DType::bf16;
  up.out = DType::bf16;
  up.layout = Layout::indexed;
  up.epilogue = act;
  up.n = 2 * model.intermediate;
  up.k = model.hidden;
  up.experts = model.experts;
  up.touched_experts = touched;
  up.tokens = tokens;
  up.topk = model.topk;
  up.bias = f.weight == WeightFormat::mxfp4 && act == Epilogue::swiglu_oai;  // gpt-oss has biases
  GemmCase down = up;
  down.epilogue = Epilogue::topk_weight;
  down.n = model.hidden;
  down.k = model.intermediate;
  down.a_per_pair = true;
  const double rows = static_cast<double>(tokens) * model.topk / touched;
  const std::uint16_t bm = dispatch::pick_block_rows(rows);
  const auto profile = default_device_profile(arch);
  for (GemmCase* c : {&up, &down}) {
    dispatch::GemmWork work;
    work.n = c->n;
    work.k = c->k;
    work.group_size = c->group;
    work.weight = c->weight;
    work.scale = c->scale;
    work.busy_experts = touched;
    work.rows_per_expert = rows;
    const dispatch::GemmPlan plan = dispatch::plan_gemm(work, bm, arch, profile ? profile->sms : kFallbackSms);
    c->tile = plan.tile;
    c->split_k = plan.split_k;
  }
  return {up, down};
}

}  // namespace moejit::test
