// `moejit compile --spec SPEC.json [--arch ARCH]`: resolve one spec through memory, store and
// compiler, and report where it came from and what it uses.
// `moejit --version`: versions of moejit and of the NVRTC it found.

#include <chrono>

#include "cli/commands.hpp"
#include "compile/nvrtc_library.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"
#include "spec/spec_json.hpp"

namespace moejit::cli {

int print_version(const GlobalOptions& g) {
  Json doc;
  doc["version"] = moejit_version();
  auto nvrtc = NvrtcLibrary::get();
  if (nvrtc.ok()) {
    doc["compiler"] = (*nvrtc)->identity();
    doc["nvrtc_path"] = (*nvrtc)->path();
  } else {
    doc["compiler"] = nullptr;
    doc["compiler_error"] = nvrtc.status().message();
  }
  return print(g, doc);
}

Command add_compile_command(CLI::App& app, const GlobalOptions& g) {
  auto* cmd = app.add_subcommand("compile", "Build (or find) the kernel for a spec file");
  auto spec_path = std::make_shared<std::string>();
  auto arch = std::make_shared<std::string>();
  cmd->add_option("--spec", *spec_path, "KernelSpec JSON file (schema in README)")->required();
  cmd->add_option("--arch", *arch, "Target architecture, overriding the spec's (e.g. sm_90a)");
  return {cmd, [&g, spec_path, arch]() -> int {
    auto spec = load_spec_file(*spec_path);
    if (!spec.ok()) return fail(g, spec.status());
    if (!arch->empty()) {
      auto a = parse_arch(*arch);
      if (!a) {
        std::string known;
        for (const auto& info : all_archs()) known += (known.empty() ? "" : ", ") + std::string(info.name);
        return fail(g, error(Code::invalid_argument, "--arch {}: expected one of {}", *arch, known));
      }
      spec->arch = *a;
    }
    if (spec->backend == Backend::none) spec->backend = Backend::device;
    auto options = resolver_options(g);
    if (!options.ok()) return fail(g, options.status());
    auto resolver = KernelResolver::create(std::move(options).value());
    if (!resolver.ok()) return fail(g, resolver.status());

    auto start = std::chrono::steady_clock::now();
    auto r = (*resolver)->resolve(*spec);
    double resolve_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!r.ok()) return fail(g, r.status());
    const auto& k = *r->kernel;
    Json doc;
    doc["key"] = k.key.hex();
    doc["source"] = to_string(r->source);
    doc["kernel"] = k.meta.kernel_name;
    doc["arch"] = to_string(k.spec.arch);
    doc["registers"] = k.meta.registers;
    doc["spill_bytes"] = k.meta.spill_store_bytes + k.meta.spill_load_bytes;
    doc["shared_bytes"] = k.meta.static_shared_bytes + k.meta.dynamic_shared_bytes;
    doc["static_shared_bytes"] = k.meta.static_shared_bytes;
    doc["dynamic_shared_bytes"] = k.meta.dynamic_shared_bytes;
    doc["block_threads"] = k.meta.block_threads;
    doc["compile_ms"] = k.meta.compile_ms;
    doc["resolve_ms"] = resolve_ms;
    doc["binary_bytes"] = k.binary.size();
    doc["compiler"] = k.meta.compiler;
    doc["spec"] = Json::parse(spec_to_json(k.spec));
    return print(g, doc);
  }};
}

}  // namespace moejit::cli
