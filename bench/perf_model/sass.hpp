#pragma once
// Reading `nvdisasm -c` output: instructions, labels and branches of each function, the class
// of every opcode, the loops (backward branches), and the kernel's main loop: the innermost loop
// holding the most mma instructions, with the unroll factor that says how many pipeline stages
// one of its iterations covers.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moejit::perf {

// ---- Instructions ---------------------------------------------------------------------------

// What an instruction spends its issue slot on; the order is the order of reports.
enum class InstrClass : std::uint8_t {
  mma,            // tensor core: HMMA, IMMA, HGMMA, QMMA, OMMA, UTC*MMA, ...
  shared_load,    // LDS, LDSM
  async_copy,     // global -> shared without registers: LDGSTS, UBLKCP, UTMALDG, ...
  global_memory,  // LDG, STG, generic LD/ST, global atomics and reductions
  shared_store,   // STS, STSM
  local_memory,   // LDL, STL: register spills (should be none)
  integer,        // IMAD, IADD3, LOP3, SHF, PRMT, LEA, ISETP, SEL, MOV, ... (and their U* forms)
  floating,       // FFMA, FMUL, FADD, HFMA2, HMUL2, HADD2, F2F, F2FP, MUFU, ...
  control,        // BRA, BAR, DEPBAR, WARPSYNC, BSSY, BSYNC, EXIT, NOP, ...
  other,          // constant loads, special registers, shuffles, votes, ...
};
inline constexpr std::size_t kInstrClassCount = 10;
std::string_view to_string(InstrClass c);

// The class of an opcode's base name ("HMMA", "LDS", "UIADD3").
InstrClass classify_opcode(std::string_view base);

struct SassInstruction {
  std::uint32_t address = 0;     // byte offset in the function
  std::string predicate;         // "@P0", "@!PT", or empty
  std::string opcode;            // with modifiers: "HMMA.16816.F32.BF16"
  std::string base;              // before the first '.': "HMMA"
  std::string operands;          // the rest, up to the ';'
  std::optional<std::string> branch_label;    // BRA/JMP target label, e.g. ".L_x_5"
  std::optional<std::uint32_t> branch_target;  // its address, once labels are resolved
  InstrClass klass = InstrClass::other;

  bool is_branch() const { return branch_target.has_value(); }
};

struct SassFunction {
  std::string name;  // the symbol, e.g. the lowered kernel name
  std::vector<SassInstruction> instructions;
  std::map<std::string, std::uint32_t> labels;  // label -> address of the instruction after it
};

// Every function of a disassembly, in order. Lines that are neither instructions nor labels
// (directives, comments, blank lines) are skipped. A branch to a label the function lacks
// keeps branch_target empty.
std::vector<SassFunction> parse_sass(std::string_view text);

// ---- Loops ----------------------------------------------------------------------------------

// A backward branch: the body is every instruction at addresses [start, end], end being the
// branch itself. Two back edges to one header are two loops, the longer containing the shorter.
struct Loop {
  std::uint32_t start = 0, end = 0;
  std::uint32_t size() const { return end - start; }
  bool contains(const Loop& other) const { return start <= other.start && other.end <= end; }
};

std::vector<Loop> find_loops(const SassFunction& function);

// Instructions of a body, by opcode base and by class.
struct InstrCounts {
  std::uint64_t total = 0;
  std::map<std::string, std::uint64_t> by_opcode;
  std::array<std::uint64_t, kInstrClassCount> by_class{};

  std::uint64_t of(InstrClass c) const { return by_class[static_cast<std::size_t>(c)]; }
  void add(const SassInstruction& instruction, std::uint64_t times = 1);
  void add(const InstrCounts& other, std::uint64_t times = 1);
};

// Every instruction of `loop`'s body counted once (the straight-line count).
InstrCounts count_loop(const SassFunction& function, const Loop& loop);

// The mma of `loop`'s body, those guarded by a predicate and by its negation (@P0 and @!P0: the
// two sides of an if-converted branch) counted as one side: unguarded ones plus, per predicate,
// the larger of its two sides.
std::uint64_t count_mma_one_side(const SassFunction& function, const Loop& loop);

// The innermost loop with the most mma instructions: among the loops with the largest mma
// count, the one with the smallest range; where some loop holds warpgroup mma's (HGMMA for
// 16-bit types, QGMMA for fp8: is_warpgroup_mma), only those count, by their MACs (the loop of
// the widest N among loops of as many). nullopt when no loop holds an mma.
bool is_warpgroup_mma(std::string_view base);
std::optional<Loop> find_main_loop(const SassFunction& function, const std::vector<Loop>& loops);

// The smallest loop strictly containing `inner`, if any.
std::optional<Loop> enclosing_loop(const std::vector<Loop>& loops, const Loop& inner);

// ---- The main loop as the model sees it ------------------------------------------------------

// Multiply-accumulates one warp-instruction of an mma opcode performs for its warp:
// "HMMA.16816..." is m16 n8 k16 = 2048; "IMMA.16832..." 4096; "HGMMA.64x128x16..." (or
// "QGMMA.64x128x32...") is issued by the 4 warps of a warpgroup, 64*128*16 / 4 each. nullopt for a shape it cannot read.
std::optional<double> mma_macs_per_warp_instruction(std::string_view opcode);

// The loop one pipeline stage iteration runs, and what it costs.
struct MainLoopAnalysis {
  Loop main;                  // innermost loop with the most mma
  InstrCounts main_counts;    // its body, each instruction once
  double mma_per_stage = 0;   // expected mma per stage per warp: bm bn bk / warps / MACs per mma
  double mma_macs = 2048;     // MACs per warp of one of its mma (an HGMMA's warpgroup shape / 4)
  bool warpgroup_mma = false; // the mma are wgmma's (HGMMA, QGMMA): the tensor rate is the wgmma one
  // wgmma's: the MACs one m16n8k16 equivalent of the profile's wgmma rate stands for, 2048, or
  // 4096 for fp8 (QGMMA), whose dense rate is twice 16-bit's (H100 and H200: 1979 against 989
  // TFLOPS).
  double rate_macs = 2048;
  // The main loop's mma with each if-converted pair counted once: where the compiler turned a
  // branch into @P / @!P predicated copies, every copy issues, but only one side's products
  // belong to the stage.
  std::uint64_t unroll_mma = 0;
  double unroll_raw = 0;      // unroll_mma / mma_per_stage

  // What one iteration of the counted loop does: `stages` pipeline stages (the unroll factor
  // u) in `counts` instructions. Usually the main loop itself; when the main loop is an inner
  // loop over part of a stage (unroll_raw = 1/r), its enclosing loop with the inner body
  // counted r times.
  Loop counted;
  std::uint32_t inner_trips = 1;  // r: how often the main loop runs per counted iteration
  std::uint32_t stages = 1;       // u
  InstrCounts counts;
  // Instructions of the counted loop that sit in other loops nested in it (copy loops, say),
  // counted once like the rest: the part of the count whose real trip count is unknown.
  std::uint64_t in_other_nested_loops = 0;

  std::string note;     // how the counted loop was derived, when not the main loop itself
  std::string warning;  // u was not a positive integer and had to be rounded
};

// `macs_per_stage_per_warp` = bm bn bk / warps. nullopt when the function has no loop with mma.
std::optional<MainLoopAnalysis> analyze_main_loop(const SassFunction& function, double macs_per_stage_per_warp);

}  // namespace moejit::perf
