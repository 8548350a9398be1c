#pragma once
// KernelSpec: everything that makes one compiled kernel different from another (DESIGN §3).
// A 40-byte POD with no padding, so that the in-memory table can hash and compare its bytes.
// Zero is "not set" for every enum, which makes a value-initialized spec invalid until filled.

#include <compare>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace moejit {

enum class Op : std::uint8_t { none = 0, moe_align = 1, grouped_gemm = 2, moe_reduce = 3, act_quantize = 4 };
enum class WeightFormat : std::uint8_t { none = 0, mxfp4 = 1, int4_sym = 2, int4_asym = 3 };
// e2m1: MXFP4 activations, two codes per byte (element 2i in the low nibble of byte i).
enum class DType : std::uint8_t { none = 0, bf16 = 1, f16 = 2, f32 = 3, e4m3 = 4, e8m0 = 5, e2m1 = 6 };
enum class Layout : std::uint8_t { none = 0, indexed = 1, contiguous = 2, masked = 3 };
enum class Epilogue : std::uint8_t { none = 0, silu_and_mul = 1, swiglu_oai = 2, topk_weight = 3 };
enum class Backend : std::uint8_t { none = 0, device = 1, host = 2 };
// How quantized activations are scaled. e4m3: one f32 per row (token), or one per row and 128 k.
// e2m1: one E8M0 byte per row and 32 k (block32, the MX block). none for bf16/f16 activations.
enum class ActScale : std::uint8_t { none = 0, token = 1, block128 = 2, block32 = 3 };

// Target architectures. The `a` forms carry architecture-specific instructions (wgmma, tcgen05)
// and their CUBINs load only on exactly that SM.
enum class Arch : std::uint8_t {
  none = 0,
  sm_80, sm_86, sm_87, sm_89,
  sm_90, sm_90a,
  sm_100, sm_100a, sm_103, sm_103a,
  sm_110, sm_110a,
  sm_120, sm_120a, sm_121, sm_121a,
};

struct KernelSpec {
  Op op{};
  WeightFormat weight{};
  DType scale{};     // dtype of weight scales: e8m0 (mxfp4), bf16 or f16 (int4)
  DType act{};       // activation (A operand) dtype
  DType out{};       // output dtype
  Layout layout{};
  Epilogue epilogue{};
  Arch arch{};
  Backend backend{};
  std::uint8_t stages = 0;  // pipeline stages
  ActScale act_scale{};     // e4m3 / e2m1 activations: their scales' granularity
  std::uint8_t split_k = 0;
  std::uint16_t warps = 0;  // warps per block
  std::uint16_t bm = 0;     // tile rows (tokens); for moe_align the block size
  std::uint16_t bn = 0;
  std::uint16_t bk = 0;
  std::uint32_t group_size = 0;  // weight elements per scale along K (== k for per-channel)
  std::uint32_t n = 0;
  std::uint32_t k = 0;
  std::uint32_t experts = 0;
  std::uint32_t m = 0;  // 0: M is a runtime argument; else M pinned as a compile-time constant

  friend bool operator==(const KernelSpec& a, const KernelSpec& b) {
    return std::memcmp(&a, &b, sizeof(KernelSpec)) == 0;
  }
};

static_assert(std::is_trivially_copyable_v<KernelSpec>);
static_assert(std::has_unique_object_representations_v<KernelSpec>,
              "KernelSpec must have no padding: the in-memory table hashes its bytes");
static_assert(sizeof(KernelSpec) == 40);

// Hash of the spec's bytes, for the in-memory table. Allocation-free.
struct KernelSpecHash {
  std::size_t operator()(const KernelSpec& spec) const noexcept;
};

}  // namespace moejit
