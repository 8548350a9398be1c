// The one rule that pairs activation types with activation-scale granularities, against the
// table the C header documents (moejit_act_scale_t): e4m3 with per-token or per-128 f32 scales,
// e2m1 with E8M0 per 32, every other type with none.

#include <doctest/doctest.h>

#include <string>

#include "spec/act_scale_rule.hpp"
#include "spec/spec_fields.hpp"

using namespace moejit;

TEST_CASE("act_scale_fits pairs each activation type with its scale granularities, and only those") {
  const DType types[] = {DType::bf16, DType::f16, DType::e4m3, DType::e2m1, DType::f32};
  const ActScale scales[] = {ActScale::none, ActScale::token, ActScale::block128, ActScale::block32};
  for (const DType act : types)
    for (const ActScale scale : scales) {
      bool want = scale == ActScale::none;
      if (act == DType::e4m3) want = scale == ActScale::token || scale == ActScale::block128;
      if (act == DType::e2m1) want = scale == ActScale::block32;
      CAPTURE(to_string(act));
      CAPTURE(to_string(scale));
      CHECK(act_scale_fits(act, scale) == want);
      // The text names exactly the granularities that fit.
      const std::string expected(act_scales_for(act));
      CHECK((expected.find(std::string(to_string(scale))) != std::string::npos) == want);
    }
}
