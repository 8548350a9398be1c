// Status codes become Python exceptions: moejit.Error subclasses that the Python layer defines
// (moejit/_errors.py) and registers here at import, one per moejit_status_t.

#include <nanobind/stl/string.h>

#include <array>

#include "core.hpp"

namespace moejit_python {

namespace {

// Index = moejit_status_t; set once by _register_error_classes. Strong references, kept for
// the life of the process like the module itself.
std::array<PyObject*, MOEJIT_ERROR_INTERNAL + 1> g_error_classes{};

PyObject* class_for(moejit_status_t status) {
  const auto i = static_cast<std::size_t>(status);
  if (i < g_error_classes.size() && g_error_classes[i] != nullptr) return g_error_classes[i];
  return PyExc_RuntimeError;  // only before moejit/__init__.py registered its classes
}

}  // namespace

void check(moejit_status_t status) {
  if (status != MOEJIT_OK) throw StatusError{status, moejit_last_error()};
}

void invalid_argument(std::string message) { throw StatusError{MOEJIT_ERROR_INVALID_ARGUMENT, std::move(message)}; }

namespace {

bool c_contiguous(const nb::ndarray<nb::ro>& a) {
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

}  // namespace

const void* data_of(const Array& a, const char* name, const Memory& memory) {
  if (!c_contiguous(a))
    invalid_argument(std::string("argument '") + name + "' is not contiguous: expected a C-contiguous array");
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
  return a.data();
}

void* data_of(const MutableArray& a, const char* name, const Memory& memory) {
  return const_cast<void*>(data_of(Array(a), name, memory));
}

const void* optional_data_of(const nb::handle& array, const char* name, const Memory& memory) {
  if (array.is_none()) return nullptr;
  Array a;
  if (!nb::try_cast(array, a, /*convert=*/false))
    invalid_argument(std::string("argument '") + name + "' is a " + nb::type_name(array.type()).c_str() +
                     ": expected an array (DLPack or buffer protocol) or None");
  return data_of(a, name, memory);
}

void bind_errors(nb::module_& m) {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      nb::object args = nb::make_tuple(e.message, static_cast<int>(e.status));
      PyErr_SetObject(class_for(e.status), args.ptr());
    }
  });
  // classes[i] is raised for status i (0, OK, is never raised).
  m.def("_register_error_classes", [](nb::sequence classes) {
    if (nb::len(classes) != g_error_classes.size())
      throw nb::value_error("_register_error_classes: expected one class per moejit_status_t");
    for (size_t i = 0; i < g_error_classes.size(); ++i) {
      nb::object c = classes[i];
      Py_XINCREF(c.ptr());
      Py_XDECREF(g_error_classes[i]);
      g_error_classes[i] = c.ptr();
    }
  });
  m.def("status_name", [](int status) { return moejit_status_name(static_cast<moejit_status_t>(status)); });
  m.def("version", [] { return moejit_version(); });
}

}  // namespace moejit_python
