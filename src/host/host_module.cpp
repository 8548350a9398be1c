#include "host/host_module.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "host/runtime_table.hpp"
#include "support/fs.hpp"
#include "support/log.hpp"

namespace moejit::host {
namespace {

struct Hash128Hasher {
  std::size_t operator()(const Hash128& h) const noexcept { return h.low ^ (h.high * 31); }
};

struct Loaded {
  HostModule module;
  void* handle = nullptr;
  // A memfd stays open for the process: glibc recognizes an already-loaded object by its path,
  // and a reused descriptor number would make "/proc/self/fd/N" name a loaded older kernel.
  UniqueFd memfd;
  // Why a loaded object was refused. It stays loaded (see below) and in the table, so that its
  // descriptor is never reused and a second load of the same bytes gives the same error.
  Status rejected;
};

std::string dlerror_text() {
  const char* e = ::dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

// dlopen of the bytes from an anonymous memory file; a null handle with the reason otherwise.
void* open_from_memfd(const std::string& binary, const std::string& name, UniqueFd& keep,
                      std::string& why) {
  UniqueFd fd(static_cast<int>(::memfd_create(name.c_str(), MFD_CLOEXEC)));
  if (!fd.valid()) {
    why = fmt::format("memfd_create: {}", std::strerror(errno));
    return nullptr;
  }
  if (Status s = write_all(fd.get(), binary, name); !s.ok()) {
    why = s.message();
    return nullptr;
  }
  std::string path = fmt::format("/proc/self/fd/{}", fd.get());
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    why = fmt::format("dlopen of {}: {}", path, dlerror_text());
    return nullptr;
  }
  keep = std::move(fd);
  return handle;
}

// dlopen of the bytes from a private temporary file, unlinked at once; for systems where a
// memfd cannot be loaded (no /proc, memfd_noexec).
void* open_from_temp_file(const std::string& binary, std::string& why) {
  auto trusted = trusted_temp_dir_for_code();  // dlopen goes by the path
  if (!trusted.ok()) {
    why = trusted.status().message();
    return nullptr;
  }
  const std::filesystem::path dir = *trusted;
  // The host compiler's prefix and pid, so that its sweep removes this file if we die here.
  std::string path = (dir / fmt::format("moejit-host-{}-kernel-XXXXXX.so", ::getpid())).string();
  UniqueFd fd(::mkostemps(path.data(), 3, O_CLOEXEC));
  if (!fd.valid()) {
    why = fmt::format("mkostemps in {}: {}", dir.string(), std::strerror(errno));
    return nullptr;
  }
  Status written = write_all(fd.get(), binary, path);
  void* handle = written.ok() ? ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (!written.ok()) why = written.message();
  else if (handle == nullptr) why = fmt::format("dlopen of {}: {}", path, dlerror_text());
  ::unlink(path.c_str());
  return handle;
}

template <typename T>
T* symbol(void* handle, const char* name) {
  return reinterpret_cast<T*>(::dlsym(handle, name));
}

}  // namespace

Result<const HostModule*> load_host_module(const ResolvedKernel& kernel) {
  static std::mutex mutex;
  static auto* modules = new std::unordered_map<Hash128, std::unique_ptr<Loaded>, Hash128Hasher>();

  const Hash128 id = xxh3_128(kernel.binary);
  std::lock_guard lock(mutex);
  if (auto it = modules->find(id); it != modules->end()) {
    if (!it->second->rejected.ok()) return it->second->rejected;
    return &it->second->module;
  }

  auto loaded = std::make_unique<Loaded>();
  const std::string name = fmt::format("moejit-kernel-{}", kernel.key.hex());
  std::string memfd_why, file_why;
  loaded->handle = open_from_memfd(kernel.binary, name, loaded->memfd, memfd_why);
  if (loaded->handle == nullptr) {
    log(LogLevel::debug, "host kernel {} not loaded from memory ({}); trying a temporary file",
        kernel.key.hex(), memfd_why);
    loaded->handle = open_from_temp_file(kernel.binary, file_why);
  }
  if (loaded->handle == nullptr)
    return error(Code::unavailable, "cannot load host kernel {} ({} bytes): {}; then {}",
                 kernel.key.hex(), kernel.binary.size(), memfd_why, file_why);

  auto* entry = symbol<void(const void*)>(loaded->handle, kernel.meta.kernel_name.c_str());
  auto* runtime = symbol<const Runtime*>(loaded->handle, "moejit_host_runtime");
  auto* params_bytes = symbol<const unsigned long long>(loaded->handle, "moejit_host_params_bytes");
  auto* abi = symbol<const unsigned>(loaded->handle, "moejit_host_abi_version");
  // The handle is not closed on these errors: the object's constructors have run, and no
  // handle of a kernel is ever closed, so that none of its code can be unmapped under a caller.
  auto reject = [&](Status why) -> Result<const HostModule*> {
    loaded->rejected = why;
    modules->emplace(id, std::move(loaded));
    return why;
  };
  if (entry == nullptr || runtime == nullptr || params_bytes == nullptr || abi == nullptr)
    return reject(error(
        Code::corrupt,
        "host kernel {} lacks {}: expected the symbols moejit's host codegen defines "
        "({}, moejit_host_runtime, moejit_host_params_bytes, moejit_host_abi_version)",
        kernel.key.hex(),
        entry == nullptr          ? kernel.meta.kernel_name
        : runtime == nullptr      ? "moejit_host_runtime"
        : params_bytes == nullptr ? "moejit_host_params_bytes"
                                  : "moejit_host_abi_version",
        kernel.meta.kernel_name));
  if (*abi != kRuntimeAbiVersion)
    return reject(error(Code::unsupported,
                        "host kernel {} was built for host runtime ABI {}; this moejit runs ABI "
                        "{}: expected a kernel compiled from this build's templates",
                        kernel.key.hex(), *abi, kRuntimeAbiVersion));
  *runtime = &runtime_table();
  loaded->module.entry = entry;
  loaded->module.params_bytes = *params_bytes;
  const HostModule* module = &loaded->module;
  modules->emplace(id, std::move(loaded));
  return module;
}

}  // namespace moejit::host
