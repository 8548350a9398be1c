// The C ABI's version, status-name and last-error entry points.

#include <string>

#include "moejit/moejit.h"
#include "support/status.hpp"

#define MOEJIT_STR2(x) #x
#define MOEJIT_STR(x) MOEJIT_STR2(x)

namespace moejit::api {
const char* last_error_text();
}

extern "C" {

const char* moejit_version(void) {
  return MOEJIT_STR(MOEJIT_VERSION_MAJOR) "." MOEJIT_STR(MOEJIT_VERSION_MINOR) "." MOEJIT_STR(
      MOEJIT_VERSION_PATCH);
}

const char* moejit_status_name(moejit_status_t status) {
  return moejit::code_name(static_cast<moejit::Code>(status));
}

const char* moejit_last_error(void) { return moejit::api::last_error_text(); }

}  // extern "C"
