// The C++ wrapper (include/moejit/moejit.hpp): RAII contexts and exceptions carrying the status.

#include <doctest/doctest.h>

#include "moejit/moejit.hpp"
#include "test_support.hpp"

TEST_CASE("C++ wrapper: contexts, statistics, warm-up and errors as exceptions") {
  moejit::test::TempDir dir;
  const std::string cache = dir / "store";
  auto options = moejit::context_options();
  options.backend = MOEJIT_BACKEND_HOST;
  options.cache_dir = cache.c_str();
  moejit::Context ctx(options);
  CHECK(ctx.backend() == MOEJIT_BACKEND_HOST);
  CHECK(ctx.arch() == "sm_90a");
  CHECK(ctx.stats().compiles == 0);

  moejit_model_desc_t model;
  moejit_model_desc_init(&model);
  model.hidden = 128;
  model.intermediate = 64;
  model.experts = 4;
  model.topk = 2;
  model.format = MOEJIT_WEIGHT_INT4_SYM;
  model.group_size = 0;  // per-channel
  model.scale_dtype = MOEJIT_DTYPE_BF16;
  model.max_tokens = 2;
  std::uint32_t calls = 0;
  ctx.warmup(model, {}, [&](std::uint32_t done, std::uint32_t total, const char*) {
    ++calls;
    CHECK(done <= total);
  });
  CHECK(calls == 4);
  CHECK(ctx.stats().compiles == 4);

  model.topk = 9;
  try {
    ctx.warmup(model);
    FAIL("warm-up with topk > experts must throw");
  } catch (const moejit::Error& e) {
    CHECK(e.status() == MOEJIT_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(e.what()).find("'topk' = 9") != std::string::npos);
  }
  moejit::Context moved = std::move(ctx);
  CHECK(moved.get() != nullptr);
  CHECK(ctx.get() == nullptr);
}
