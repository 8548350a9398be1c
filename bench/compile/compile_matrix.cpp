// Prints the grouped-GEMM compile matrix as a Markdown table (for the README): registers,
// spills and shared memory of every tile configuration on every target, for the two format
// corners the compile-matrix test checks, their W4A8 forms (e4m3 activations, sm_89 and newer)
// and MXFP4 W4A4 (e2m1 activations, sm_120a / sm_121a).

#include <cstdio>
#include <filesystem>
#include <future>
#include <vector>

#include "codegen/template_set.hpp"
#include "dispatch/tile_configs.hpp"
#include "runtime/kernel_resolver.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"
#include "support/fs.hpp"

using namespace moejit;

int main() {
  KernelResolver::Options o;
  o.store.dir = (std::filesystem::temp_directory_path() / ("moejit-matrix-" + unique_suffix())).string();
  o.compile_threads = std::max(1u, std::thread::hardware_concurrency());
  o.templates = codegen::TemplateSet::embedded();
  auto resolver = KernelResolver::create(o);
  if (!resolver.ok()) {
    std::fprintf(stderr, "%s\n", resolver.status().to_string().c_str());
    return 1;
  }
  struct Corner {
    const char* name;
    WeightFormat weight;
    DType scale, act;
    std::uint32_t group;
    Epilogue epilogue;
    ActScale act_scale = ActScale::none;
  };
  const Corner corners[] = {
      {"mxfp4 / bf16 act / store", WeightFormat::mxfp4, DType::e8m0, DType::bf16, 32, Epilogue::none},
      {"int4 asym g128 / f16 act / silu_and_mul", WeightFormat::int4_asym, DType::f16, DType::f16, 128,
       Epilogue::silu_and_mul},
      {"mxfp4 / e4m3 act, token scales / store", WeightFormat::mxfp4, DType::e8m0, DType::e4m3, 32, Epilogue::none,
       ActScale::token},
      {"int4 asym g128 / e4m3 act, block128 scales / silu_and_mul", WeightFormat::int4_asym, DType::f16, DType::e4m3,
       128, Epilogue::silu_and_mul, ActScale::block128},
      {"int4 sym g128 / e4m3 act, token scales / silu_and_mul", WeightFormat::int4_sym, DType::bf16, DType::e4m3,
       128, Epilogue::silu_and_mul, ActScale::token},
      {"mxfp4 / e2m1 act, block32 scales / store", WeightFormat::mxfp4, DType::e8m0, DType::e2m1, 32, Epilogue::none,
       ActScale::block32}};
  std::vector<std::pair<std::string, std::future<Result<Resolution>>>> rows;
  for (const Corner& c : corners)
    for (Arch arch : default_target_archs()) {
      if (c.act == DType::e4m3 && arch_info(arch).sm < 89) continue;  // no e4m3 mma before sm_89
      if (c.act == DType::e2m1 && !has_block_scale_mma(arch)) continue;  // kind::mxf4: sm_120a / sm_121a
      for (const auto& tile : dispatch::gemm_tile_configs(arch, 7168, c.weight, c.scale, c.group, c.act, c.act_scale)) {
        KernelSpec s{};
        s.op = Op::grouped_gemm;
        s.arch = arch;
        s.backend = Backend::device;
        s.weight = c.weight;
        s.scale = c.scale;
        s.act = c.act;
        s.act_scale = c.act_scale;
        s.out = DType::bf16;
        s.layout = Layout::indexed;
        s.epilogue = c.epilogue;
        s.group_size = c.group;
        s.n = 4096;
        s.k = 7168;
        s.experts = 256;
        s = dispatch::with_tile(s, tile);
        std::string label = fmt::format("| {} | {}x{}x{}, {} stages, {} warps | {} |", c.name, tile.bm, tile.bn,
                                        tile.bk, tile.stages, tile.warps, to_string(arch));
        rows.emplace_back(label, (*resolver)->resolve_async(s));
      }
    }
  std::printf("| format | tile (bm x bn x bk) | arch | registers | spill bytes | shared bytes |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (auto& [label, f] : rows) {
    auto r = f.get();
    if (!r.ok()) {
      std::printf("%s error: %s |||\n", label.c_str(), r.status().message().c_str());
      continue;
    }
    const auto& m = r->kernel->meta;
    std::printf("%s %u | %u | %u |\n", label.c_str(), m.registers, m.spill_store_bytes + m.spill_load_bytes,
                m.static_shared_bytes + m.dynamic_shared_bytes);
  }
  std::error_code ec;
  std::filesystem::remove_all(o.store.dir, ec);
  return 0;
}
