// moejit._core: the nanobind extension over the C ABI (include/moejit/moejit.h). It is private
// to the package: moejit/*.py gives it its Pythonic shape and checks arguments first.

#include "core.hpp"

NB_MODULE(_core, m) {
  using namespace moejit_python;
  bind_errors(m);
  bind_context(m);
  bind_weights(m);
  bind_ops(m);
  bind_warmup(m);
}
