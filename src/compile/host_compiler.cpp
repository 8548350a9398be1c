#include "compile/host_compiler.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <utility>

#include "compile/source_dump.hpp"
#include "support/env.hpp"
#include "support/fs.hpp"
#include "support/log.hpp"
#include "support/subprocess.hpp"

namespace moejit {
namespace {

namespace fs = std::filesystem;

// Whether the compiler died instead of rejecting the source: killed by a signal itself, or its
// compiler proper (cc1plus, the clang frontend) was - the OOM killer on a host short of memory,
// say. The same source may compile on the next call, so this must not be remembered as the
// spec's compile error. The phrases are GCC's and Clang's drivers'.
bool compiler_died(const ProcessOutput& ran) {
  if (ran.exit_code < 0) return true;
  if (ran.exit_code == 0) return false;
  for (std::string_view sign : {"signal terminated program", "failed due to signal", "unable to execute command"})
    if (ran.output.find(sign) != std::string::npos) return true;
  return false;
}

// Whether the driver could not start a program of its toolchain: GCC's "cannot execute 'cc1plus'"
// or "'as'", collect2's "cannot find 'ld'" (Clang's "unable to execute command" is above). No
// source would compile, so this is not the spec's compile error either. The quotes around the
// name depend on the locale, so the phrases stop before them.
bool toolchain_incomplete(int exit_code, const std::string& output) {
  if (exit_code == 0) return false;
  for (std::string_view sign : {"fatal error: cannot execute ", "fatal error: cannot find "})
    if (output.find(sign) != std::string::npos) return true;
  return false;
}

// Where the template root sits inside the compile directory. The compiler runs in that
// directory, so `-I` names this relative path and the key can hold the very same flag.
constexpr const char* kTemplateDir = "templates";
constexpr const char* kOutputName = "kernel.so";

// A mkdtemp directory, removed with its contents when the compile is over.
constexpr std::string_view kTempPrefix = "moejit-host-";
class CompileDir {
 public:
  static Result<CompileDir> create() {
    auto trusted = trusted_temp_dir_for_code();
    if (!trusted.ok())
      return error(Code::unavailable, "no safe place for host compiles: {}",
                   trusted.status().message());
    const fs::path base = *trusted;
    // Directories of compiles killed midway are removed by the next process that compiles.
    static std::once_flag swept;
    std::call_once(swept, [&] {
      if (std::size_t n = remove_dead_process_temporaries(base.string(), kTempPrefix))
        log(LogLevel::info, "removed {} host compile directories of processes that died", n);
    });
    std::string pattern = (base / fmt::format("{}{}-XXXXXX", kTempPrefix, ::getpid())).string();
    if (::mkdtemp(pattern.data()) == nullptr)
      return error(Code::io_error, "cannot create a host compile directory from '{}': {}",
                   pattern, std::strerror(errno));
    return CompileDir(std::move(pattern));
  }
  CompileDir(CompileDir&& o) noexcept : path_(std::exchange(o.path_, {})) {}
  CompileDir& operator=(CompileDir&&) = delete;
  ~CompileDir() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
    if (ec)
      log(LogLevel::debug, "host compile directory '{}' not removed: {}", path_, ec.message());
  }
  const std::string& path() const { return path_; }

 private:
  explicit CompileDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// A scratch file for one compile: no fsync, unlike the store's writes, since nothing survives
// the compile.
Status write_scratch(const fs::path& path, std::string_view data) {
  MOEJIT_TRY(make_private_dirs(path.parent_path().string()));
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid())
    return error(Code::io_error, "cannot create '{}': {}", path.string(), std::strerror(errno));
  return write_all(fd.get(), data, path.string());
}

std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

// The program as an absolute path, found the way execvp would find it: a name with a '/' is
// taken from the current directory, any other is searched in PATH.
Result<std::string> resolve_program(const std::string& cxx) {
  auto not_found = [&](std::string_view why) {
    return error(Code::unavailable,
                 "host compiler '{}' (MOEJIT_HOST_CXX, default c++): {}; expected a C++20 "
                 "compiler in PATH",
                 cxx, why);
  };
  if (cxx.empty()) return not_found("the name is empty");
  auto executable = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (cxx.find('/') != std::string::npos) {
    std::error_code ec;
    fs::path absolute = fs::absolute(cxx, ec);
    if (ec) return not_found(ec.message());
    if (!executable(absolute)) return not_found("not an executable file");
    return absolute.lexically_normal().string();
  }
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t begin = 0; begin <= dirs.size();) {
    std::size_t end = std::min(dirs.find(':', begin), dirs.size());
    std::string_view dir = dirs.substr(begin, end - begin);
    std::error_code ec;
    // An empty PATH element is the current directory, as for execvp.
    fs::path candidate = fs::absolute(fs::path(dir.empty() ? "." : dir) / cxx, ec);
    if (!ec && executable(candidate)) return candidate.lexically_normal().string();
    begin = end + 1;
  }
  return not_found("not found in PATH");
}

// One probe of the compiler; its first output line, or an error naming the variable.
Result<std::string> probe(const HostCompilerOptions& options, const char* flag) {
  const std::string& cxx = options.cxx;
  auto out = run_captured({cxx, flag}, {}, {.timeout = options.timeout});
  if (!out.ok())
    return error(Code::unavailable,
                 "host compiler '{}' (MOEJIT_HOST_CXX, default c++): {}; expected a C++20 "
                 "compiler in PATH",
                 cxx, out.status().message());
  if (out->exit_code != 0 || first_line(out->output).empty())
    return error(Code::unavailable,
                 "host compiler '{}' (MOEJIT_HOST_CXX, default c++): '{} {}' exited with {} "
                 "and printed '{}'; expected a GCC- or Clang-compatible driver",
                 cxx, cxx, flag, out->exit_code, first_line(out->output));
  return first_line(out->output);
}

}  // namespace

Result<HostCompilerOptions> HostCompiler::options_from_environment() {
  HostCompilerOptions o;
  if (auto cxx = env_string("MOEJIT_HOST_CXX")) o.cxx = *cxx;
  constexpr std::uint64_t kDayMs = 86'400'000;
  MOEJIT_ASSIGN_OR_RETURN(std::uint64_t timeout_ms,
                          env_u64("MOEJIT_HOST_COMPILE_TIMEOUT_MS", o.timeout.count()));
  if (timeout_ms == 0 || timeout_ms > kDayMs)
    return error(Code::invalid_argument,
                 "MOEJIT_HOST_COMPILE_TIMEOUT_MS = {}: expected 1 to {} (a day)", timeout_ms,
                 kDayMs);
  o.timeout = std::chrono::milliseconds(timeout_ms);
  return o;
}

Result<std::unique_ptr<HostCompiler>> HostCompiler::create(HostCompilerOptions options) {
  if (options.timeout.count() <= 0)
    return error(Code::invalid_argument, "host compiler timeout = {} ms: expected at least 1",
                 options.timeout.count());
  MOEJIT_ASSIGN_OR_RETURN(options.cxx, resolve_program(options.cxx));
  MOEJIT_ASSIGN_OR_RETURN(std::string version, probe(options, "--version"));
  MOEJIT_ASSIGN_OR_RETURN(std::string machine, probe(options, "-dumpmachine"));
  std::string identity = fmt::format("{}; {}", version, machine);
  return std::unique_ptr<HostCompiler>(new HostCompiler(std::move(options), std::move(identity)));
}

const std::vector<std::string>& HostCompiler::flags() {
  // -ffp-contract=off and -fno-fast-math: the host twins follow the PTX ISA's rounding, which
  // a fused multiply-add the source did not ask for would change. -fvisibility=hidden: see
  // codegen's host entry. Under ASan the kernels are instrumented too, so that their
  // out-of-bounds accesses to the caller's buffers are reported, and compile at -O1, as
  // AddressSanitizer's documentation suggests: the sanitizer build is the test build, whose
  // kernels are checked, not timed, and at -O2 the suite's host GEMM tests ran 15-35% longer
  // (compiling more than running).
  static const std::vector<std::string> kFlags = [] {
#if MOEJIT_SANITIZE_ADDRESS
    const char* optimization = "-O1";
#else
    const char* optimization = "-O2";
#endif
    std::vector<std::string> f = {"-std=c++20", optimization, "-fPIC", "-shared", "-ffp-contract=off",
                                  "-fno-fast-math", "-fvisibility=hidden",
                                  std::string("-I") + kTemplateDir};
#if MOEJIT_SANITIZE_ADDRESS
    f.push_back("-fsanitize=address");
    f.push_back("-fno-omit-frame-pointer");
#endif
    return f;
  }();
  return kFlags;
}

std::string HostCompiler::key_flags(const KernelSpec&) const {
  std::string joined;
  for (const auto& f : flags()) {
    if (!joined.empty()) joined += ' ';
    joined += f;
  }
  return joined;
}

Result<CompiledKernel> HostCompiler::compile(const codegen::GeneratedKernel& kernel,
                                             const codegen::TemplateSet& templates,
                                             const KernelSpec&) const {
  auto start = std::chrono::steady_clock::now();
  MOEJIT_ASSIGN_OR_RETURN(CompileDir dir, CompileDir::create());
  const fs::path root(dir.path());
  for (const auto& header : kernel.headers) {
    const std::string* text = templates.find(header);
    if (text == nullptr)
      return error(Code::internal, "template '{}' of {} vanished from its set", header,
                   kernel.source_name);
    MOEJIT_TRY(write_scratch(root / kTemplateDir / header, *text));
  }
  MOEJIT_TRY(write_scratch(root / kernel.source_name, kernel.source));

  std::vector<std::string> argv = {options_.cxx};
  argv.insert(argv.end(), flags().begin(), flags().end());
  // The generated unit is named *.cu for NVRTC's diagnostics; it is C++ for this compiler.
  argv.insert(argv.end(), {"-x", "c++", kernel.source_name, "-o", kOutputName});
  auto ran = run_captured(argv, dir.path(), {.timeout = options_.timeout});
  if (!ran.ok())
    return error(Code::unavailable,
                 "host compiler '{}' (MOEJIT_HOST_CXX) for {} (MOEJIT_HOST_COMPILE_TIMEOUT_MS = "
                 "{}): {}",
                 options_.cxx, kernel.source_name, options_.timeout.count(),
                 ran.status().message());

  const bool died = compiler_died(*ran);
  CompiledKernel out;
  out.log = std::move(ran->output);
  if (died)
    return error(Code::unavailable,
                 "host compiler '{}' (MOEJIT_HOST_CXX) died compiling {} ({}; killed for memory?); the next "
                 "call compiles it again:\n{}",
                 options_.cxx, kernel.source_name,
                 ran->exit_code < 0 ? fmt::format("signal {}", -ran->exit_code) : "a program it ran was killed",
                 out.log);
  if (toolchain_incomplete(ran->exit_code, out.log))
    return error(Code::unavailable,
                 "host compiler '{}' (MOEJIT_HOST_CXX) could not run a program of its toolchain compiling {} "
                 "(is part of it not installed?); no kernel compiles until it is:\n{}",
                 options_.cxx, kernel.source_name, out.log);
  if (ran->exit_code != 0) {
    auto dumped = dump_sources(kernel, templates);
    return error(Code::compile_error,
                 "host compiler '{}' failed to compile {} (exit status {}):\n{}\nsource: {}",
                 options_.cxx, kernel.source_name, ran->exit_code, out.log,
                 dumped.ok() ? *dumped : "not dumped: " + dumped.status().message());
  }
  if (dump_every_compile()) {
    if (auto dumped = dump_sources(kernel, templates); !dumped.ok())
      log(LogLevel::warn, "MOEJIT_DUMP_DIR: {}", dumped.status().message());
  }
  MOEJIT_ASSIGN_OR_RETURN(out.binary, read_file((root / kOutputName).string()));
  out.lowered_name = kEntrySymbol;
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace moejit
