// wgmma on the GPU (suite "device"): the probe of tests/wgmma_probe.hpp, compiled for the
// device's sm_90a and run for every type, N and shared-memory layout in one and two
// warpgroups, against the same fp64 products as the host twin's test. This is where the twin's
// reading of the PTX ISA (the fragments, the descriptor, the 128-byte swizzle) meets the
// hardware: the grouped GEMM's sm_90a prefill tiles rest on it.

#include <doctest/doctest.h>

#include <bit>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codegen/generate.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "host_test_support.hpp"
#include "test_device_support.hpp"
#include "wgmma_probe.hpp"

using namespace moejit;
using namespace moejit::test;
using namespace moejit::test::wgmma_probe;

TEST_CASE("wgmma on the GPU: D = A * B for every type, N and layout, one and two warpgroups" * doctest::test_suite("device")) {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  if (l->arch() != Arch::sm_90a) {
    MESSAGE("skipped: wgmma needs sm_90a; this device is " << describe_device(*l));
    return;
  }
  auto nvrtc = NvrtcCompiler::create({});
  REQUIRE_MESSAGE(nvrtc.ok(), nvrtc.status().message());
  const codegen::TemplateSet set = templates_with({{kEntry, kWgmmaKernel}});
  const KernelDef def = test_kernel_def<256, kShared>(kEntry, "moejit::kernels::wgmma_probe");
  KernelSpec spec = host_test_spec();
  spec.backend = Backend::device;
  spec.arch = Arch::sm_90a;
  auto generated = codegen::generate_from_def(spec, def, set);
  REQUIRE_MESSAGE(generated.ok(), generated.status().message());
  auto compiled = (*nvrtc)->compile(*generated, set, spec);
  REQUIRE_MESSAGE(compiled.ok(), compiled.status().message());
  const ResolvedKernel kernel = resolved_test_kernel(spec, *generated, std::move(*compiled), 256, kShared);
  REQUIRE_MESSAGE(l->prepare(kernel).ok(), describe_device(*l));

  std::mt19937 rng(std::random_device{}());
  for (Type type : {type_bf16, type_f16, type_e4m3})
    for (std::uint32_t n_index = 0; n_index < 3; ++n_index)
      for (std::uint32_t layout = 0; layout < kLayouts; ++layout)
        for (std::uint32_t threads : {128u, 256u}) {
          const std::uint32_t n = kNs[n_index], rows = threads / 2;
          CAPTURE(type_name(type));
          CAPTURE(n);
          CAPTURE(layout);
          CAPTURE(threads);
          const Operands o = random_operands(type, rows, n, rng);
          std::vector<std::uint32_t> in((o.a.size() + o.b.size()) / 4);
          std::memcpy(in.data(), o.a.data(), o.a.size());
          std::memcpy(reinterpret_cast<std::uint8_t*>(in.data()) + o.a.size(), o.b.data(), o.b.size());
          const std::size_t out_words = std::size_t{3} * rows * n;
          auto d_in = DeviceBuffer::allocate(*l, in.size() * 4);
          auto d_out = DeviceBuffer::allocate(*l, out_words * 4);
          REQUIRE(d_in.ok());
          REQUIRE(d_out.ok());
          REQUIRE(l->copy_to_backend(d_in->data(), in.data(), in.size() * 4, nullptr).ok());
          REQUIRE(l->fill(d_out->data(), 0xff, out_words * 4, nullptr).ok());  // NaN: a value never written shows
          HostTestParams p;
          p.out = d_out->as<std::uint32_t>();
          p.in = d_in->as<const std::uint32_t>();
          p.mode = type | layout << 2 | n_index << 8;
          LaunchDims dims;
          dims.block[0] = threads;
          dims.dynamic_shared_bytes = kShared;
          const Status launched = l->launch(kernel, dims, &p, sizeof p, nullptr);
          REQUIRE_MESSAGE(launched.ok(), launched.to_string());
          std::vector<std::uint32_t> out(out_words);
          REQUIRE(l->copy_from_backend(out.data(), d_out->data(), out_words * 4, nullptr).ok());
          REQUIRE(l->synchronize(nullptr).ok());
          const std::vector<float> want = reference(type, o, rows, n, type == type_e4m3 ? 128 : 64);
          std::size_t wrong = 0, first_wrong = want.size();
          for (std::size_t i = 0; i < want.size(); ++i)
            if (out[i] != std::bit_cast<std::uint32_t>(want[i])) {
              if (wrong++ == 0) first_wrong = i;
            }
          CAPTURE(first_wrong);
          CHECK(wrong == 0);
        }
}
