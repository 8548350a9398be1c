#include "bench/perf_model/sass.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>

namespace moejit::perf {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool one_of(std::string_view s, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

bool starts_with_any(std::string_view s, std::initializer_list<std::string_view> prefixes) {
  for (auto p : prefixes)
    if (s.starts_with(p)) return true;
  return false;
}

bool all_digits(std::string_view s) {
  auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  return !s.empty() && std::all_of(s.begin(), s.end(), digit);
}

// The next whitespace-separated token of `s`, removed from it.
std::string_view take_token(std::string_view& s) {
  s = trim(s);
  std::size_t end = 0;
  while (end < s.size() && !std::isspace(static_cast<unsigned char>(s[end]))) ++end;
  std::string_view token = s.substr(0, end);
  s.remove_prefix(end);
  return token;
}

// The integer ALU opcodes (checked also in their uniform-datapath U* spelling). CS2R with SRZ
// is how the compiler zeroes a register pair, a move.
bool is_integer_opcode(std::string_view b) {
  return one_of(b, {"IMAD", "IADD3", "IADD", "IADD32I", "IMUL", "IMUL32I", "IMNMX", "VIMNMX", "VIMNMX3", "VIADD",
                    "VIADDMNMX", "IABS", "LOP3", "LOP", "LOP32I", "PLOP3", "SHF", "SHL", "SHR", "PRMT", "LEA",
                    "ISETP", "SEL", "MOV", "MOV32I", "CS2R", "POPC", "FLO", "BREV", "BMSK", "SGXT", "P2R",
                    "R2P", "IDP", "IDP4A", "I2I", "I2IP", "IMNMX3", "LEPC", "VABSDIFF", "VABSDIFF4"});
}

bool is_float_opcode(std::string_view b) {
  return one_of(b, {"FFMA", "FFMA32I", "FMUL", "FMUL32I", "FADD", "FADD32I", "FMNMX", "FMNMX3", "FSETP", "FSEL",
                    "FSET", "FCHK", "FRND", "FSWZADD", "MUFU", "HFMA2", "HMUL2", "HADD2", "HMNMX2", "HSETP2", "HSET2",
                    "F2F", "F2FP", "F2I", "I2F", "I2FP", "F2IP", "DADD", "DFMA", "DMUL", "DSETP", "DMNMX",
                    "FADD2", "FMUL2", "FFMA2"});
}

}  // namespace

std::string_view to_string(InstrClass c) {
  switch (c) {
    case InstrClass::mma: return "mma";
    case InstrClass::shared_load: return "shared_load";
    case InstrClass::async_copy: return "async_copy";
    case InstrClass::global_memory: return "global_memory";
    case InstrClass::shared_store: return "shared_store";
    case InstrClass::local_memory: return "local_memory";
    case InstrClass::integer: return "integer";
    case InstrClass::floating: return "float";
    case InstrClass::control: return "control";
    case InstrClass::other: return "other";
  }
  return "other";
}

InstrClass classify_opcode(std::string_view b) {
  // Every tensor-core opcode has MMA in its name (HMMA, HGMMA, UTCQMMA, ...), nothing else does.
  if (b.find("MMA") != std::string_view::npos) return InstrClass::mma;
  if (one_of(b, {"LDS", "LDSM"})) return InstrClass::shared_load;
  if (one_of(b, {"LDGSTS"}) || starts_with_any(b, {"UBLKCP", "UTMALDG", "UTMAPF", "UTMACCTL", "UBLKPF"}))
    return InstrClass::async_copy;
  if (one_of(b, {"LDG", "STG", "LD", "ST", "RED", "REDG", "ATOM", "ATOMG", "REDAS", "UTMASTG", "UTMAREDG",
                 "UBLKRED", "LDGMC"}))
    return InstrClass::global_memory;
  if (one_of(b, {"STS", "STSM"})) return InstrClass::shared_store;
  if (one_of(b, {"LDL", "STL"})) return InstrClass::local_memory;
  if (one_of(b, {"BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "BAR", "BSSY", "BSYNC", "BREAK", "BMOV", "DEPBAR",
                 "LDGDEPBAR", "WARPSYNC", "NOP", "YIELD", "BPT", "KILL", "NANOSLEEP", "MEMBAR", "FENCE", "ERRBAR",
                 "CCTL", "CCTLL", "SYNCS", "ARRIVES", "WARPGROUP", "ELECT", "ACQBULK", "ENDCOLLECTIVE", "UCGABAR_ARV",
                 "UCGABAR_WAIT", "PMTRIG"}))
    return InstrClass::control;
  if (is_integer_opcode(b)) return InstrClass::integer;
  if (is_float_opcode(b)) return InstrClass::floating;
  // Uniform-datapath forms: UIADD3, ULOP3, UMOV, USHF, ... are the integer ops issued once per warp.
  if (b.size() > 1 && b.front() == 'U' && is_integer_opcode(b.substr(1))) return InstrClass::integer;
  return InstrClass::other;
}

std::vector<SassFunction> parse_sass(std::string_view text) {
  std::vector<SassFunction> functions;
  std::vector<std::string> pending_labels;  // labels waiting for the next instruction's address
  auto current = [&]() -> SassFunction& {
    if (functions.empty()) functions.emplace_back();
    return functions.back();
  };
  // Labels after a function's last instruction (its .size end marker) point past it.
  auto flush_labels_at_end = [&] {
    if (functions.empty() || pending_labels.empty()) return;
    SassFunction& f = functions.back();
    const std::uint32_t end = f.instructions.empty() ? 0 : f.instructions.back().address + 16;
    for (auto& l : pending_labels) f.labels.emplace(l, end);
    pending_labels.clear();
  };

  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    std::string_view line = trim(text.substr(0, eol));
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (line.empty()) continue;

    if (line.starts_with("/*")) {  // "/*0090*/  @P0 EXIT ;"
      const std::size_t close = line.find("*/");
      if (close == std::string_view::npos) continue;
      const std::string_view address = line.substr(2, close - 2);
      if (address.empty() || !std::all_of(address.begin(), address.end(),
                                          [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
        continue;  // a comment, not an address
      std::string_view rest = line.substr(close + 2);
      const std::size_t semicolon = rest.find(';');
      if (semicolon != std::string_view::npos) rest = rest.substr(0, semicolon);
      SassInstruction in;
      in.address = static_cast<std::uint32_t>(std::stoul(std::string(address), nullptr, 16));
      rest = trim(rest);
      if (rest.starts_with('@')) in.predicate = take_token(rest);
      in.opcode = take_token(rest);
      if (in.opcode.empty()) continue;
      in.operands = trim(rest);
      in.base = in.opcode.substr(0, in.opcode.find('.'));
      in.klass = classify_opcode(in.base);
      if (in.base == "BRA" || in.base == "JMP") {
        // Targets print as `(.L_x_5); a bare address when the disassembler made no label.
        const std::size_t open = in.operands.find("`(");
        if (open != std::string::npos) {
          const std::size_t close_paren = in.operands.find(')', open);
          in.branch_label = in.operands.substr(open + 2, close_paren - open - 2);
        } else if (const std::size_t hex = in.operands.find("0x"); hex != std::string::npos) {
          in.branch_target = static_cast<std::uint32_t>(std::stoul(in.operands.substr(hex), nullptr, 16));
        }
      }
      SassFunction& f = current();
      for (auto& l : pending_labels) f.labels.emplace(l, in.address);
      pending_labels.clear();
      f.instructions.push_back(std::move(in));
      continue;
    }

    // A label is one token ending in ':'; ".text.<symbol>:" opens a function.
    if (line.back() == ':' && line.find_first_of(" \t") == std::string_view::npos) {
      const std::string_view label = line.substr(0, line.size() - 1);
      if (label.starts_with(".text.")) {
        flush_labels_at_end();
        functions.emplace_back();
        functions.back().name = std::string(label.substr(6));
      } else {
        pending_labels.emplace_back(label);
      }
    }
  }
  flush_labels_at_end();

  for (auto& f : functions)
    for (auto& in : f.instructions)
      if (in.branch_label) {
        auto it = f.labels.find(*in.branch_label);
        if (it != f.labels.end()) in.branch_target = it->second;
      }
  return functions;
}

std::vector<Loop> find_loops(const SassFunction& function) {
  std::vector<Loop> loops;
  for (const auto& in : function.instructions)
    if (in.branch_target && *in.branch_target <= in.address) {
      const Loop loop{*in.branch_target, in.address};
      const bool seen = std::any_of(loops.begin(), loops.end(),
                                    [&](const Loop& l) { return l.start == loop.start && l.end == loop.end; });
      if (!seen) loops.push_back(loop);
    }
  return loops;
}

void InstrCounts::add(const SassInstruction& in, std::uint64_t times) {
  total += times;
  by_opcode[in.base] += times;
  by_class[static_cast<std::size_t>(in.klass)] += times;
}

void InstrCounts::add(const InstrCounts& other, std::uint64_t times) {
  total += other.total * times;
  for (const auto& [op, n] : other.by_opcode) by_opcode[op] += n * times;
  for (std::size_t c = 0; c < kInstrClassCount; ++c) by_class[c] += other.by_class[c] * times;
}

InstrCounts count_loop(const SassFunction& function, const Loop& loop) {
  InstrCounts counts;
  for (const auto& in : function.instructions)
    if (in.address >= loop.start && in.address <= loop.end) counts.add(in);
  return counts;
}

std::uint64_t count_mma_one_side(const SassFunction& function, const Loop& loop) {
  std::uint64_t unguarded = 0;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> sides;  // predicate -> (@P, @!P)
  for (const auto& in : function.instructions) {
    if (in.address < loop.start || in.address > loop.end || in.klass != InstrClass::mma) continue;
    if (in.predicate.empty() || in.predicate == "@PT") {
      ++unguarded;
    } else if (in.predicate.starts_with("@!")) {
      ++sides[in.predicate.substr(2)].second;
    } else {
      ++sides[in.predicate.substr(1)].first;
    }
  }
  for (const auto& [predicate, n] : sides) unguarded += std::max(n.first, n.second);
  return unguarded;
}

bool is_warpgroup_mma(std::string_view base) {
  return base == "HGMMA" || base == "QGMMA" || base == "IGMMA" || base == "BGMMA";
}

std::optional<Loop> find_main_loop(const SassFunction& function, const std::vector<Loop>& loops) {
  // Warpgroup mma's (HGMMA, QGMMA) where any loop has them: a kernel with a wgmma main loop keeps an
  // mma.sync one for what the wgmma path does not take (the grouped GEMM's experts whose scales
  // cannot be folded), with more, smaller mma's. Counted in MACs: the grouped GEMM keeps a wgmma
  // loop per N (the tile's rows, and the quarter and half of them that a tile with fewer rows
  // takes), with as many wgmma's each, and the whole tile's is its main loop.
  auto warpgroup_macs = [&](const Loop& loop) {
    std::uint64_t macs = 0;
    for (const auto& in : function.instructions)
      if (in.address >= loop.start && in.address <= loop.end && in.klass == InstrClass::mma && is_warpgroup_mma(in.base))
        macs += static_cast<std::uint64_t>(mma_macs_per_warp_instruction(in.opcode).value_or(1));
    return macs;
  };
  bool any_warpgroup = false;
  for (const Loop& loop : loops) any_warpgroup = any_warpgroup || warpgroup_macs(loop) > 0;
  std::optional<Loop> best;
  std::uint64_t best_mma = 0;
  for (const Loop& loop : loops) {
    const std::uint64_t mma = any_warpgroup ? warpgroup_macs(loop) : count_loop(function, loop).of(InstrClass::mma);
    if (mma == 0) continue;
    // More mma; or as many in a smaller range (the inner loop); or, to be deterministic, earlier.
    const bool smaller =
        best && (loop.size() < best->size() || (loop.size() == best->size() && loop.start < best->start));
    const bool better = mma > best_mma || (mma == best_mma && smaller);
    if (better) {
      best = loop;
      best_mma = mma;
    }
  }
  return best;
}

std::optional<Loop> enclosing_loop(const std::vector<Loop>& loops, const Loop& inner) {
  std::optional<Loop> best;
  for (const Loop& loop : loops) {
    const bool same = loop.start == inner.start && loop.end == inner.end;
    if (same || !loop.contains(inner)) continue;
    if (!best || loop.size() < best->size()) best = loop;
  }
  return best;
}

std::optional<double> mma_macs_per_warp_instruction(std::string_view opcode) {
  std::vector<std::string_view> fields;
  for (std::size_t pos = 0; pos <= opcode.size();) {
    const std::size_t dot = std::min(opcode.find('.', pos), opcode.size());
    fields.push_back(opcode.substr(pos, dot - pos));
    pos = dot + 1;
  }
  for (std::size_t i = 1; i < fields.size(); ++i) {
    const std::string_view f = fields[i];
    // Warpgroup shapes "64x128x16": one instruction per warp of the 4 that issue it.
    if (const std::size_t x1 = f.find('x'); x1 != std::string_view::npos) {
      const std::size_t x2 = f.find('x', x1 + 1);
      if (x2 == std::string_view::npos) continue;
      const auto m = f.substr(0, x1), n = f.substr(x1 + 1, x2 - x1 - 1), k = f.substr(x2 + 1);
      if (!all_digits(m) || !all_digits(n) || !all_digits(k)) continue;
      return std::stod(std::string(m)) * std::stod(std::string(n)) * std::stod(std::string(k)) / 4;
    }
    if (!all_digits(f) || f.size() < 3) continue;
    // Warp shapes "16816" (m16 n8 k16), "1688", "16832", "16864"; "884" (m8 n8 k4).
    if (f.starts_with("168")) return 16.0 * 8 * std::stod(std::string(f.substr(3)));
    if (f.starts_with("88")) return 8.0 * 8 * std::stod(std::string(f.substr(2)));
  }
  return std::nullopt;
}

namespace {

// Instructions of `outer` inside some loop nested in it, other than `skip` (and its own nested loops).
std::uint64_t count_in_other_nested_loops(const SassFunction& function, const std::vector<Loop>& loops,
                                          const Loop& outer, const Loop& skip) {
  auto same = [](const Loop& a, const Loop& b) { return a.start == b.start && a.end == b.end; };
  std::uint64_t n = 0;
  for (const auto& in : function.instructions) {
    if (in.address < outer.start || in.address > outer.end) continue;
    if (!same(skip, outer) && in.address >= skip.start && in.address <= skip.end) continue;
    const bool nested = std::any_of(loops.begin(), loops.end(), [&](const Loop& l) {
      return !same(l, outer) && outer.contains(l) && in.address >= l.start && in.address <= l.end;
    });
    if (nested) ++n;
  }
  return n;
}

// The compiler kept an inner loop over part of a stage (e.g. the k32 steps of a bk 64 stage):
// the main loop's iteration is 1/r of a stage. Where every mma of the enclosing (stage) loop is
// in it, one stage costs the enclosing body once plus the inner body r - 1 more times. Sets the
// counted loop of `a` and returns true when that is the case.
bool count_stage_loop(const SassFunction& function, const std::vector<Loop>& loops, MainLoopAnalysis& a) {
  const double trips = 1 / a.unroll_raw;
  const std::optional<Loop> outer = enclosing_loop(loops, a.main);
  if (a.unroll_raw >= 1 || std::abs(trips - std::round(trips)) > 1e-6 || !outer) return false;
  const InstrCounts outer_counts = count_loop(function, *outer);
  if (count_mma_one_side(function, *outer) != a.unroll_mma) return false;
  a.inner_trips = static_cast<std::uint32_t>(std::round(trips));
  a.stages = 1;
  a.counted = *outer;
  a.counts = outer_counts;
  a.counts.add(a.main_counts, a.inner_trips - 1);
  a.note = fmt::format(
      "the main loop [{:#x}, {:#x}] holds {} mma, 1/{} of a stage's {} per warp: an inner loop over part of a stage. "
      "Counted its enclosing loop [{:#x}, {:#x}] ({} instructions) with the inner body {} times",
      a.main.start, a.main.end, a.unroll_mma, a.inner_trips, a.mma_per_stage, outer->start,
      outer->end, outer_counts.total, a.inner_trips);
  return true;
}

}  // namespace

std::optional<MainLoopAnalysis> analyze_main_loop(const SassFunction& function, double macs_per_stage_per_warp) {
  const std::vector<Loop> loops = find_loops(function);
  const std::optional<Loop> main = find_main_loop(function, loops);
  if (!main) return std::nullopt;

  MainLoopAnalysis a;
  a.main = *main;
  a.main_counts = count_loop(function, *main);
  std::string first_mma;
  bool warpgroup = false;
  for (const auto& in : function.instructions)
    if (in.address >= main->start && in.address <= main->end && in.klass == InstrClass::mma) {
      first_mma = in.opcode;
      warpgroup = is_warpgroup_mma(in.base);
      a.rate_macs = in.base == "QGMMA" ? 4096 : 2048;
      break;
    }
  std::optional<double> macs = mma_macs_per_warp_instruction(first_mma);
  if (!macs) {
    a.warning =
        fmt::format("the shape of {} is unknown; assumed m16n8k16 (2048 MACs per warp-instruction). ", first_mma);
    macs = 2048;
  }
  a.mma_per_stage = macs_per_stage_per_warp / *macs;
  a.mma_macs = *macs;
  a.warpgroup_mma = warpgroup;
  a.unroll_mma = count_mma_one_side(function, *main);
  a.unroll_raw = static_cast<double>(a.unroll_mma) / a.mma_per_stage;
  auto near_integer = [](double x) { return x >= 0.5 && std::abs(x - std::round(x)) < 1e-6; };

  a.counted = *main;
  a.counts = a.main_counts;
  if (near_integer(a.unroll_raw)) {
    a.stages = static_cast<std::uint32_t>(std::round(a.unroll_raw));
  } else if (!count_stage_loop(function, loops, a)) {
    a.stages = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(std::lround(a.unroll_raw)));
    a.warning += fmt::format("unroll factor {:.3f} (mma {} / expected {} per stage per warp) is not a positive "
                             "integer; used {}",
                             a.unroll_raw, a.unroll_mma, a.mma_per_stage, a.stages);
  }
  a.in_other_nested_loops = count_in_other_nested_loops(function, loops, a.counted, a.main);
  return a;
}

}  // namespace moejit::perf
