#pragma once
// Shared by the C ABI entry points: the thread's last error, the guard that turns Status and
// exceptions into status codes, and conversions from ABI structs to the ops' types.

#include <cstddef>
#include <exception>
#include <string>
#include <type_traits>

#include "api/context.hpp"
#include "dispatch/grouped_gemm_op.hpp"
#include "moejit/moejit.h"
#include "support/status.hpp"

namespace moejit::api {

void set_last_error(const Status& status);
void clear_last_error();

inline moejit_status_t to_c(const Status& s) {
  if (s.ok()) {
    clear_last_error();
    return MOEJIT_OK;
  }
  set_last_error(s);
  return static_cast<moejit_status_t>(s.code());
}

// Runs `body` (returning Status); exceptions become MOEJIT_ERROR_INTERNAL with their message.
template <typename F>
moejit_status_t guarded(F&& body) noexcept {
  try {
    return to_c(body());
  } catch (const std::exception& e) {
    return to_c(error(Code::internal, "unexpected exception: {}", e.what()));
  } catch (...) {
    return to_c(error(Code::internal, "unexpected exception"));
  }
}

// A struct passed in must be at least as large as its first ABI version.
Status check_struct(const void* p, std::uint32_t struct_size, std::size_t minimum, const char* name);

// Whether a caller's struct of `struct_size` bytes holds the field at `offset` of `size` bytes:
// fields added to a struct after its first release are read only then (older callers' structs
// end before them, and the field keeps its default).
constexpr bool struct_has(std::uint32_t struct_size, std::size_t offset, std::size_t size) {
  return offset + size <= struct_size;
}
#define MOEJIT_STRUCT_HAS(ptr, field) \
  ::moejit::api::struct_has((ptr)->struct_size, offsetof(std::remove_cvref_t<decltype(*(ptr))>, field), sizeof((ptr)->field))

// The first size of a struct that later releases grew: the offset of its first added field.
// That offset must be the first release's sizeof: a field placed in the first release's tail
// padding would be "covered" by an old caller's struct_size = sizeof and read from its padding.
template <class Struct, std::size_t kFirstAddedOffset>
constexpr std::size_t struct_first_size() {
  static_assert(kFirstAddedOffset % alignof(Struct) == 0,
                "a field added after the first release starts inside that release's tail padding: pad the struct "
                "so that it starts at the old sizeof");
  return kFirstAddedOffset;
}
#define MOEJIT_STRUCT_FIRST_SIZE(type, first_added_field) \
  ::moejit::api::struct_first_size<type, offsetof(type, first_added_field)>()

Status check_context(moejit_context_t context);

// Enum values from the ABI, checked.
Result<DType> dtype_of(int value, const char* argument);
Result<Epilogue> epilogue_of(int value, const char* argument);
Result<Layout> layout_of(int value, const char* argument);
Result<ActScale> act_scale_of(int value, const char* argument);
// The scales `act` activations take: TOKEN or BLOCK128 for E4M3, BLOCK32 for E2M1, NONE for
// 16-bit ones; the error names `argument`.
Status check_act_scale(DType act, ActScale scale, const char* argument);

// What a call needs of packed weights: their buffers (a launch), or only their shape and format
// (a workspace-size query, which engines make at start-up, before any weights are loaded).
enum class PackedUse { launch, shape_only };

// The ops' view of packed weights, checked for consistency and, for a launch, for buffers of
// exactly the packed sizes.
Result<dispatch::PackedWeightsView> packed_view(const moejit_packed_weights_t* packed, const char* argument,
                                                PackedUse use = PackedUse::launch);

}  // namespace moejit::api
