// Loading libcuda (runtime/cuda_driver) where there may be no GPU: a missing library, the
// toolkit's link stub (a real libcuda export table whose cuInit always fails), and stand-in
// libraries built here to prove that versioned entry points are bound by their ABI names.

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "host_test_support.hpp"
#include "runtime/cuda_driver.hpp"
#include "test_device_support.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

// The toolkit's stub libcuda.so, if this machine has one.
std::string toolkit_stub() {
  for (const char* p : {"/usr/local/cuda/lib64/stubs/libcuda.so", "/usr/local/cuda/lib/stubs/libcuda.so",
                        "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so"})
    if (std::filesystem::exists(p)) return p;
  return {};
}

// Builds a shared library exporting `symbols` (each a function returning CUDA_ERROR_NOT_SUPPORTED,
// cuInit returning `init_result`, cuGetErrorName/String answering) with the C++ compiler; empty
// with a MESSAGE when there is none.
std::string build_stand_in(const TempDir& dir, const std::string& name, const std::vector<std::string>& symbols,
                           int init_result) {
  std::string src = "#include <cstddef>\nextern \"C\" {\n";
  src += "int cuGetErrorName(int r, const char** s) { *s = r == 100 ? \"CUDA_ERROR_NO_DEVICE\" : "
         "\"CUDA_ERROR_OTHER\"; return 0; }\n";
  src += "int cuGetErrorString(int, const char** s) { *s = \"stand-in driver\"; return 0; }\n";
  src += "int cuInit(unsigned) { return " + std::to_string(init_result) + "; }\n";
  for (const auto& s : symbols)
    if (s != "cuGetErrorName" && s != "cuGetErrorString" && s != "cuInit") src += "int " + s + "() { return 801; }\n";
  src += "}\n";
  const std::string cpp = dir / (name + ".cpp");
  const std::string so = dir / (name + ".so");
  write_text(cpp, src);
  const char* cxx = std::getenv("MOEJIT_HOST_CXX");
  const std::string command = std::string(cxx ? cxx : "c++") + " -shared -fPIC -o '" + so + "' '" + cpp + "'";
  ProcessResult r = run_process({"/bin/sh", "-c", command});
  if (r.exit_code != 0) {
    toolchain_missing("no C++ compiler to build a stand-in libcuda (" + command + "): " + r.err);
    return {};
  }
  return so;
}

std::vector<std::string> all_symbol_names() {
  std::vector<std::string> names;
  for (const auto& s : cuda_symbols())
    for (std::string_view n : s.names) names.emplace_back(n);
  return names;
}

}  // namespace

TEST_SUITE("device") {

TEST_CASE("MOEJIT_CUDA_LIBRARY naming a missing file: unavailable, naming it") {
  ScopedEnv env("MOEJIT_CUDA_LIBRARY", "/nonexistent/moejit-test/libcuda.so.1");
  auto d = CudaDriver::load_from_environment();
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().code() == Code::unavailable);
  CHECK(contains(d.status().message(), "no CUDA driver"));
  CHECK(contains(d.status().message(), "/nonexistent/moejit-test/libcuda.so.1"));
  CHECK(contains(d.status().message(), "MOEJIT_CUDA_LIBRARY"));
  MESSAGE("message: " << d.status().message());

  // Without the variable the default names are tried; each is named in the error.
  auto named = CudaDriver::load({"libmoejit-no-such-cuda.so.1", "libmoejit-no-such-cuda.so"});
  REQUIRE_FALSE(named.ok());
  CHECK(contains(named.status().message(), "libmoejit-no-such-cuda.so.1"));
  CHECK(contains(named.status().message(), "libmoejit-no-such-cuda.so:"));
}

TEST_CASE("a launcher without a driver is unavailable, which the suites skip on") {
  ScopedEnv env("MOEJIT_CUDA_LIBRARY", "/nonexistent/moejit-test/libcuda.so.1");
  auto d = CudaDriver::load_from_environment();
  REQUIRE_FALSE(d.ok());
  CHECK(is_missing_gpu(d.status()));
}

TEST_CASE("the toolkit's stub libcuda binds every entry point and is reported as a stub") {
  const std::string stub = toolkit_stub();
  if (stub.empty()) {
    MESSAGE("skipped: no CUDA toolkit stub libcuda.so under /usr/local/cuda");
    return;
  }
  // The stub exports the same names as the driver: a missing binding would be reported before
  // cuInit is called, so reaching cuInit proves every required name exists in a real libcuda.
  auto d = CudaDriver::load({stub});
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().code() == Code::unavailable);
  CHECK(contains(d.status().message(), "cuInit"));
  CHECK(contains(d.status().message(), "CUDA_ERROR_STUB_LIBRARY"));
  CHECK(contains(d.status().message(), "link stub"));
  MESSAGE("message: " << d.status().message());
}

TEST_CASE("entry points are bound by their versioned ABI names") {
  TempDir dir;
  // Every name: binding succeeds and cuInit's failure is reported with the driver's own words.
  std::string so = build_stand_in(dir, "complete", all_symbol_names(), 100);
  if (so.empty()) return;
  auto d = CudaDriver::load({so});
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().code() == Code::unavailable);
  CHECK(contains(d.status().message(), "cuInit"));
  CHECK(contains(d.status().message(), "CUDA_ERROR_NO_DEVICE (stand-in driver)"));
  CHECK(contains(d.status().message(), so));

  // The legacy unversioned names alone do not satisfy the table: cuMemAlloc would take a
  // 32-bit size.
  std::vector<std::string> legacy;
  for (auto& n : all_symbol_names()) {
    if (n == "cuMemAlloc_v2") legacy.push_back("cuMemAlloc");
    else if (n == "cuMemcpyHtoDAsync_v2") legacy.push_back("cuMemcpyHtoDAsync");
    else legacy.push_back(n);
  }
  so = build_stand_in(dir, "legacy", legacy, 100);
  REQUIRE_FALSE(so.empty());
  auto l = CudaDriver::load({so});
  REQUIRE_FALSE(l.ok());
  CHECK(l.status().code() == Code::unavailable);
  CHECK(contains(l.status().message(), "lacks cuMemAlloc_v2, cuMemcpyHtoDAsync_v2"));

  // Optional entry points may be missing; cuEventElapsedTime falls back to the original name.
  std::vector<std::string> old_driver;
  for (auto& n : all_symbol_names())
    if (n != "cuLaunchKernelEx" && n != "cuFuncGetParamInfo" && n != "cuFuncLoad" && n != "cuEventElapsedTime_v2")
      old_driver.push_back(n);
  so = build_stand_in(dir, "old", old_driver, 100);
  REQUIRE_FALSE(so.empty());
  auto o = CudaDriver::load({so});
  REQUIRE_FALSE(o.ok());
  CHECK(contains(o.status().message(), "cuInit"));  // got as far as initializing
}

TEST_CASE("CUresult codes map to Status codes by what the caller can do about them") {
  CHECK(code_for_cuda_result(CUDA_SUCCESS) == Code::ok);
  CHECK(code_for_cuda_result(CUDA_ERROR_NO_DEVICE) == Code::unavailable);
  CHECK(code_for_cuda_result(CUDA_ERROR_STUB_LIBRARY) == Code::unavailable);
  CHECK(code_for_cuda_result(CUDA_ERROR_OUT_OF_MEMORY) == Code::unavailable);
  CHECK(code_for_cuda_result(CUDA_ERROR_NO_BINARY_FOR_GPU) == Code::unsupported);
  CHECK(code_for_cuda_result(CUDA_ERROR_INVALID_IMAGE) == Code::corrupt);
  CHECK(code_for_cuda_result(CUDA_ERROR_NOT_FOUND) == Code::not_found);
  CHECK(code_for_cuda_result(CUDA_ERROR_INVALID_VALUE) == Code::invalid_argument);
  CHECK(code_for_cuda_result(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) == Code::invalid_argument);
  CHECK(code_for_cuda_result(CUDA_ERROR_ILLEGAL_ADDRESS) == Code::internal);
}

TEST_CASE("the process-wide driver: a device here, or a skip saying what is missing") {
  // Not a test of the GPU: it documents in the log what this machine has.
  DeviceLauncher* l = device_launcher_or_skip(false);
  if (l == nullptr) return;
  MESSAGE("GPU: " << describe_device(*l) << ", libcuda at " << l->driver().path());
}

}  // TEST_SUITE
