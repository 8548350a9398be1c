#pragma once
// Host and device data for the GPU benchmarks: uploads, buffers filled by doubling copies of
// their first block (weights replicated across experts and rotation copies), and random bf16
// and f16 values made fast enough for prefill-sized activations.

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "common/types.cuh"
#include "runtime/device_buffer.hpp"
#include "runtime/device_launcher.hpp"
#include "spec/kernel_spec.hpp"

namespace moejit::bench {

inline std::uint64_t round16(std::uint64_t bytes) { return (bytes + 15) / 16 * 16; }

// A device buffer of `total` bytes (at least 1) whose first `bytes` are `data`.
Result<DeviceBuffer> upload(DeviceLauncher& l, CUstream stream, const void* data, std::uint64_t bytes,
                            std::uint64_t total);

// Fills `buffer` (`count` blocks of `block` bytes) from its first block, doubling each copy.
Status replicate(DeviceLauncher& l, CUstream stream, const DeviceBuffer& buffer, std::uint64_t block,
                 std::uint64_t count);

// The copies of a layer of `layer_bytes` that make a rotation over them span `rotate_bytes`
// (weights then come from HBM, not L2): at least 1, at most 16 and half the free device memory.
std::uint32_t rotation_copies(DeviceLauncher& l, std::uint64_t layer_bytes, std::uint64_t rotate_bytes);

// `count` bf16 values uniform in [-2, 2) (multiples of 2^-30 before rounding), from a xorshift
// stream seeded by `rng`: prefill cases need up to 10^8 values, and kernel times do not depend
// on them.
std::vector<u16> random_bf16(std::uint64_t count, std::mt19937_64& rng);

// The same for f16 (f16 activations): values uniform in [-2, 2), rounded to f16.
std::vector<u16> random_f16(std::uint64_t count, std::mt19937_64& rng);

// 16-bit outputs (bf16 or f16, per `dtype`) that are infinite or NaN.
std::uint64_t count_nonfinite(std::span<const u16> values, DType dtype);

// `count` e4m3 bytes of values uniform in [-448, 448] (the range a per-token amax / 448 scale
// gives), from the same kind of stream: never a NaN code.
std::vector<u8> random_e4m3(std::uint64_t count, std::mt19937_64& rng);

// `rows` f32 activation scales in [2^-10, 2^-6) (amax / 448 of rows of magnitude 0.4 to 7).
std::vector<float> random_act_scales(std::uint64_t rows, std::mt19937_64& rng);

// `count` bytes of random e2m1 pairs (two codes per byte, every one of the 16 codes finite).
std::vector<u8> random_e2m1_pairs(std::uint64_t count, std::mt19937_64& rng);

// `rows` rows of `ld` E8M0 bytes in [119, 126] (2^-8 .. 2^-1: amax / 6 of blocks of magnitude
// 0.02 to 3).
std::vector<u8> random_e8m0_rows(std::uint64_t rows, std::uint64_t ld, std::mt19937_64& rng);

}  // namespace moejit::bench
