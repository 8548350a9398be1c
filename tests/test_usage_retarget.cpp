// `moejit warmup --from-usage FILE --arch X` re-targets what a run recorded: a store warmed from a
// run on one GPU must hold what a GPU of architecture X picks for the same calls, or a frozen run
// there misses. The tile, stages and split of a grouped GEMM depend on the target's shared memory
// and SM count, so re-targeting asks X's heuristic again with the call the manifest recorded.

#include <doctest/doctest.h>

#include <algorithm>
#include <tuple>
#include <unordered_set>
#include <utility>

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

// What a context on `arch` with `sms` multiprocessors records for one fused call: the layer's
// call, the spec of each launch, and for the GEMMs the call (the fused op's GEMMs are indexed over
// T x topk routed pairs; the down projection requests its weights before the gate/up output is
// ready). The C ABI test "the usage manifest lists exactly the kernels a run used" checks these
// fields on a real run.
std::vector<dispatch::UsageRecord> recorded(const dispatch::FusedMoeRequest& r, Arch arch, std::uint32_t sms) {
  auto s = dispatch::fused_moe_specs(r, arch, Backend::device, sms);
  REQUIRE_MESSAGE(s.ok(), s.status().message());
  const auto pairs = static_cast<std::uint32_t>(r.tokens) * r.topk;
  return {{KernelSpec{}, std::nullopt, dispatch::layer_call(r, arch, Backend::device)},
          {s->align, std::nullopt, std::nullopt},
          {s->up, dispatch::GemmCall{pairs, 0, r.topk, r.global_experts, 0, 1}, std::nullopt},
          {s->down, dispatch::GemmCall{pairs, 0, r.topk, r.global_experts, 1, 1}, std::nullopt},
          {s->reduce, std::nullopt, std::nullopt}};
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
      if (rec.layer) continue;
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
  const dispatch::UsageRecord& up = records[2];
  const std::string old_line = spec_to_json(up.spec);
  write_text(dir / "usage.jsonl", text + old_line + "\n");
  auto back = dispatch::read_usage_manifest(dir / "usage.jsonl");
  REQUIRE_MESSAGE(back.ok(), back.status().message());
  REQUIRE(back->size() == 6);
  for (std::size_t i = 0; i < records.size(); ++i) CHECK((*back)[i] == records[i]);
  CHECK((*back)[5].spec == up.spec);
  CHECK_FALSE((*back)[5].gemm.has_value());
  auto old = dispatch::retarget_usage({(*back)[5]}, Arch::sm_121a, std::nullopt);
  REQUIRE(old.ok());
  CHECK(old->gemms_without_call == 1);
  CHECK(old->specs.size() == 1);
  CHECK(old->specs[0].bn == up.spec.bn);  // kept as recorded, renamed
  // An older manifest's fused layer (its kernels, no layer record) keeps its recorded rows, and
  // says so.
  std::vector<dispatch::UsageRecord> kernels_only(records.begin() + 1, records.end());
  for (dispatch::UsageRecord& r : kernels_only)
    if (r.gemm) r.gemm->fused_layer = 0;
  auto older = dispatch::retarget_usage(kernels_only, Arch::sm_121a, std::nullopt);
  REQUIRE(older.ok());
  CHECK(older->kernels_without_layer == 1);  // the align; its GEMMs were not marked then
  for (const KernelSpec& k : older->specs)
    if (k.op == Op::grouped_gemm || k.op == Op::moe_align) CHECK(k.bm == up.spec.bm);

  // A layer whose shapes no run could have (the record was edited): an error naming the record
  // and the argument.
  dispatch::UsageRecord edited = records[0];
  edited.layer->topk = 0;
  auto refused = dispatch::retarget_usage({edited}, Arch::sm_121a, std::nullopt);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("re-targeted to sm_121a") != std::string::npos);
  CHECK(refused.status().message().find("argument 'topk' = 0") != std::string::npos);
  // Every field a manifest can hold, however wrong for a layer, is refused naming the record
  // (the weights' shapes and formats as packing checks them, the rest as a call's) or, where it
  // says nothing about the kernels (the recording target, the largest batch), planned.
  struct Edit {
    const char* what;
    void (*edit)(dispatch::LayerCall&);
    const char* refusal;  // nullptr: planned
  };
  const Edit edits[] = {
      {"hidden 0", [](dispatch::LayerCall& c) { c.hidden = 0; }, "argument 'w13.k' = 0"},
      {"hidden 2^32-1", [](dispatch::LayerCall& c) { c.hidden = 4294967295u; }, "argument 'w13.k' = 4294967295"},
      {"intermediate 0", [](dispatch::LayerCall& c) { c.intermediate = 0; }, "argument 'w13.n' = 0"},
      {"intermediate 2^32-1", [](dispatch::LayerCall& c) { c.intermediate = 4294967295u; },
       "argument 'w13.n' = 2 x intermediate = 8589934590"},
      {"experts 0", [](dispatch::LayerCall& c) { c.experts = 0; }, "argument 'w13.experts' = 0"},
      {"experts 2^32-1", [](dispatch::LayerCall& c) { c.experts = c.global_experts = 4294967295u; },
       "argument 'w13.experts' = 4294967295"},
      {"global experts below local", [](dispatch::LayerCall& c) { c.global_experts = 1; }, "global_experts"},
      {"topk 65", [](dispatch::LayerCall& c) { c.topk = 65; }, "argument 'topk' = 65"},
      {"group 0", [](dispatch::LayerCall& c) { c.w13_group_size = 0; }, "argument 'w13.group_size' = 0"},
      {"group 7", [](dispatch::LayerCall& c) { c.w2_group_size = 7; }, "argument 'w2.group_size' = 7"},
      {"no weights", [](dispatch::LayerCall& c) { c.w13_weight = WeightFormat::none; }, "argument 'w13.format'"},
      {"int4 w2 with e8m0 scales", [](dispatch::LayerCall& c) { c.w2_weight = WeightFormat::int4_sym; },
       "argument 'w2.scale_dtype' = e8m0"},
      {"scale none", [](dispatch::LayerCall& c) { c.w13_scale = DType::none; }, "argument 'w13.scale_dtype'"},
      {"w13 packed for e4m3, w2 for bf16", [](dispatch::LayerCall& c) { c.w13_packed_for = DType::e4m3; }, "'w2'"},
      {"act e2m1 on bf16 packing", [](dispatch::LayerCall& c) { c.act = DType::e2m1; }, "argument 'act_dtype'"},
      {"act none", [](dispatch::LayerCall& c) { c.act = DType::none; }, "argument 'act_dtype'"},
      {"act_scale block128 on bf16", [](dispatch::LayerCall& c) { c.act_scale = ActScale::block128; }, "act_scale"},
      {"out e8m0", [](dispatch::LayerCall& c) { c.out = DType::e8m0; }, "argument 'out_dtype' = e8m0"},
      {"activation topk_weight", [](dispatch::LayerCall& c) { c.activation = Epilogue::topk_weight; }, "topk_weight"},
      {"arch none", [](dispatch::LayerCall& c) { c.arch = Arch::none; }, nullptr},
      {"the largest T", [](dispatch::LayerCall& c) { c.tokens_from = c.tokens_to = 1048576u; }, nullptr},
  };
  for (const Edit& e : edits) {
    INFO(std::string(e.what));
    dispatch::UsageRecord r = records[0];
    e.edit(*r.layer);
    auto moved = dispatch::retarget_usage({r}, Arch::sm_100a, std::nullopt);
    if (e.refusal != nullptr) {
      REQUIRE_FALSE(moved.ok());
      CHECK_MESSAGE(moved.status().message().find("re-targeted to sm_100a") != std::string::npos, moved.status().message());
      CHECK_MESSAGE(moved.status().message().find(e.refusal) != std::string::npos, moved.status().message());
      continue;
    }
    REQUIRE_MESSAGE(moved.ok(), moved.status().message());
    CHECK(moved->specs.size() == 4);  // align, gate/up, down, reduce
    for (const KernelSpec& k : moved->specs) CHECK(k.arch == Arch::sm_100a);
  }

  const std::string spec = spec_to_json(up.spec), align = spec_to_json(records[1].spec);
  const std::string layer = dispatch::usage_record_json(records[0]);
  auto layer_with = [&](const std::string& field, const std::string& value) {
    const std::string key = "\"" + field + "\":";
    const std::size_t at = layer.find(key) + key.size();
    return layer.substr(0, at) + value + layer.substr(layer.find_first_of(",}", at));
  };
  const std::pair<std::string, std::vector<std::string>> bad[] = {
      {R"({"spec":)" + spec + R"(,"gemm_call":{"m":4,"tokens":1}})", {"line 1", "unknown field 'tokens'"}},
      {R"({"spec":)" + spec + R"(,"gemm_call":{"m":2147483648}})", {"gemm_call field 'm' = 2147483648", "[0, 2147483647]"}},
      {R"({"spec":)" + spec + R"(,"gemm_call":{"weights_before_dependency":2}})", {"'weights_before_dependency' = 2"}},
      {R"({"spec":)" + spec + R"(,"gemm_call":[1]})", {"'gemm_call' = [1]: expected an object"}},
      {R"({"spec":)" + align + R"(,"gemm_call":{"m":4}})", {"'gemm_call' with a moe_align spec"}},
      {R"({"spec":)" + spec + R"(,"why":{}})", {"unknown field 'why'"}},
      {R"({"spec":{"op":"gemm"}})", {"spec field 'op'"}},
      {layer_with("topk", "-1"), {"fused_moe field 'topk' = -1", "unsigned integer"}},
      {layer_with("w13_weight", "\"fp8\""), {"fused_moe field 'w13_weight' = \"fp8\"", "mxfp4"}},
      {layer_with("tokens_from", "300"), {"'tokens_from' = 300, 'tokens_to' = 5"}},
      {layer_with("tokens_to", "1048577"), {"fused_moe field 'tokens_to' = 1048577"}},
      {R"({"fused_moe":{"topk":8}})", {"missing field 'arch'"}},
      {R"({"fused_moe":{"layers":1}})", {"unknown field 'layers'"}},
      {R"({"fused_moe":[]})", {"'fused_moe' = []: expected an object"}},
      {layer.substr(0, layer.size() - 1) + R"(,"spec":{}})", {"'fused_moe' record with other fields"}},
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
    for (const dispatch::UsageRecord& rec : manifest)
      if (!rec.layer) want.insert(rec.spec);
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

TEST_CASE("prefill tiles and layers: a manifest line per GEMM and per power of two, whatever the batch size") {
  // A tile of more than 32 rows never splits K and has one candidate per target, so every call
  // that picks it picks the same kernel anywhere: its first call stands for the rest. So does a
  // 32-row tile the fused layer picks below the rows an expert gets (no split, one candidate).
  // A prefill server sees a new M with nearly every batch; its manifest must not grow with each.
  // The layer's own record stands for every batch size from a power of two (excluded) to the next.
  constexpr std::int32_t kPrefill[] = {2048, 3000, 4096, 6000, 8192};
  TempDir dir;
  const std::string path = dir / "usage.jsonl";
  std::size_t prefill_calls = 0, decode_calls = 0;
  SpecSet prefill_specs;
  std::unordered_set<dispatch::UsageRecord, dispatch::UsageRecordHash> decode_records;
  std::vector<dispatch::FusedMoeRequest> prefill_requests;
  {
    dispatch::SpecObserver observer(path, false);
    for (const LayerShape& m : kShapes)
      for (std::int32_t t : {1, 2, 3, 2048, 3000, 4096, 6000, 8192}) {
        const dispatch::FusedMoeRequest request = layer_request(m, t);
        for (const dispatch::UsageRecord& rec : recorded(request, Arch::sm_90a, 132)) {
          if (rec.layer) {
            observer.used_layer(*rec.layer);
            continue;
          }
          observer.used(rec.spec, dispatch::Decision{"fused_moe", t, 0, rec.gemm});
          if (!rec.gemm) continue;
          if (dispatch::stand_in_call(rec.spec, rec.gemm)) {
            ++prefill_calls;
            prefill_specs.insert(rec.spec);
            if (rec.spec.bm <= dispatch::kMaxSplitRows) CHECK(rec.spec.split_k == 1);
          } else {
            ++decode_calls;
            decode_records.insert(rec);
          }
        }
        if (t >= kPrefill[0]) prefill_requests.push_back(request);
      }
  }
  // Every batch size here picks a tile that does not depend on the call, and several share one:
  // the case is not vacuous.
  REQUIRE(prefill_calls == std::size(kShapes) * std::size(kPrefill) * 2);
  REQUIRE(prefill_specs.size() < prefill_calls);
  auto written = dispatch::read_usage_manifest(path);
  REQUIRE_MESSAGE(written.ok(), written.status().message());
  std::size_t prefill_lines = 0, decode_lines = 0, layer_lines = 0;
  for (const dispatch::UsageRecord& rec : *written) {
    if (rec.layer) {
      ++layer_lines;
      const std::uint32_t from = rec.layer->tokens_from, to = rec.layer->tokens_to;
      CHECK(((from == to && to <= 3) || (from == to / 2 + 1 && (to == 2048 || to == 4096 || to == 8192))));
    }
    if (rec.spec.op != Op::grouped_gemm) continue;
    REQUIRE(rec.gemm.has_value());
    if (dispatch::stand_in_call(rec.spec, rec.gemm)) ++prefill_lines;
    else ++decode_lines;
  }
  CHECK(prefill_lines == prefill_specs.size());
  CHECK(decode_lines == decode_records.size());  // decode tiles: a line per call
  CHECK(decode_lines == decode_calls);
  // Per layer: T = 1, 2, 3 as they are, and (1024, 2048], (2048, 4096], (4096, 8192].
  CHECK(layer_lines == std::size(kShapes) * 6);

  // A restarted server at a batch size it has not seen adds nothing for a prefill tile or a
  // token range it has.
  const std::string before = slurp(path);
  {
    dispatch::SpecObserver observer(path, false);
    for (const LayerShape& m : kShapes)
      for (const dispatch::UsageRecord& rec : recorded(layer_request(m, 5000), Arch::sm_90a, 132)) {
        if (rec.layer) observer.used_layer(*rec.layer);
        else if (rec.gemm && prefill_specs.count(rec.spec) != 0)
          observer.used(rec.spec, dispatch::Decision{"fused_moe", 5000, 0, rec.gemm});
      }
  }
  CHECK(slurp(path) == before);
}

TEST_CASE("a prefill layer re-targeted: every kernel the target picks at each batch size its record stands for") {
  // One layer's record at T = 3000 stands for 2049 to 4096 tokens. Re-targeted, it gives what the
  // target picks over that range on each of its profiles, none of the tile rows the H200 picked
  // unless the target picks them too (those records are the H200's), and with the H200's own
  // kernels left out.
  const LayerShape& m = kShapes[2];  // Qwen3-30B-A3B, INT4
  const std::vector<dispatch::UsageRecord> manifest = recorded(layer_request(m, 3000), Arch::sm_90a, 132);
  REQUIRE(manifest[0].layer.has_value());
  REQUIRE(manifest[0].layer->tokens_from == 2049);
  REQUIRE(manifest[0].layer->tokens_to == 4096);
  for (Arch target : {Arch::sm_121a, Arch::sm_100a}) {
    CAPTURE(to_string(target));
    auto moved = dispatch::retarget_usage(manifest, target, std::nullopt);
    REQUIRE_MESSAGE(moved.ok(), moved.status().message());
    std::vector<dispatch::FusedMoeRequest> range;
    for (std::int32_t t = 2049; t <= 4096; ++t) range.push_back(layer_request(m, t));
    const SpecSet want = picked_on(range, target, sm_counts_for(target));
    CHECK(SpecSet(moved->specs.begin(), moved->specs.end()) == want);
    // The range reaches tile rows the recorded call alone does not (the case is not vacuous).
    CHECK(want.size() > picked_on({layer_request(m, 3000)}, target, sm_counts_for(target)).size());
  }
}
