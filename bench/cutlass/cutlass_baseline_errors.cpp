// cutlass_baseline_errors: the baselines' API on bad arguments, and on good ones without a GPU
// (run with CUDA_VISIBLE_DEVICES empty) or without the kernels: every call returns an error naming
// what is wrong, none crashes. The argument checks are the same with and without the kernels. Host only; exit status 0 when every expectation holds.

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench/cutlass/cutlass_baselines.hpp"

namespace {

namespace cb = moejit::bench::cutlass_baseline;

int failures = 0;

void expect_error(const char* what, const std::string& error, const std::string& contains) {
  const bool ok = !error.empty() && error.find(contains) != std::string::npos;
  std::printf("%s %s: %s\n", ok ? "ok  " : "FAIL", what, error.empty() ? "(no error)" : error.c_str());
  if (!ok) ++failures;
}

void expect_plan_error(const char* what, cb::PlanResult r, const std::string& contains) {
  if (r.plan) {
    std::printf("FAIL %s: a plan (%s)\n", what, r.plan->name().c_str());
    ++failures;
    return;
  }
  expect_error(what, r.error, contains);
}

// Device-looking pointers that are never dereferenced: every call below fails before using them.
void* fake(std::uintptr_t i) { return reinterpret_cast<void*>((std::uintptr_t(1) << 40) + i * 4096); }

cb::GroupedProblem valid(bool int4) {
  cb::GroupedProblem p;
  p.n = 256;
  p.k = 512;
  p.m = {1, 7, 33};
  for (std::uintptr_t g = 0; g < p.m.size(); ++g) {
    p.a.push_back(fake(4 * g));
    p.w.push_back(fake(4 * g + 1));
    p.d.push_back(fake(4 * g + 2));
    if (int4) p.scales.push_back(fake(4 * g + 3));
  }
  return p;
}

using Edit = std::function<void(cb::GroupedProblem&)>;

}  // namespace

int main() {
  std::printf("%s; available: %s\n", cb::build_info().c_str(), cb::available() ? "yes" : "no");
  if (cb::build_info().find("CUTLASS ") != 0) ++failures;

  struct Case {
    const char* what;
    Edit edit;
    const char* contains;
  };
  const std::vector<Case> grouped_cases = {
      {"no groups", [](cb::GroupedProblem& p) { p.m.clear(); }, "m is empty"},
      {"a size", [](cb::GroupedProblem& p) { p.a.pop_back(); }, "a has 2 entries"},
      {"d size", [](cb::GroupedProblem& p) { p.d.push_back(nullptr); }, "d has 4 entries"},
      {"m <= 0", [](cb::GroupedProblem& p) { p.m[1] = 0; }, "m[1] = 0"},
      {"n alignment", [](cb::GroupedProblem& p) { p.n = 100; }, "n = 100"},
      {"k alignment", [](cb::GroupedProblem& p) { p.k = 20; }, "k = 20"},
      {"null pointer", [](cb::GroupedProblem& p) { p.w[2] = nullptr; }, "w[2] is null"},
      {"misaligned pointer",
       [](cb::GroupedProblem& p) { p.a[1] = static_cast<const char*>(p.a[1]) + 2; }, "a[1] must be 16-byte aligned"},
  };
  for (const Case& c : grouped_cases) {
    cb::GroupedProblem p = valid(false);
    c.edit(p);
    expect_plan_error((std::string("bf16 grouped: ") + c.what).c_str(), cb::prepare_bf16_grouped(p), c.contains);
    cb::GroupedProblem q = valid(true);
    c.edit(q);
    expect_plan_error((std::string("int4 grouped: ") + c.what).c_str(), cb::prepare_int4_grouped(q, 128), c.contains);
    cb::GroupedProblem r = valid(true);
    c.edit(r);
    expect_plan_error((std::string("int4 fp8 grouped: ") + c.what).c_str(), cb::prepare_int4_fp8_grouped(r, 128),
                      c.contains);
  }
  {
    cb::GroupedProblem p = valid(false);
    p.scales.push_back(fake(100));
    expect_plan_error("bf16 grouped: scales given", cb::prepare_bf16_grouped(p), "scales has 1 entries");
    cb::GroupedProblem q = valid(true);
    q.scales.pop_back();
    expect_plan_error("int4 grouped: scales size", cb::prepare_int4_grouped(q, 128), "scales has 2 entries");
    q = valid(true);
    q.n = 24;
    expect_plan_error("int4 grouped: n not a multiple of 16", cb::prepare_int4_grouped(q, 128), "n = 24");
    q = valid(true);
    expect_plan_error("int4 grouped: group 96", cb::prepare_int4_grouped(q, 96), "group = 96");
    expect_plan_error("int4 grouped: group 0", cb::prepare_int4_grouped(q, 0), "group = 0");
    q.k = 384;
    expect_plan_error("int4 grouped: group not dividing k", cb::prepare_int4_grouped(q, 256), "group = 256");
    // The W4A8 kernel's K tile is 128 values and its reordering atom 32 columns.
    q = valid(true);
    expect_plan_error("int4 fp8 grouped: group 64", cb::prepare_int4_fp8_grouped(q, 64), "group = 64");
    q.k = 496;
    expect_plan_error("int4 fp8 grouped: k not a multiple of 32", cb::prepare_int4_fp8_grouped(q, 128), "k = 496");
    q = valid(true);
    q.scales.pop_back();
    expect_plan_error("int4 fp8 grouped: scales size", cb::prepare_int4_fp8_grouped(q, 128), "scales has 2 entries");
  }
  // Valid problems fail only for want of a GPU (CUDA_VISIBLE_DEVICES empty, or no driver), or,
  // in a build without the kernels (MOEJIT_CUTLASS_KERNELS=OFF), because they are not there.
  const bool configured_out = cb::build_info().find("MOEJIT_CUTLASS_KERNELS=OFF") != std::string::npos;
  const auto valid_error = [&](const std::string& fn) {
    return fn + ": " + (configured_out ? "the CUTLASS kernels are not in this build" : "");
  };
  expect_plan_error("bf16 grouped: valid, no GPU", cb::prepare_bf16_grouped(valid(false)),
                    valid_error("prepare_bf16_grouped"));
  expect_plan_error("int4 grouped: valid, no GPU", cb::prepare_int4_grouped(valid(true), 128),
                    valid_error("prepare_int4_grouped"));
  expect_plan_error("int4 fp8 grouped: valid, no GPU", cb::prepare_int4_fp8_grouped(valid(true), 128),
                    valid_error("prepare_int4_fp8_grouped"));
  {
    cb::GroupedProblem q = valid(true);
    q.m = {1, 2, 3};  // the 16-row tile
    expect_plan_error("int4 grouped (decode): valid, no GPU", cb::prepare_int4_grouped(q, 128),
                      valid_error("prepare_int4_grouped"));
    expect_plan_error("int4 fp8 grouped (decode): valid, no GPU", cb::prepare_int4_fp8_grouped(q, 128),
                      valid_error("prepare_int4_fp8_grouped"));
  }

  expect_plan_error("dense: m = 0", cb::prepare_bf16_dense(0, 64, 64, fake(0), fake(1), fake(2)), "m = 0");
  expect_plan_error("dense: n = 7", cb::prepare_bf16_dense(8, 7, 64, fake(0), fake(1), fake(2)), "n = 7");
  expect_plan_error("dense: null d", cb::prepare_bf16_dense(8, 64, 64, fake(0), fake(1), nullptr), "d is null");
  expect_plan_error("dense: valid, no GPU", cb::prepare_bf16_dense(256, 256, 256, fake(0), fake(1), fake(2)),
                    valid_error("prepare_bf16_dense"));

  // Scales: [n][k / group] in, [k / group][n] out.
  std::vector<std::uint16_t> scales(16 * 4), out;
  for (std::size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<std::uint16_t>(i);
  expect_error("scales: group not dividing k", cb::int4_scale_bytes(scales.data(), 16, 512, 100, out), "group = 100");
  expect_error("scales: n = 12", cb::int4_scale_bytes(scales.data(), 12, 512, 128, out), "n = 12");
  if (std::string e = cb::int4_scale_bytes(scales.data(), 16, 512, 128, out); !e.empty()) {
    std::printf("FAIL scales: %s\n", e.c_str());
    ++failures;
  } else {
    bool ok = out.size() == scales.size();
    for (int r = 0; ok && r < 16; ++r)
      for (int g = 0; g < 4; ++g) ok = ok && out[std::size_t(g) * 16 + std::size_t(r)] == scales[std::size_t(r) * 4 + std::size_t(g)];
    std::printf("%s scales: transposed to [k / group][n]\n", ok ? "ok  " : "FAIL");
    failures += ok ? 0 : 1;
  }

  std::printf("%s\n", failures == 0 ? "all expectations hold" : "FAILED");
  return failures == 0 ? 0 : 1;
}
