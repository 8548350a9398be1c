#pragma once
// The logical form of 4-bit weights: one code per element in [E][N][K] row order (row n is
// output column n, as in nn.Linear), with scales and zero points per group of K. Quantizers
// produce it, packers consume it, the unpacker restores it and the fp64 reference reads it.
// It is deliberately unpacked (a byte per code): simple to index, compare and check.

#include <cstdint>
#include <vector>

#include "common/types.cuh"
#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit::quant {

struct QuantizedWeights {
  WeightFormat format = WeightFormat::none;
  u32 group_size = 0;         // k per scale; == k for per-channel int4; 32 for mxfp4
  DType scale_dtype = DType::none;  // e8m0 (mxfp4), bf16 or f16 (int4)
  u32 experts = 0, n = 0, k = 0;

  std::vector<u8> codes;    // [E][N][K], 0..15
  std::vector<u16> scales;  // [E][N][K/G] raw bits: E8M0 byte (low 8 bits), bf16 or f16
  std::vector<u8> zeros;    // [E][N][K/G], 0..15; int4_asym only (empty otherwise)

  u32 groups() const { return group_size ? k / group_size : 0; }
  u64 code_index(u32 e, u32 row, u32 kk) const { return (static_cast<u64>(e) * n + row) * k + kk; }
  u64 group_index(u32 e, u32 row, u32 g) const { return (static_cast<u64>(e) * n + row) * groups() + g; }

  // The zero point of the group holding (e, row, kk): the stored one for int4_asym, 8 for
  // int4_sym, unused (0) for mxfp4.
  u8 zero_of(u32 e, u32 row, u32 kk) const;
  // The exact value of the scale of that group (NaN for E8M0 0xFF).
  double scale_of(u32 e, u32 row, u32 kk) const;
  // The weight value in double: e2m1(code) * 2^(s-127) for mxfp4, (q - z) * scale for int4.
  double dequantized(u32 e, u32 row, u32 kk) const;

  // Shape, format and tensor sizes agree; codes and zeros are nibbles. Names the bad field.
  Status validate() const;
};

// An empty QuantizedWeights of the given description with every tensor sized and zero-filled.
QuantizedWeights make_quantized_weights(WeightFormat format, u32 group_size, DType scale_dtype, u32 experts,
                                        u32 n, u32 k);

}  // namespace moejit::quant
