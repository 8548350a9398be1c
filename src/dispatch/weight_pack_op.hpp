#pragma once
// Packing weights from the layouts engines hold into moejit's layout, for either backend: the
// packers (src/quant/) run on the host; device-resident sources and destinations go through
// host memory with the launcher's copies.

#include <cstdint>

#include "quant/pack.hpp"
#include "runtime/launcher.hpp"

namespace moejit::dispatch {

enum class WeightSource : std::uint8_t {
  plain_codes = 1,
  vllm_mxfp4 = 2,
  gptq_v1 = 3,
  gptq_v2 = 4,
  awq = 5,
  compressed_tensors = 6
};

struct WeightSourceDesc {
  WeightFormat format = WeightFormat::none;
  std::uint32_t group_size = 0;
  DType scale = DType::none;
  std::uint32_t experts = 0, n = 0, k = 0;
  WeightSource source = WeightSource::plain_codes;
  quant::RowOrder rows = quant::RowOrder::plain;
  PackedOrder order = PackedOrder::a16;  // the activations the tiles are packed for (quant::packed_order_for)
  const void* qweight = nullptr;
  const void* scales = nullptr;
  const void* zeros = nullptr;
  const float* bias = nullptr;
  bool on_device = false;  // the source tensors are in the launcher's (device) memory
};

struct PackedSizes {
  std::uint64_t qweight = 0, scales = 0, zeros = 0, bias = 0;
};

// Validates the description (format, shape, source layout) and returns the packed sizes.
Result<PackedSizes> packed_sizes(const WeightSourceDesc& desc);

struct PackedDestination {
  void* qweight = nullptr;
  void* scales = nullptr;
  void* zeros = nullptr;
  float* bias = nullptr;
};

// Packs and copies into `dest` (the launcher's memory); returns when the copies are done.
Status pack_weights(Launcher& launcher, const WeightSourceDesc& desc, const PackedDestination& dest, void* stream);

}  // namespace moejit::dispatch
