// DLPack and buffer-protocol arrays as the C ABI takes them: pointers, after checking layout and
// memory (never converted or copied).

#include <string>

#include "core.hpp"

namespace moejit_python {

namespace {

bool c_contiguous(const nb::ndarray<nb::ro>& a) {
  // An empty array holds no element to misread, whatever strides its exporter gave it (NumPy and
  // torch step over the dimensions after a zero extent as if it were one).
  for (size_t d = 0; d < a.ndim(); ++d)
    if (a.shape(d) == 0) return true;
  int64_t expected = 1;
  for (size_t d = a.ndim(); d-- > 0;) {
    if (a.shape(d) != 1 && a.stride(d) != expected) return false;
    expected *= static_cast<int64_t>(a.shape(d));
  }
  return true;
}

const char* device_name(int32_t type) {
  switch (type) {
    case nb::device::cpu::value: return "cpu";
    case nb::device::cuda::value: return "cuda";
    case nb::device::cuda_host::value: return "cuda_host";
    case nb::device::cuda_managed::value: return "cuda_managed";
    default: return "another device";
  }
}

void check_memory(const Array& a, const char* name, const Memory& memory) {
  const int32_t type = a.device_type();
  if (memory.on_device) {
    if (type != nb::device::cuda::value || a.device_id() != memory.device)
      invalid_argument(std::string("argument '") + name + "' is in " + device_name(type) + " memory (device " +
                       std::to_string(a.device_id()) + "): expected cuda:" + std::to_string(memory.device) +
                       ", the context's device");
  } else if (type != nb::device::cpu::value) {
    invalid_argument(std::string("argument '") + name + "' is in " + device_name(type) +
                     " memory: expected host (cpu) memory, as the context runs on the host backend");
  }
}

}  // namespace

const void* data_of(const Array& a, const char* name, const Memory& memory) {
  if (!c_contiguous(a))
    invalid_argument(std::string("argument '") + name + "' is not contiguous: expected a C-contiguous array");
  check_memory(a, name, memory);
  return a.data();
}

StridedArray optional_strided_of(const nb::handle& array, const char* name, const Memory& memory) {
  StridedArray out;
  if (array.is_none()) return out;
  Array a;
  if (!nb::try_cast(array, a, /*convert=*/false))
    invalid_argument(std::string("argument '") + name + "' is a " + nb::type_name(array.type()).c_str() +
                     ": expected an array (DLPack or buffer protocol) or None");
  if (a.ndim() < 1 || a.ndim() > 3)
    invalid_argument(std::string("argument '") + name + "' has " + std::to_string(a.ndim()) +
                     " dimensions: expected 1 to 3");
  check_memory(a, name, memory);
  out.data = a.data();
  out.ndim = a.ndim();
  for (size_t d = 0; d < a.ndim(); ++d) {
    out.shape[d] = static_cast<int64_t>(a.shape(d));
    // An extent of 1 is never stepped over: its stride says nothing (torch gives it any value).
    out.stride[d] = a.shape(d) == 1 ? 0 : a.stride(d);
    if (out.stride[d] < 0)
      invalid_argument(std::string("argument '") + name + "' has a negative stride: expected a view with positive "
                       "strides");
    // A broadcast view (numpy.broadcast_to, Tensor.expand) repeats one value over a dimension the
    // C ABI reads element by element: it would read past the value's memory.
    if (out.stride[d] == 0 && a.shape(d) > 1)
      invalid_argument(std::string("argument '") + name + "' is broadcast (stride 0) over dimension " +
                       std::to_string(d) + " of extent " + std::to_string(a.shape(d)) +
                       ": expected one value per element in memory (e.g. .contiguous() or numpy.ascontiguousarray)");
  }
  return out;
}

void* data_of(const MutableArray& a, const char* name, const Memory& memory) {
  return const_cast<void*>(data_of(Array(a), name, memory));
}

Buffer writable_buffer(const nb::handle& array, const char* name, const Memory& memory) {
  if (array.is_none()) return {};
  MutableArray a;
  if (!nb::try_cast(array, a, /*convert=*/false))
    invalid_argument(std::string("argument '") + name + "' is a " + nb::type_name(array.type()).c_str() +
                     ": expected a writable array (DLPack or buffer protocol) or None");
  return {data_of(a, name, memory), static_cast<uint64_t>(a.nbytes())};
}

const void* optional_data_of(const nb::handle& array, const char* name, const Memory& memory) {
  if (array.is_none()) return nullptr;
  Array a;
  if (!nb::try_cast(array, a, /*convert=*/false))
    invalid_argument(std::string("argument '") + name + "' is a " + nb::type_name(array.type()).c_str() +
                     ": expected an array (DLPack or buffer protocol) or None");
  return data_of(a, name, memory);
}

}  // namespace moejit_python
