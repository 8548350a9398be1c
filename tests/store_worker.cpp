// A separate process for the multi-process and crash tests of the store.
//   store_worker resolve STORE LOCKS SPEC.json...  resolve each spec, print "<key> <source>"
//   store_worker publish-loop STORE LOCKS BYTES     publish random entries until killed

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cache/store.hpp"
#include "codegen/template_set.hpp"
#include "runtime/kernel_resolver.hpp"
#include "spec/spec_json.hpp"

using namespace moejit;

namespace {

store::StoreOptions options(const char* dir, const char* locks) {
  store::StoreOptions o;
  o.dir = dir;
  o.lock_dir = locks;
  o.lock_timeout = std::chrono::milliseconds(120000);
  return o;
}

int resolve(const char* dir, const char* locks, const std::vector<std::string>& specs) {
  KernelResolver::Options o;
  o.store = options(dir, locks);
  o.compile_threads = 1;
  o.templates = codegen::TemplateSet::embedded();
  auto resolver = KernelResolver::create(o);
  if (!resolver.ok()) {
    std::fprintf(stderr, "%s\n", resolver.status().to_string().c_str());
    return 2;
  }
  for (const auto& path : specs) {
    auto spec = load_spec_file(path);
    if (!spec.ok()) {
      std::fprintf(stderr, "%s\n", spec.status().to_string().c_str());
      return 2;
    }
    auto r = (*resolver)->resolve(*spec);
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().to_string().c_str());
      return 1;
    }
    std::printf("%s %s\n", r->kernel->key.hex().c_str(), std::string(to_string(r->source)).c_str());
    std::fflush(stdout);
  }
  return 0;
}

int publish_loop(const char* dir, const char* locks, std::size_t bytes) {
  store::Store s(options(dir, locks));
  std::mt19937_64 rng{std::random_device{}()};
  for (;;) {
    store::Entry e;
    e.key_material = "crash-test " + std::to_string(rng());
    e.key = xxh3_128(e.key_material);
    e.meta.kernel_name = "_Z1kv";
    e.meta.compiler = "crash-test";
    e.payload.resize(bytes);
    for (auto& c : e.payload) c = static_cast<char>(rng());
    if (Status st = s.publish(e); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.to_string().c_str());
      return 1;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::string(argv[1]) == "resolve")
    return resolve(argv[2], argv[3], std::vector<std::string>(argv + 4, argv + argc));
  if (argc == 5 && std::string(argv[1]) == "publish-loop")
    return publish_loop(argv[2], argv[3], std::strtoull(argv[4], nullptr, 10));
  std::fprintf(stderr, "usage: store_worker resolve STORE LOCKS SPEC... | publish-loop STORE LOCKS BYTES\n");
  return 2;
}
