// The extension module's shared pieces: turning a moejit_status_t into a Python exception and a
// DLPack array into a pointer the C ABI may take.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <string>

#include "moejit/moejit.h"

namespace moejit_python {

namespace nb = nanobind;

// A failed C call, raised in Python as the moejit.Error subclass registered for its status.
struct StatusError {
  moejit_status_t status;
  std::string message;
};

// Throws StatusError with moejit_last_error() when `status` is not MOEJIT_OK.
void check(moejit_status_t status);

// Throws StatusError(INVALID_ARGUMENT, message): for what the binding itself rejects.
[[noreturn]] void invalid_argument(std::string message);

// Where a context's tensors live: host memory, or one CUDA device's memory.
struct Memory {
  bool on_device = false;
  int32_t device = 0;
};

// Any array that arrived through DLPack or the buffer protocol; never converted or copied (an
// output must be the caller's own memory), so layout is checked here instead.
using Array = nb::ndarray<nb::ro>;
using MutableArray = nb::ndarray<>;

// The data pointer of `array` after checking that it is C-contiguous and lives where `memory`
// says; the error names the argument. Shapes and dtypes are checked by the Python layer, which
// knows what each argument means.
const void* data_of(const Array& array, const char* name, const Memory& memory);
void* data_of(const MutableArray& array, const char* name, const Memory& memory);
// As above for an optional argument: nullptr for None.
const void* optional_data_of(const nb::handle& array, const char* name, const Memory& memory);

// A scale array the C ABI reads through strides (per-128 activation scales may be column-major,
// as DeepEP and DeepGEMM give them): its data pointer and its strides in elements, after checking
// where it lives; up to 3 dimensions, no contiguity required. Null data for None.
struct StridedArray {
  const void* data = nullptr;
  size_t ndim = 0;
  int64_t shape[3] = {0, 0, 0};
  int64_t stride[3] = {0, 0, 0};
};
StridedArray optional_strided_of(const nb::handle& array, const char* name, const Memory& memory);

// A writable array's memory and size in bytes (null and 0 for None): outputs, workspaces and
// packed buffers.
struct Buffer {
  void* data = nullptr;
  uint64_t bytes = 0;
};
Buffer writable_buffer(const nb::handle& array, const char* name, const Memory& memory);

void bind_errors(nb::module_& m);
void bind_context(nb::module_& m);
void bind_weights(nb::module_& m);
void bind_ops(nb::module_& m);
void bind_warmup(nb::module_& m);

}  // namespace moejit_python
