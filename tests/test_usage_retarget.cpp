// `moejit warmup --from-usage FILE --arch X` re-targets what a run recorded: a store warmed from a
// run on one GPU must hold what a GPU of architecture X picks for the same calls, or a frozen run
// there misses. The tile, stages and split of a grouped GEMM depend on the target's shared memory
// and SM count, so re-targeting asks X's heuristic again with the call the manifest recorded.

#include <doctest/doctest.h>

#include <algorithm>
#include <unordered_set>

#include "dispatch/fused_moe_op.hpp"
#include "dispatch/usage_retarget.hpp"
#include "quant/pack.hpp"
#include "spec/device_profiles.hpp"
#include "spec/spec_fields.hpp"
#include "spec/spec_json.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

using SpecSet = std::unordered_set<KernelSpec, KernelSpecHash>;

struct LayerShape {
  const char* name;
  std::uint32_t hidden, intermediate, experts, topk;
  WeightFormat format;
};
// DeepSeek-V3, gpt-oss-120b, Qwen3-30B-A3B and Ling-3.0-flash (bench/models/), MXFP4 and INT4.
constexpr LayerShape kShapes[] = {{"DeepSeek-V3", 7168, 2048, 256, 8, WeightFormat::mxfp4},
                                  {"gpt-oss-120b", 2880, 2880, 128, 4, WeightFormat::mxfp4},
                                  {"Qwen3-30B-A3B", 2048, 768, 128, 8, WeightFormat::int4_sym},
                                  {"Ling-3.0-flash", 2048, 512, 256, 8, WeightFormat::mxfp4}};
constexpr std::int32_t kTokens[] = {1, 2, 3, 4, 8, 16, 32, 64, 256};

dispatch::FusedMoeRequest layer_request(const LayerShape& m, std::int32_t tokens) {
  static const unsigned char dummy[256] = {};
  const bool mx = m.format == WeightFormat::mxfp4;
  const std::uint32_t group = mx ? 32 : 128;
  const DType scale = mx ? DType::e8m0 : DType::bf16;
  dispatch::FusedMoeRequest r;
  r.w13 = {m.format, group, scale, m.experts, 2 * m.intermediate, m.hidden, true, dummy, dummy, nullptr, nullptr};
  r.w2 = {m.format, group, scale, m.experts, m.hidden, m.intermediate, false, dummy, dummy, nullptr, nullptr};
  r.tokens = tokens;
  r.topk = m.topk;
  r.global_experts = m.experts;
  return r;
}

// What a context on `arch` with `sms` multiprocessors records for one fused call: the spec of each
// launch, and for the GEMMs the call (the fused op's GEMMs are indexed over T x topk routed pairs;
// the down projection requests its weights before the gate/up output is ready). The C ABI test
// "the usage manifest lists exactly the kernels a run used" checks these fields on a real run.
std::vector<dispatch::UsageRecord> recorded(const dispatch::FusedMoeRequest& r, Arch arch, std::uint32_t sms) {
  auto s = dispatch::fused_moe_specs(r, arch, Backend::device, sms);
  REQUIRE_MESSAGE(s.ok(), s.status().message());
  const auto pairs = static_cast<std::uint32_t>(r.tokens) * r.topk;
  return {{s->align, std::nullopt},
          {s->up, dispatch::GemmCall{pairs, 0, r.topk, r.global_experts, 0}},
          {s->down, dispatch::GemmCall{pairs, 0, r.topk, r.global_experts, 1}},
          {s->reduce, std::nullopt}};
}

// Every kernel the fused layer picks for these calls on devices of `arch` with `sm_counts` SMs.
SpecSet picked_on(const std::vector<dispatch::FusedMoeRequest>& calls, Arch arch,
                  const std::vector<std::uint32_t>& sm_counts) {
  SpecSet out;
  for (std::uint32_t sms : sm_counts)
    for (const dispatch::FusedMoeRequest& r : calls) {
      auto s = dispatch::fused_moe_specs(r, arch, Backend::device, sms);
      REQUIRE_MESSAGE(s.ok(), s.status().message());
      for (const KernelSpec& spec : {s->align, s->up, s->down, s->reduce}) out.insert(spec);
    }
  return out;
}

// A run of a layer's fused calls at every kTokens on an H200, and the manifest it writes.
struct RecordedRun {
  std::vector<dispatch::FusedMoeRequest> calls;
  std::vector<dispatch::UsageRecord> manifest;
};
RecordedRun recorded_on_h200(const LayerShape& m) {
  RecordedRun run;
  for (std::int32_t t : kTokens) {
    run.calls.push_back(layer_request(m, t));
    for (const auto& rec : recorded(run.calls.back(), Arch::sm_90a, 132)) run.manifest.push_back(rec);
  }
  return run;
}

}  // namespace

TEST_CASE("a manifest recorded on an H200 re-targeted to GB10, B200 or A100 holds what their heuristics pick") {
  int missed_by_renaming = 0;  // GEMMs the old re-targeting (the arch field alone) got wrong
  for (const LayerShape& m : kShapes) {
    CAPTURE(m.name);
    const auto [calls, manifest] = recorded_on_h200(m);
    for (Arch target : {Arch::sm_121a, Arch::sm_100a, Arch::sm_80}) {
      CAPTURE(to_string(target));
      auto moved = dispatch::retarget_usage(manifest, target, std::nullopt);
      REQUIRE_MESSAGE(moved.ok(), moved.status().message());
      CHECK(moved->gemms_without_call == 0);
      const SpecSet want = picked_on(calls, target, sm_counts_for(target));
      const SpecSet got(moved->specs.begin(), moved->specs.end());
      CHECK(got.size() == moved->specs.size());  // no repeats
      CHECK(got == want);
      for (const dispatch::UsageRecord& rec : manifest) {
        KernelSpec renamed = rec.spec;
        renamed.arch = target;
        if (rec.spec.op == Op::grouped_gemm && want.count(renamed) == 0) ++missed_by_renaming;
      }
    }
    // On the recorded target the records are what the run used, unchanged.
    auto same = dispatch::retarget_usage(manifest, Arch::sm_90a, Backend::host);
    REQUIRE(same.ok());
    for (const dispatch::UsageRecord& rec : manifest) {
      KernelSpec on_host = rec.spec;
      on_host.backend = Backend::host;
      CHECK(std::count(same->specs.begin(), same->specs.end(), on_host) == 1);
    }
  }
  // Without the recorded calls, re-targeting could only rename the target, and a frozen run on
  // these GPUs would miss this many of the GEMMs.
  CHECK(missed_by_renaming > 0);
  MESSAGE("GEMM records whose renamed spec another target would not pick: " << missed_by_renaming);
}

TEST_CASE("a recorded grouped GEMM call asks the same heuristic the same question") {
  for (const LayerShape& m : kShapes)
    for (std::int32_t t : kTokens)
      for (auto [arch, sms] : {std::pair{Arch::sm_90a, 114u}, std::pair{Arch::sm_121a, 48u}}) {
        CAPTURE(m.name);
        CAPTURE(t);
        for (const dispatch::UsageRecord& rec : recorded(layer_request(m, t), arch, sms)) {
          if (!rec.gemm) continue;
          auto again = dispatch::grouped_gemm_spec_for(rec.spec, *rec.gemm, arch, Backend::device, sms);
          REQUIRE_MESSAGE(again.ok(), again.status().message());
          CHECK(*again == rec.spec);
        }
      }
}

TEST_CASE("usage records: GEMM calls survive the manifest, and bad ones are errors naming the field") {
  TempDir dir;
  const auto records = recorded(layer_request(kShapes[3], 5), Arch::sm_90a, 132);
  std::string text;
  for (const dispatch::UsageRecord& r : records) text += dispatch::usage_record_json(r) + "\n";
  // An older moejit's line (the spec alone) reads as a record without a call.
  const std::string old_line = spec_to_json(records[1].spec);
  write_text(dir / "usage.jsonl", text + old_line + "\n");
  auto back = dispatch::read_usage_manifest(dir / "usage.jsonl");
  REQUIRE_MESSAGE(back.ok(), back.status().message());
  REQUIRE(back->size() == 5);
  for (std::size_t i = 0; i < records.size(); ++i) CHECK((*back)[i] == records[i]);
  CHECK((*back)[4].spec == records[1].spec);
  CHECK_FALSE((*back)[4].gemm.has_value());
  auto old = dispatch::retarget_usage({(*back)[4]}, Arch::sm_121a, std::nullopt);
  REQUIRE(old.ok());
  CHECK(old->gemms_without_call == 1);
  CHECK(old->specs.size() == 1);
  CHECK(old->specs[0].bn == records[1].spec.bn);  // kept as recorded, renamed

  const std::string spec = spec_to_json(records[1].spec), align = spec_to_json(records[0].spec);
  const std::pair<std::string, std::vector<std::string>> bad[] = {
      {R"({"spec":)" + spec + R"(,"gemm_call":{"m":4,"tokens":1}})", {"line 1", "unknown field 'tokens'"}},
      {R"({"spec":)" + spec + R"(,"gemm_call":{"m":2147483648}})", {"gemm_call field 'm' = 2147483648", "[0, 2147483647]"}},
      {R"({"spec":)" + spec + R"(,"gemm_call":{"weights_before_dependency":2}})", {"'weights_before_dependency' = 2"}},
      {R"({"spec":)" + spec + R"(,"gemm_call":[1]})", {"'gemm_call' = [1]: expected an object"}},
      {R"({"spec":)" + align + R"(,"gemm_call":{"m":4}})", {"'gemm_call' with a moe_align spec"}},
      {R"({"spec":)" + spec + R"(,"why":{}})", {"unknown field 'why'"}},
      {R"({"spec":{"op":"gemm"}})", {"spec field 'op'"}},
  };
  for (const auto& [line, words] : bad) {
    CAPTURE(line);
    write_text(dir / "bad.jsonl", line + "\n");
    auto r = dispatch::read_usage_manifest(dir / "bad.jsonl");
    REQUIRE_FALSE(r.ok());
    for (const std::string& w : words) CHECK_MESSAGE(r.status().message().find(w) != std::string::npos, r.status().message());
  }
}

TEST_CASE("usage records planned for an SM count no profile has (--sms) as well as the target's profiles") {
  std::size_t slice_only = 0;  // kernels the 8-SM slice picks that the 132-SM run did not
  for (const LayerShape& m : kShapes) {
    CAPTURE(m.name);
    const auto [calls, manifest] = recorded_on_h200(m);
    // Its own target: the records as made, and what an 8-SM slice picks.
    auto slice = dispatch::retarget_usage(manifest, Arch::sm_90a, std::nullopt, 8);
    REQUIRE_MESSAGE(slice.ok(), slice.status().message());
    SpecSet want;
    for (const dispatch::UsageRecord& rec : manifest) want.insert(rec.spec);
    const std::size_t as_recorded = want.size();
    want.merge(picked_on(calls, Arch::sm_90a, {8}));
    slice_only += want.size() - as_recorded;
    CHECK(SpecSet(slice->specs.begin(), slice->specs.end()) == want);
    // Another target: its profiles and the extra count.
    auto gb10 = dispatch::retarget_usage(manifest, Arch::sm_121a, std::nullopt, 20);
    REQUIRE(gb10.ok());
    std::vector<std::uint32_t> gb10_sms = sm_counts_for(Arch::sm_121a);
    gb10_sms.push_back(20);
    CHECK(SpecSet(gb10->specs.begin(), gb10->specs.end()) == picked_on(calls, Arch::sm_121a, gb10_sms));
  }
  CHECK(slice_only > 0);
}

TEST_CASE("prefill tiles: one manifest line per GEMM whatever the batch size, planned again exactly without a call") {
  // A tile of more than 32 rows never splits K and has one candidate per target, so every call
  // that picks it picks the same kernel anywhere: its first call stands for the rest. So does a
  // 32-row tile the fused layer picks below the rows an expert gets (no split, one candidate).
  // A prefill server sees a new M with nearly every batch; its manifest must not grow with each.
  constexpr std::int32_t kPrefill[] = {2048, 3000, 4096, 6000, 8192};
  TempDir dir;
  const std::string path = dir / "usage.jsonl";
  std::size_t prefill_calls = 0, decode_calls = 0;
  SpecSet prefill_specs;
  std::unordered_set<dispatch::UsageRecord, dispatch::UsageRecordHash> decode_records;
  std::vector<dispatch::FusedMoeRequest> prefill_requests;
  std::vector<dispatch::UsageRecord> stripped;  // the prefill GEMMs as an older moejit wrote them
  {
    dispatch::SpecObserver observer(path, false);
    for (const LayerShape& m : kShapes)
      for (std::int32_t t : {1, 2, 3, 2048, 3000, 4096, 6000, 8192}) {
        const dispatch::FusedMoeRequest request = layer_request(m, t);
        for (const dispatch::UsageRecord& rec : recorded(request, Arch::sm_90a, 132)) {
          observer.used(rec.spec, dispatch::Decision{"fused_moe", t, 0, rec.gemm});
          if (!rec.gemm) continue;
          if (dispatch::stand_in_call(rec.spec, rec.gemm)) {
            ++prefill_calls;
            prefill_specs.insert(rec.spec);
            // Only the tiles that never split stand in without their call.
            if (rec.spec.bm > dispatch::kMaxSplitRows) stripped.push_back({rec.spec, std::nullopt});
            else CHECK(rec.spec.split_k == 1);
          } else {
            ++decode_calls;
            decode_records.insert(rec);
          }
        }
        if (t >= kPrefill[0]) prefill_requests.push_back(request);
      }
  }
  // Every batch size here picks a tile that does not depend on the call, several share one, and
  // some are 32-row tiles: the case is not vacuous.
  REQUIRE(prefill_calls == std::size(kShapes) * std::size(kPrefill) * 2);
  REQUIRE(prefill_specs.size() < prefill_calls);
  REQUIRE(stripped.size() < prefill_calls);
  auto written = dispatch::read_usage_manifest(path);
  REQUIRE_MESSAGE(written.ok(), written.status().message());
  std::size_t prefill_lines = 0, decode_lines = 0;
  for (const dispatch::UsageRecord& rec : *written) {
    if (rec.spec.op != Op::grouped_gemm) continue;
    REQUIRE(rec.gemm.has_value());
    if (dispatch::stand_in_call(rec.spec, rec.gemm)) ++prefill_lines;
    else ++decode_lines;
  }
  CHECK(prefill_lines == prefill_specs.size());
  CHECK(decode_lines == decode_records.size());  // decode tiles: a line per call
  CHECK(decode_lines == decode_calls);

  // A restarted server at a batch size it has not seen adds nothing for a prefill tile it has.
  const std::string before = slurp(path);
  {
    dispatch::SpecObserver observer(path, false);
    for (const LayerShape& m : kShapes)
      for (const dispatch::UsageRecord& rec : recorded(layer_request(m, 5000), Arch::sm_90a, 132))
        if (rec.gemm && prefill_specs.count(rec.spec) != 0)
          observer.used(rec.spec, dispatch::Decision{"fused_moe", 5000, 0, rec.gemm});
  }
  CHECK(slurp(path) == before);

  // Re-targeted from the manifest, or from records without calls (an older moejit's lines), the
  // prefill GEMMs are exactly what each target picks, with no warning.
  for (Arch target : {Arch::sm_121a, Arch::sm_100a, Arch::sm_80}) {
    CAPTURE(to_string(target));
    SpecSet want_gemms;
    for (const KernelSpec& s : picked_on(prefill_requests, target, sm_counts_for(target)))
      if (s.op == Op::grouped_gemm) want_gemms.insert(s);
    // Without calls only the tiles of more than 32 rows can stand in.
    SpecSet want_tall;
    for (const KernelSpec& s : want_gemms)
      if (s.bm > dispatch::kMaxSplitRows) want_tall.insert(s);
    for (const auto& [records, want] : {std::pair{stripped, want_tall}, std::pair{*written, want_gemms}}) {
      std::vector<dispatch::UsageRecord> prefill;
      for (const dispatch::UsageRecord& rec : records)
        if (rec.spec.op == Op::grouped_gemm && dispatch::stand_in_call(rec.spec, rec.gemm)) prefill.push_back(rec);
      auto moved = dispatch::retarget_usage(prefill, target, std::nullopt);
      REQUIRE_MESSAGE(moved.ok(), moved.status().message());
      CHECK(moved->gemms_without_call == 0);
      CHECK(SpecSet(moved->specs.begin(), moved->specs.end()) == want);
    }
    CHECK(want_tall.size() < want_gemms.size());
  }
}
