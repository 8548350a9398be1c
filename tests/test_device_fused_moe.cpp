// GPU suite: the fused MoE layer on the device backend against the fp64 reference (the same
// harness the host suite uses), skipped with the reason when there is no GPU.

#include <doctest/doctest.h>

#include "dispatch/spec_observer.hpp"
#include "spec/arch.hpp"
#include "fused_case.hpp"
#include "test_device_support.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

class DeviceTestMemory final : public TestMemory {
 public:
  explicit DeviceTestMemory(DeviceLauncher& launcher) : launcher_(launcher) {}
  void* allocate(std::size_t bytes) override {
    auto b = DeviceBuffer::allocate(launcher_, std::max<std::size_t>(bytes, 16));
    REQUIRE_MESSAGE(b.ok(), b.status().message());
    buffers_.push_back(std::move(b).value());
    return buffers_.back().data();
  }

 private:
  DeviceLauncher& launcher_;
  std::vector<DeviceBuffer> buffers_;
};

}  // namespace

TEST_SUITE("device") {
TEST_CASE("GPU fused MoE: formats, activations, expert parallelism and real model shapes") {
  DeviceLauncher* launcher = device_launcher_or_skip();
  if (launcher == nullptr) return;
  MESSAGE("on " << describe_device(*launcher));
  FusedOps f(*launcher);
  dispatch::OpContext& ops = f.ops;
  DeviceTestMemory memory(*launcher);

  FusedCase small;
  FusedCase oss = small;
  oss.activation = Epilogue::swiglu_oai;
  oss.experts = 6;
  oss.global_experts = 9;
  oss.topk = 4;
  oss.out = DType::f32;
  FusedCase int4 = small;
  int4.weight = WeightFormat::int4_asym;
  int4.group = 128;
  int4.intermediate = 128;  // the down projection's K: a whole group (64 was refused at quantization)
  int4.scale = DType::bf16;
  // Real layer shapes: DeepSeek-V3's at decode (2 experts hold weights, both picked), and
  // Qwen3-30B-A3B's at a prefill-sized batch over 16 experts (16-row tiles and up).
  FusedCase deepseek{7168, 2048, 2, 0, 2, 1, WeightFormat::mxfp4, 32, DType::e8m0, DType::bf16, DType::bf16,
                     Epilogue::silu_and_mul};
  FusedCase qwen{2048, 768, 16, 0, 8, 48, WeightFormat::int4_sym, 128, DType::bf16, DType::bf16, DType::bf16,
                 Epilogue::silu_and_mul};
  for (const FusedCase& c : {small, oss, int4, deepseek, qwen}) run_fused_case(ops, memory, c, std::random_device{}());
}

TEST_CASE("GPU fused MoE W4A8: the layer's own quantization, the caller's e4m3, real shapes") {
  DeviceLauncher* launcher = device_launcher_or_skip();
  if (launcher == nullptr) return;
  if (arch_info(launcher->arch()).sm < 89) {
    MESSAGE("skipped: " << describe_device(*launcher) << " has no e4m3 mma (sm_89 and newer)");
    return;
  }
  FusedOps f(*launcher);
  dispatch::OpContext& ops = f.ops;
  DeviceTestMemory memory(*launcher);

  FusedCase deepseek{7168, 2048, 2, 0, 2, 1, WeightFormat::mxfp4, 32, DType::e8m0, DType::bf16, DType::bf16,
                     Epilogue::silu_and_mul};
  deepseek.act_scale = ActScale::block128;
  FusedCase qwen{2048, 768, 16, 0, 8, 48, WeightFormat::int4_asym, 128, DType::bf16, DType::f16, DType::f32,
                 Epilogue::silu_and_mul};
  qwen.act_scale = ActScale::token;
  // e4m3 hidden states the test quantizes with the documented recipe give the layer's bytes.
  FusedCase prequantized = deepseek;
  prequantized.act = DType::e4m3;
  const std::uint32_t seed = std::random_device{}();
  const FusedResult own = run_fused_case(ops, memory, deepseek, seed);
  const FusedResult given = run_fused_case(ops, memory, prequantized, seed);
  CHECK(own.output == given.output);
  run_fused_case(ops, memory, qwen, std::random_device{}());
}
}  // TEST_SUITE
