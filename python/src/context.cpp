// moejit._core.Context: a moejit_context_t, its log sink into Python, and its statistics.

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <vector>

#include "context.hpp"

namespace moejit_python {

namespace {

// The C ABI's log sink is process-wide (the last context created with one receives every
// message), so the Python side has one too: a callable (level, message), kept for the life of
// the process because compile threads may still log while a context is torn down.
PyObject* g_log_target = nullptr;

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// Called from any thread, with or without the GIL: every C call that can log releases it first.
void forward_log(void*, moejit_log_level_t level, const char* message) {
  if (g_log_target == nullptr || interpreter_finalizing()) return;
  nb::gil_scoped_acquire gil;
  try {
    nb::handle target(g_log_target);
    target(static_cast<int>(level), message);
  } catch (nb::python_error& e) {
    e.discard_as_unraisable("moejit log callback");  // a broken logger must not break a compile
  }
}

}  // namespace

Context::Context(int backend, int32_t device, std::optional<std::string> cache_dir,
                 std::vector<std::string> read_only_dirs, uint32_t compile_threads, bool frozen, nb::object log,
                 std::optional<std::string> usage_manifest, std::optional<std::string> host_arch) {
  moejit_context_options_t o;
  moejit_context_options_init(&o);
  o.backend = static_cast<moejit_backend_t>(backend);
  o.device_ordinal = device;
  o.cache_dir = cache_dir ? cache_dir->c_str() : nullptr;
  std::vector<const char*> layers;
  for (const std::string& d : read_only_dirs) layers.push_back(d.c_str());
  o.read_only_dirs = layers.data();
  o.read_only_dir_count = static_cast<uint32_t>(layers.size());
  o.compile_threads = compile_threads;
  o.frozen = frozen ? 1 : 0;
  o.usage_manifest = usage_manifest ? usage_manifest->c_str() : nullptr;
  o.host_arch = host_arch ? host_arch->c_str() : nullptr;
  if (!log.is_none()) {
    Py_INCREF(log.ptr());
    Py_XDECREF(g_log_target);
    g_log_target = log.ptr();
    o.log = forward_log;
  }
  moejit_status_t status;
  {
    nb::gil_scoped_release unlocked;  // creating a store may log (an untrusted directory, say)
    status = moejit_context_create(&o, &ctx_);
  }
  check(status);
  moejit_backend_t resolved;
  const char* arch = nullptr;
  check(moejit_context_backend(ctx_, &resolved, &arch));
  backend_ = resolved;
  arch_ = arch != nullptr ? arch : "";
  const bool on_device = resolved == MOEJIT_BACKEND_DEVICE;
  memory_ = {on_device, on_device ? device : 0};
  device_ = device;
}

namespace {

// The contexts whose calls are in flight on this thread, innermost last (a callback may call
// into another context).
thread_local std::vector<const Context*> t_in_call;

}  // namespace

Context::~Context() { destroy(); }  // nothing holds a Use: each call keeps its Context alive

void Context::close() {
  if (std::find(t_in_call.begin(), t_in_call.end(), this) != t_in_call.end())
    invalid_argument("Context.close() from within a call on this context (its progress or log callback): expected "
                     "close() after the call returns");
  destroy();
}

void Context::destroy() {
  if (ctx_ == nullptr) return;
  // Calls in flight hold the lock shared, and compile threads may be waiting for the GIL to log:
  // both are waited for without it.
  nb::gil_scoped_release unlocked;
  std::unique_lock lock(closing_);
  moejit_context_t ctx = std::exchange(ctx_, nullptr);
  if (ctx != nullptr) moejit_context_destroy(ctx);
}

Context::Use::Use(const Context& c) : lock_(c.closing_, std::defer_lock) {
  if (!lock_.try_lock()) {
    // Being closed: the closing thread may need the GIL (a compile thread logging) to finish.
    nb::gil_scoped_release unlocked;
    lock_.lock();
  }
  ctx_ = c.ctx_;
  if (ctx_ == nullptr) invalid_argument("the context is closed: expected an open moejit.Context");
  t_in_call.push_back(&c);
}

Context::Use::~Use() {
  if (ctx_ != nullptr) t_in_call.pop_back();
}

nb::dict Context::stats() const {
  moejit_stats_t s;
  moejit_stats_init(&s);
  check(moejit_get_stats(use().get(), &s));
  nb::dict d;
  d["memory_hits"] = s.memory_hits;
  d["disk_hits"] = s.disk_hits;
  d["compiles"] = s.compiles;
  d["compile_ms"] = s.compile_ms;
  d["compile_errors"] = s.compile_errors;
  d["corrupt_entries"] = s.corrupt_entries;
  d["lock_waits"] = s.lock_waits;
  d["lock_wait_ms"] = s.lock_wait_ms;
  d["launches"] = s.launches;
  return d;
}

void bind_context(nb::module_& m) {
  nb::class_<Context>(m, "Context")
      .def(nb::init<int, int32_t, std::optional<std::string>, std::vector<std::string>, uint32_t, bool, nb::object,
                    std::optional<std::string>, std::optional<std::string>>(),
           nb::arg("backend"), nb::arg("device"), nb::arg("cache_dir").none(), nb::arg("read_only_dirs"),
           nb::arg("compile_threads"), nb::arg("frozen"), nb::arg("log").none(), nb::arg("usage_manifest").none(),
           nb::arg("host_arch").none())
      .def_prop_ro("backend", [](const Context& c) { return static_cast<int>(c.backend()); })
      .def_prop_ro("arch", &Context::arch)
      .def_prop_ro("device", [](const Context& c) { return c.device(); })
      .def_prop_ro("closed", [](const Context& c) { return c.closed(); })
      .def("stats", &Context::stats)
      .def("close", &Context::close);
}

}  // namespace moejit_python
