// The C ABI's version and status-name entry points.

#include "moejit/moejit.h"
#include "support/status.hpp"

#define MOEJIT_STR2(x) #x
#define MOEJIT_STR(x) MOEJIT_STR2(x)

extern "C" {

const char* moejit_version(void) {
  return MOEJIT_STR(MOEJIT_VERSION_MAJOR) "." MOEJIT_STR(MOEJIT_VERSION_MINOR) "." MOEJIT_STR(
      MOEJIT_VERSION_PATCH);
}

const char* moejit_status_name(moejit_status_t status) {
  return moejit::code_name(static_cast<moejit::Code>(status));
}

}  // extern "C"
