// The mma facts the tile planner plans with. The time model's own arithmetic is tested with the
// performance model (bench/perf_model/tests).

#include <doctest/doctest.h>

#include "spec/arch.hpp"

using namespace moejit;

TEST_CASE("e4m3 mma.sync is native on sm_89 and sm_120/121 only") {
  CHECK(has_e4m3_mma(Arch::sm_89));
  CHECK(has_e4m3_mma(Arch::sm_120a));
  CHECK(has_e4m3_mma(Arch::sm_121a));
  CHECK_FALSE(has_e4m3_mma(Arch::sm_80));
  CHECK_FALSE(has_e4m3_mma(Arch::sm_90a));
  CHECK_FALSE(has_e4m3_mma(Arch::sm_100a));
  CHECK_FALSE(has_e4m3_mma(Arch::none));
}
