#include "bench/gpu/device_data.hpp"

#include <algorithm>
#include <cmath>

#include "common/numeric.cuh"

namespace moejit::bench {

Result<DeviceBuffer> upload(DeviceLauncher& l, CUstream stream, const void* data, std::uint64_t bytes,
                            std::uint64_t total) {
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::allocate(l, std::max<std::uint64_t>(total, 1)));
  MOEJIT_TRY(l.copy_to_backend(b.data(), data, bytes, stream));
  return b;
}

Status replicate(DeviceLauncher& l, CUstream stream, const DeviceBuffer& buffer, std::uint64_t block,
                 std::uint64_t count) {
  auto* base = buffer.as<unsigned char>();
  for (std::uint64_t have = 1; have < count;) {
    const std::uint64_t n = std::min(have, count - have);
    MOEJIT_TRY(l.copy_within_backend(base + have * block, base, n * block, stream));
    have += n;
  }
  return {};
}

std::uint32_t rotation_copies(DeviceLauncher& l, std::uint64_t layer_bytes, std::uint64_t rotate_bytes) {
  auto copies = static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>((rotate_bytes + layer_bytes - 1) / std::max<std::uint64_t>(layer_bytes, 1), 1, 16));
  std::size_t free_bytes = 0, total_bytes = 0;
  if (l.driver().api().MemGetInfo(&free_bytes, &total_bytes) == CUDA_SUCCESS)
    while (copies > 1 && layer_bytes * copies > free_bytes / 2) --copies;
  return copies;
}

namespace {

// `count` values uniform in [-2, 2) from a xorshift stream, each through `round`.
template <class Round>
std::vector<u16> random_halves(std::uint64_t count, std::mt19937_64& rng, Round round) {
  std::vector<u16> out(count);
  std::uint64_t state = rng() | 1;
  for (u16& v : out) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    v = round(static_cast<float>(static_cast<std::int32_t>(state >> 32)) * 0x1p-30f);
  }
  return out;
}

}  // namespace

std::vector<u16> random_bf16(std::uint64_t count, std::mt19937_64& rng) {
  return random_halves(count, rng, [](float x) { return prim::twin::f32_to_bf16(x); });
}

std::vector<u16> random_f16(std::uint64_t count, std::mt19937_64& rng) {
  return random_halves(count, rng, [](float x) { return prim::twin::f32_to_f16(x); });
}

std::uint64_t count_nonfinite(std::span<const u16> values, DType dtype) {
  // All exponent bits set: bf16 0x7f80, f16 0x7c00.
  const u16 exponent = dtype == DType::f16 ? 0x7c00 : 0x7f80;
  return static_cast<std::uint64_t>(
      std::count_if(values.begin(), values.end(), [&](u16 h) { return (h & exponent) == exponent; }));
}

std::vector<u8> random_e4m3(std::uint64_t count, std::mt19937_64& rng) {
  std::vector<u8> out(count);
  std::uint64_t state = rng() | 1;
  for (u8& v : out) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    v = prim::twin::f32_to_e4m3(static_cast<float>(static_cast<std::int32_t>(state >> 32)) * (448.0f / 0x1p31f));
  }
  return out;
}

std::vector<float> random_act_scales(std::uint64_t rows, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> exponent(-10.0f, -6.0f);
  std::vector<float> out(rows);
  for (float& v : out) v = std::exp2(exponent(rng));
  return out;
}

std::vector<u8> random_e2m1_pairs(std::uint64_t count, std::mt19937_64& rng) {
  std::vector<u8> out(count);
  std::uint64_t state = rng() | 1;
  for (u8& v : out) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    v = static_cast<u8>(state >> 56);
  }
  return out;
}

std::vector<u8> random_e8m0_rows(std::uint64_t rows, std::uint64_t ld, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> byte(119, 126);
  std::vector<u8> out(rows * ld);
  for (u8& v : out) v = static_cast<u8>(byte(rng));
  return out;
}

}  // namespace moejit::bench
