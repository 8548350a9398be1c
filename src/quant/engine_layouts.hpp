#pragma once
// The 4-bit weight layouts inference engines hold, read into moejit's logical form or packed
// straight into its device layout (one expert at a time). Per expert, every layout stores
// W[n][k] (n: output column, k: input) with experts stacked along the first dimension; for
// act-and-mul weights, PackOptions::rows says how gate and up rows are arranged along n.
// Every reader checks sizes and formats first and returns a Status naming the bad argument.

#include <span>

#include "quant/pack.hpp"

namespace moejit::quant {

// ---- vLLM / gpt-oss MXFP4 ------------------------------------------------------------------
// blocks [E][N][K/2] u8: byte j of a row holds k = 2j in its low nibble, k = 2j + 1 in its high
// nibble (E2M1 codes); scales [E][N][K/32] u8 E8M0. gpt-oss checkpoints store
// `*_blocks` as [E][N][K/32][16], the same bytes.
struct VllmMxfp4Weights {
  std::span<const u8> blocks;
  std::span<const u8> scales;
  u32 experts = 0, n = 0, k = 0;
};

Result<QuantizedWeights> logical_from_vllm_mxfp4(const VllmMxfp4Weights& weights);
Result<PackedWeights> pack_vllm_mxfp4(const VllmMxfp4Weights& weights, const PackOptions& options = {});

// ---- GPTQ ----------------------------------------------------------------------------------
// Per expert (stacked over E):
//   qweight [E][K/8][N] int32: word (r, n) holds k = 8r + i in nibble i (bits 4i..4i+3);
//   qzeros  [E][K/G][N/8] int32: word (g, c) holds the zero of n = 8c + i in nibble i;
//   scales  [E][K/G][N] f16 (or bf16) bits.
// v2 (GPTQModel's) qzeros hold the zero points themselves. v1 (AutoGPTQ's original format, and
// GPTQModel's v1 export) hold the packed word minus 0x11111111, subtracted as one 32-bit integer,
// so a zero point of 0 borrows from the nibble above (its nibble reads 15, the next one less 1);
// moejit adds 0x11111111 back to the word, as GPTQModel's v1 -> v2 conversion does, which every
// word survives. AutoGPTQ packs z - 1 nibble by nibble instead, the same words while no zero
// point is 0; a 0 there becomes 0xFFFFFFFF and its OR sets that nibble and all above it to F,
// which no reader can undo (GPTQModel notes the same loss). Symmetric checkpoints hold words
// 0x77777777 (v1) / 0x88888888 (v2).
enum class GptqZeros : u8 { v1 = 1, v2 = 2 };

struct GptqWeights {
  std::span<const i32> qweight;
  std::span<const i32> qzeros;  // may be empty when symmetric (zero 8 implied)
  std::span<const u16> scales;
  // Optional [E][K] (or [K], shared by every expert) group index. Checkpoints store it even
  // without act-order; only the trivial g_idx[k] = k / G is supported.
  std::span<const i32> g_idx;
  u32 experts = 0, n = 0, k = 0, group_size = 0;  // group_size == k: per-channel (GPTQ's -1)
  DType scale_dtype = DType::f16;
  GptqZeros zero_format = GptqZeros::v1;
  bool symmetric = false;  // int4_sym: every stored zero must be the symmetric one
  bool desc_act = false;   // act-order checkpoint: not supported
};

Result<QuantizedWeights> logical_from_gptq(const GptqWeights& weights);
Result<PackedWeights> pack_gptq(const GptqWeights& weights, const PackOptions& options = {});

// ---- AWQ -----------------------------------------------------------------------------------
// Per expert (stacked over E), always asymmetric with the real zero stored:
//   qweight [E][K][N/8] int32 and qzeros [E][K/G][N/8] int32, packed along N in AWQ's
//     interleaved order: nibble i (bits 4i..4i+3) of word c holds column n = 8c + kAwqOrder[i],
//     i.e. column 8c + j sits in nibble kAwqReverseOrder[j];
//   scales [E][K/G][N] f16 (or bf16) bits.
inline constexpr u8 kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
inline constexpr u8 kAwqReverseOrder[8] = {0, 4, 1, 5, 2, 6, 3, 7};

struct AwqWeights {
  std::span<const i32> qweight;
  std::span<const i32> qzeros;
  std::span<const u16> scales;
  u32 experts = 0, n = 0, k = 0, group_size = 0;  // group_size == k: per-channel (AWQ's -1)
  DType scale_dtype = DType::f16;
};

Result<QuantizedWeights> logical_from_awq(const AwqWeights& weights);
Result<PackedWeights> pack_awq(const AwqWeights& weights, const PackOptions& options = {});

// ---- compressed-tensors pack-quantized ------------------------------------------------------
// What llm-compressor exports for W4A16 INT4 (Kimi-K2, RedHatAI's w4a16 models), per expert as
// the checkpoint stores its module, stacked over E:
//   weight_packed [E][N][K/8] int32: word (n, j) holds k = 8j + i in nibble i, as q + 8 for the
//     signed value q in -8..7, which is moejit's unsigned code;
//   weight_scale [E][N][K/G] bf16 (or f16) bits;
//   weight_zero_point [E][N/8][K/G] int32, asymmetric checkpoints only (symmetric ones drop it;
//     the zero point is 8): word (c, g) holds the zero point of n = 8c + i in nibble i, also + 8.
// Dequantization is (q - zp) * scale = (nibble - zero nibble) * scale, moejit's own rule. vLLM and
// SGLang transpose these tensors when they load them; what they then hold is GPTQ v2's layout.
struct CompressedTensorsWeights {
  std::span<const i32> qweight;  // weight_packed
  std::span<const i32> qzeros;   // weight_zero_point; empty when symmetric
  std::span<const u16> scales;   // weight_scale
  u32 experts = 0, n = 0, k = 0, group_size = 0;  // group_size == k: strategy "channel"
  DType scale_dtype = DType::bf16;
  bool symmetric = true;
};

Result<QuantizedWeights> logical_from_compressed_tensors(const CompressedTensorsWeights& weights);
Result<PackedWeights> pack_compressed_tensors(const CompressedTensorsWeights& weights, const PackOptions& options = {});

}  // namespace moejit::quant
