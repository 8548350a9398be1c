// `moejit cache stat | ls | verify | prune --max-bytes N | clear | export FILE | import FILE`:
// inspection and maintenance of the kernel store.

#include "cache/bundle.hpp"
#include "cli/commands.hpp"
#include "support/env.hpp"

namespace moejit::cli {
namespace {

// The value of `name=` in an entry's key material ("spec.arch" -> "sm_90a").
std::string material_field(std::string_view material, std::string_view name) {
  std::string prefix = std::string(name) + "=";
  for (std::size_t pos = 0; pos < material.size();) {
    std::size_t end = material.find('\n', pos);
    if (end == std::string_view::npos) end = material.size();
    std::string_view line = material.substr(pos, end - pos);
    if (line.starts_with(prefix)) return std::string(line.substr(prefix.size()));
    pos = end + 1;
  }
  return {};
}

Json entry_json(const store::EntryInfo& info) {
  Json j;
  j["path"] = info.path;
  j["read_only"] = info.read_only;
  j["bytes"] = info.bytes;
  j["last_use_unix_ms"] = info.last_use_unix_ms;
  if (!info.entry.ok()) {
    j["ok"] = false;
    j["error"] = info.entry.status().message();
    return j;
  }
  const auto& e = *info.entry;
  j["ok"] = true;
  j["key"] = e.key.hex();
  j["op"] = material_field(e.key_material, "spec.op");
  j["arch"] = material_field(e.key_material, "spec.arch");
  j["backend"] = material_field(e.key_material, "spec.backend");
  j["kernel"] = e.meta.kernel_name;
  j["registers"] = e.meta.registers;
  j["spill_bytes"] = e.meta.spill_store_bytes + e.meta.spill_load_bytes;
  j["shared_bytes"] = e.meta.static_shared_bytes + e.meta.dynamic_shared_bytes;
  j["compile_ms"] = e.meta.compile_ms;
  j["created_unix_ms"] = e.meta.created_unix_ms;
  j["compiler"] = e.meta.compiler;
  return j;
}

// Why prune/clear cannot run: the store's own reason when it has one.
Json prune_json(const store::PruneResult& r) {
  return Json{{"bytes_before", r.bytes_before},     {"bytes_after", r.bytes_after},
              {"removed_entries", r.removed_entries}, {"removed_other", r.removed_other},
              {"skipped_in_use", r.skipped_in_use}};
}

}  // namespace

Command add_cache_command(CLI::App& app, const GlobalOptions& g) {
  auto* cache = app.add_subcommand("cache", "Inspect and maintain the kernel store");
  cache->require_subcommand(1);
  auto* stat = cache->add_subcommand("stat", "Where the store is and how much it holds");
  auto* ls = cache->add_subcommand("ls", "List every entry of every layer");
  auto* verify = cache->add_subcommand(
      "verify", "Check every entry and move bad ones of the writable root aside; exit 1 if any was bad "
                "or a layer is not usable");
  auto* prune = cache->add_subcommand("prune", "Evict least-recently-used entries to a size");
  auto max_bytes = std::make_shared<std::string>();
  prune->add_option("--max-bytes", *max_bytes, "Size to prune to (bytes; K/M/G suffixes)")->required();
  auto* clear = cache->add_subcommand("clear", "Remove every entry of the writable root");
  auto* exp = cache->add_subcommand("export", "Write entries into one bundle file");
  auto file = std::make_shared<std::string>();
  auto keys = std::make_shared<std::vector<std::string>>();
  exp->add_option("FILE", *file, "Bundle to write")->required();
  exp->add_option("--key", *keys, "Export only these keys (repeatable; default: all)");
  auto* imp = cache->add_subcommand("import", "Verify a bundle and add its entries to the store");
  imp->add_option("FILE", *file, "Bundle to read")->required();

  return {cache, [=, &g]() -> int {
    auto options = store_options(g);
    if (!options.ok()) return fail(g, options.status());
    store::Store s(std::move(options).value());
    const auto& o = s.options();

    if (stat->parsed()) {
      std::uint64_t entries = 0, bytes = 0, bad = 0;
      for (const auto& info : s.list()) {
        ++entries;
        bytes += info.bytes;
        bad += info.entry.ok() ? 0 : 1;
      }
      Json doc{{"dir", o.dir},       {"read_only", o.read_only}, {"lock_dir", o.lock_dir},
               {"memory_only", s.memory_only()}, {"entries", entries},
               {"bytes", bytes},     {"bad_entries", bad},      {"max_bytes", o.max_bytes},
               {"problems", s.problems()}};
      return print(g, doc);
    }
    if (ls->parsed()) {
      Json list = Json::array();
      for (const auto& info : s.list()) list.push_back(entry_json(info));
      return print(g, Json{{"entries", list}});
    }
    if (verify->parsed()) {
      // Bad entries of the writable root are moved aside (and rebuilt when next needed), so
      // that one bad path - a damaged file, a directory, a FIFO - costs one key, once.
      Json bad_list = Json::array();
      std::uint64_t checked = 0;
      for (const auto& info : s.list()) {
        ++checked;
        if (info.entry.ok()) continue;
        Json bad{{"path", info.path}, {"error", info.entry.status().message()}, {"moved_aside", false}};
        // An entry that could not be read (io_error) may be good: reported, left in place.
        if (!info.read_only && info.entry.status().code() != Code::io_error) {
          Status moved = s.move_aside(info);
          bad["moved_aside"] = moved.ok();
          if (!moved.ok()) bad["move_error"] = moved.message();
        }
        bad_list.push_back(std::move(bad));
      }
      auto problems = s.problems();
      bool ok = bad_list.empty() && problems.empty();
      print(g, Json{{"ok", ok}, {"checked", checked}, {"bad", bad_list}, {"problems", problems}});
      return ok ? 0 : 1;
    }
    if (prune->parsed()) {
      auto limit = parse_size(*max_bytes, "--max-bytes");
      if (!limit.ok()) return fail(g, limit.status());
      if (s.memory_only()) return fail(g, s.memory_only_error("change"));
      return print(g, prune_json(s.prune(*limit)));
    }
    if (clear->parsed()) {
      if (s.memory_only()) return fail(g, s.memory_only_error("change"));
      return print(g, prune_json(s.prune(0)));
    }
    if (exp->parsed()) {
      std::optional<std::vector<Hash128>> selected;
      if (!keys->empty()) {
        selected.emplace();
        for (const auto& k : *keys) {
          auto h = Hash128::from_hex(k);
          if (!h)
            return fail(g, error(Code::invalid_argument, "--key {}: expected 32 lowercase hex digits", k));
          selected->push_back(*h);
        }
      }
      auto r = store::export_bundle(s, *file, selected);
      if (!r.ok()) return fail(g, r.status());
      return print(g, Json{{"file", *file}, {"entries", r->entries}, {"bytes", r->bytes}});
    }
    if (imp->parsed()) {
      auto r = store::import_bundle(s, *file);
      if (!r.ok()) return fail(g, r.status());
      return print(g, Json{{"file", *file}, {"entries", r->entries}, {"payload_bytes", r->bytes}});
    }
    return fail(g, error(Code::internal, "no cache subcommand parsed"));
  }};
}

}  // namespace moejit::cli
