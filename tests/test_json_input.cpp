// The JSON that users hand moejit (spec files, model configs, usage manifests) is read with bounded
// nesting, no repeated keys and type-checked fields: hostile input is an error naming the source
// and what was expected, never a crash.

#include <doctest/doctest.h>

#include <string>

#include "dispatch/hf_config.hpp"
#include "dispatch/spec_observer.hpp"
#include "spec/spec_json.hpp"
#include "support/json_input.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

// `levels` arrays, one inside the other, around `core`.
std::string nested_arrays(std::size_t levels, const std::string& core = "7") {
  return std::string(levels, '[') + core + std::string(levels, ']');
}

// `levels` objects {"a": {"a": ... core ...}}.
std::string nested_objects(std::size_t levels, const std::string& core = "7") {
  std::string text;
  for (std::size_t i = 0; i < levels; ++i) text += R"({"a":)";
  return text + core + std::string(levels, '}');
}

void check_message(const Status& s, std::initializer_list<std::string_view> parts) {
  CAPTURE(s.message());
  CHECK(s.code() == Code::invalid_argument);
  for (auto part : parts) {
    CAPTURE(part);
    CHECK(s.message().find(part) != std::string::npos);
  }
}

const char* kConfig = R"({"model_type": "qwen3_moe", "hidden_size": 2048, "moe_intermediate_size": 768,
  "num_experts": 128, "num_experts_per_tok": 8})";

}  // namespace

TEST_CASE("JSON input: nesting up to the bound is read, one level more is refused without recursion") {
  auto at_limit = parse_json_input(nested_arrays(kJsonMaxDepth), "test");
  REQUIRE(at_limit.ok());
  const nlohmann::json* inner = &*at_limit;
  for (std::size_t i = 0; i < kJsonMaxDepth; ++i) {
    REQUIRE(inner->is_array());
    REQUIRE(inner->size() == 1);
    inner = &inner->front();
  }
  CHECK(*inner == 7);
  check_message(parse_json_input(nested_arrays(kJsonMaxDepth + 1), "test").status(),
                {"test: ", "deeper than 64"});
  // 100,000 levels (the size that crashed the old readers): refused, whatever the container kind.
  check_message(parse_json_input(nested_arrays(100000), "deep.json").status(), {"deep.json: ", "deeper than 64"});
  check_message(parse_json_input(nested_objects(100000), "deep.json").status(), {"deep.json: ", "deeper than 64"});
  check_message(parse_json_input("[" + nested_objects(99999) + "]", "mixed").status(), {"mixed: ", "deeper than 64"});
}

TEST_CASE("JSON input: a key repeated in one object is refused, naming the key and where the object is") {
  check_message(parse_json_input(R"({"n": 256, "k": 512, "n": 128})", "spec").status(),
                {"spec: ", "duplicate key 'n'", "the top level", "expected each key once"});
  check_message(parse_json_input(R"({"text_config": {"list": [1, {"x": 1, "x": 2}]}})", "config.json").status(),
                {"duplicate key 'x'", "'/text_config/list/1'"});
  // The same key in different objects is fine.
  auto ok = parse_json_input(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 3}, {"x": 4}]})", "t");
  REQUIRE(ok.ok());
  CHECK((*ok)["c"][1]["x"] == 4);
}

TEST_CASE("JSON input: syntax errors name the source and where, and stay short and valid UTF-8") {
  check_message(parse_json_input(R"({"op": "moe_al)", "spec.json").status(), {"spec.json: not valid JSON", "line 1"});
  check_message(parse_json_input("", "empty.json").status(), {"empty.json: not valid JSON"});
  check_message(parse_json_input("{} {}", "two.json").status(), {"two.json: not valid JSON"});
  // A long bad token is cut; a cut never splits a UTF-8 sequence.
  std::string long_token = "\"" + std::string(5000, 'x');
  auto s = parse_json_input(long_token, "long").status();
  check_message(s, {"long: not valid JSON"});
  CHECK(s.message().size() < 400);
  std::string cjk;
  for (int i = 0; i < 100; ++i) cjk += "\xe7\x8c\xab";  // U+732B, three bytes each
  const std::string excerpt = json_excerpt(nlohmann::json(cjk), 66);  // mid-character
  CHECK(excerpt.size() == 64 + 3);
  CHECK(excerpt.ends_with("..."));
  CHECK(nlohmann::json(excerpt).dump().size() > 0);  // throws on invalid UTF-8
}

TEST_CASE("spec JSON: deep values, repeated keys and non-objects are errors naming the field") {
  // The value of a field nested 100,000 deep: the old reader's message dumped it recursively.
  check_message(parse_spec_json(R"({"op": "moe_align", "bm": )" + nested_arrays(100000) + "}").status(),
                {"spec: ", "deeper than 64"});
  check_message(parse_spec_json(nested_objects(100000)).status(), {"spec: ", "deeper than 64"});
  // A value that is deep but within the bound is reported by field, cut short.
  check_message(parse_spec_json(R"({"bm": )" + nested_arrays(60) + "}").status(), {"'bm'", "unsigned integer", "..."});
  check_message(parse_spec_json(R"({"op": "moe_align", "bm": 32, "experts": 64, "bm": 64})").status(),
                {"duplicate key 'bm'"});
  check_message(parse_spec_json(R"({"op": "moe_align", "op": "grouped_gemm"})").status(), {"duplicate key 'op'"});
}

TEST_CASE("HF config: model_type must be a string or absent, and every other kind is an error naming it") {
  auto ok = dispatch::parse_hf_config(kConfig, "config.json");
  REQUIRE(ok.ok());
  CHECK(ok->model_type == "qwen3_moe");
  auto absent = dispatch::parse_hf_config(R"({"hidden_size": 2048, "moe_intermediate_size": 768,
    "num_experts": 128, "num_experts_per_tok": 8})", "config.json");
  REQUIRE(absent.ok());
  CHECK(absent->model_type.empty());
  CHECK(absent->activation == Epilogue::silu_and_mul);
  for (const char* bad : {"null", "7", "-1", "2.5", "true", "false", R"(["gpt_oss"])", R"({"name": "gpt_oss"})"}) {
    const std::string bad_text = bad;
    CAPTURE(bad_text);
    const std::string text = R"({"model_type": )" + std::string(bad) +
                             R"(, "hidden_size": 2048, "moe_intermediate_size": 768, "num_experts": 128,
                                 "num_experts_per_tok": 8})";
    check_message(dispatch::parse_hf_config(text, "config.json").status(),
                  {"config.json: ", "'model_type'", "expected a string"});
  }
}

TEST_CASE("HF config: deep values, repeated keys and a non-object text_config are errors") {
  check_message(dispatch::parse_hf_config(R"({"hidden_size": )" + nested_arrays(100000) + "}", "c.json").status(),
                {"c.json: ", "deeper than 64"});
  check_message(dispatch::parse_hf_config(R"({"text_config": )" + nested_objects(100000) + "}", "c.json").status(),
                {"c.json: ", "deeper than 64"});
  check_message(dispatch::parse_hf_config(R"({"hidden_size": 2048, "hidden_size": 4096})", "c.json").status(),
                {"duplicate key 'hidden_size'"});
  check_message(dispatch::parse_hf_config(R"({"text_config": [1, 2]})", "c.json").status(),
                {"'text_config'", "expected an object"});
  check_message(dispatch::parse_hf_config("[1, 2]", "c.json").status(), {"c.json: expected a JSON object", "array"});
  // A field of the wrong type is still reported by name (and within the bound, cut short).
  check_message(dispatch::parse_hf_config(R"({"hidden_size": )" + nested_arrays(40) + "}", "c.json").status(),
                {"'hidden_size'", "expected a positive integer"});
  // text_config is still unwrapped, and its model_type checked.
  auto wrapped = dispatch::parse_hf_config(std::string(R"({"model_type": "outer", "text_config": )") + kConfig + "}",
                                           "c.json");
  REQUIRE(wrapped.ok());
  CHECK(wrapped->model_type == "qwen3_moe");
  CHECK(wrapped->experts == 128);
  check_message(dispatch::parse_hf_config(R"({"text_config": {"model_type": 3, "hidden_size": 8}})", "c.json").status(),
                {"'model_type'", "expected a string"});
}

TEST_CASE("usage manifest: a deep or repeated-key line is an error naming the file and line") {
  TempDir dir;
  const std::string good = R"({"op":"moe_align","arch":"sm_90a","backend":"device","experts":64,"bm":16,"warps":4})";
  write_text(dir / "deep.jsonl", good + "\n" + R"({"op": )" + nested_arrays(100000) + "}\n");
  check_message(dispatch::read_usage_manifest(dir / "deep.jsonl").status(), {"deep.jsonl line 2", "deeper than 64"});
  write_text(dir / "dup.jsonl", good + "\n" + good + "\n" + R"({"bm": 16, "bm": 32})" + "\n");
  check_message(dispatch::read_usage_manifest(dir / "dup.jsonl").status(), {"dup.jsonl line 3", "duplicate key 'bm'"});
  write_text(dir / "good.jsonl", good + "\n" + good + "\n");
  auto specs = dispatch::read_usage_manifest(dir / "good.jsonl");
  REQUIRE(specs.ok());
  CHECK(specs->size() == 1);
}
