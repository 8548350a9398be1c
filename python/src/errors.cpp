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
