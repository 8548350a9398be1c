#pragma once
// The grouped GEMM op: from a request (packed weights, activations, layout, epilogue) to a
// kernel spec with a tile picked for the problem, and a launch on the context's backend.

#include <cstdint>

#include "dispatch/op_context.hpp"
#include "gemm/grouped_gemm_params.cuh"
#include "spec/kernel_spec.hpp"

namespace moejit::dispatch {

// Packed weights as the ops see them (moejit_packed_weights_t without the ABI wrapper).
struct PackedWeightsView {
  WeightFormat format = WeightFormat::none;
  std::uint32_t group_size = 0;
  DType scale = DType::none;
  std::uint32_t experts = 0, n = 0, k = 0;
  bool act_and_mul = false;
  const void* qweight = nullptr;
  const void* scales = nullptr;
  const void* zeros = nullptr;
  const float* bias = nullptr;
};

struct GroupedGemmRequest {
  PackedWeightsView weights;
  DType act = DType::bf16;
  DType out = DType::bf16;
  Layout layout = Layout::indexed;
  Epilogue epilogue = Epilogue::none;
  // m, a, lda, c, ldc and the layout's pointers; the weight fields are filled from `weights`.
  GroupedGemmParams params{};
  std::uint32_t block_size = 0;            // indexed: the align block size, = the tile's rows
  std::uint32_t rows_per_expert_hint = 0;  // contiguous / masked: 0 estimates it from m
  void* workspace = nullptr;
  std::uint64_t workspace_bytes = 0;
};

// The spec the request runs with on `arch` / `backend`; errors name the bad argument.
Result<KernelSpec> grouped_gemm_spec(const GroupedGemmRequest& request, Arch arch, Backend backend);

// Workspace the request needs (split-K partial sums and counters).
Result<std::uint64_t> grouped_gemm_workspace(const GroupedGemmRequest& request, Arch arch, Backend backend);

// A request made ready to launch: its kernel spec, the kernel's parameters (weights and
// workspace filled in and checked) and the launch shape. `dims.grid[1]` is 0 when there are no
// rows (nothing to launch).
struct PreparedGemm {
  KernelSpec spec{};
  GroupedGemmParams params{};
  LaunchDims dims;
};
Result<PreparedGemm> prepare_grouped_gemm(const GroupedGemmRequest& request, Arch arch, Backend backend);

Status run_grouped_gemm(OpContext& ctx, const GroupedGemmRequest& request, void* stream);

}  // namespace moejit::dispatch
