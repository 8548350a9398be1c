// The SASS reader and the main-loop finder on small hand-written disassemblies in nvdisasm's
// `-c` format.

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "bench/perf_model/sass.hpp"

using namespace moejit::perf;

namespace {

// A function in nvdisasm's layout from a short listing: one instruction (without the ';') or
// label (ending in ':') per line; instructions get addresses 0x00, 0x10, ...; what follows "//"
// on a line is a comment for the reader.
std::string function_text(const std::string& name, std::string_view listing) {
  std::string text = fmt::format("\t.section\t.text.{0},\"ax\",@progbits\n\t.align\t128\n.text.{0}:\n"
                                 "        .type           {0},@function\n{0}:\n",
                                 name);
  std::uint32_t address = 0;
  while (!listing.empty()) {
    const std::size_t eol = std::min(listing.find('\n'), listing.size());
    std::string_view line = listing.substr(0, eol);
    listing.remove_prefix(std::min(eol + 1, listing.size()));
    line = line.substr(0, line.find("//"));
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    while (!line.empty() && line.back() == ' ') line.remove_suffix(1);
    if (line.empty()) continue;
    if (line.ends_with(':')) {
      text += fmt::format("{}\n", line);
      continue;
    }
    text += fmt::format("        /*{:04x}*/                   {} ;\n", address, line);
    address += 16;
  }
  return text;
}

SassFunction only_function(const std::string& text) {
  const auto functions = parse_sass(text);
  REQUIRE(functions.size() == 1);
  return functions.front();
}

}  // namespace

TEST_CASE("parse_sass reads nvdisasm's instructions, predicates, labels and branch targets") {
  // Verbatim from `nvdisasm -c` of a moejit grouped GEMM kernel (sm_90a), trimmed.
  const std::string text = R"(	.target	sm_90a

	.elftype	@"ET_EXEC"


//--------------------- .text._Z4kernv --------------------------
	.section	.text._Z4kernv,"ax",@progbits
	.align	128
.text._Z4kernv:
        .weak           _Z4kernv
        .type           _Z4kernv,@function
        .size           _Z4kernv,(.L_x_117 - _Z4kernv)
        .other          _Z4kernv,@"STO_CUDA_ENTRY STV_DEFAULT"
_Z4kernv:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   LDG.E R5, desc[UR8][R4.64] ;
        /*0020*/                   ISETP.GE.U32.AND P0, PT, R2, R5, PT ;
.L_x_112:
        /*0030*/               @P0 EXIT ;
        /*0040*/                   BSSY B0, `(.L_x_0) ;
.L_x_4:
        /*0050*/                   HMMA.16816.F32.BF16 R12, R24.reuse, R12, RZ ;
        /*0060*/              @!P0 BRA `(.L_x_4) ;
.L_x_0:
        /*0070*/                   EXIT ;
.L_x_117:
)";
  const SassFunction f = only_function(text);
  CHECK(f.name == "_Z4kernv");
  REQUIRE(f.instructions.size() == 8);

  const SassInstruction& ldg = f.instructions[1];
  CHECK(ldg.address == 0x10);
  CHECK(ldg.opcode == "LDG.E");
  CHECK(ldg.base == "LDG");
  CHECK(ldg.operands == "R5, desc[UR8][R4.64]");
  CHECK(ldg.predicate.empty());
  CHECK(ldg.klass == InstrClass::global_memory);

  const SassInstruction& exit = f.instructions[3];
  CHECK(exit.predicate == "@P0");
  CHECK(exit.base == "EXIT");
  CHECK_FALSE(exit.is_branch());

  // BSSY names a label but does not jump: not a branch.
  CHECK_FALSE(f.instructions[4].is_branch());

  const SassInstruction& bra = f.instructions[6];
  CHECK(bra.predicate == "@!P0");
  REQUIRE(bra.branch_label.has_value());
  CHECK(*bra.branch_label == ".L_x_4");
  REQUIRE(bra.branch_target.has_value());
  CHECK(*bra.branch_target == 0x50);

  CHECK(f.labels.at(".L_x_112") == 0x30);
  CHECK(f.labels.at(".L_x_0") == 0x70);
  CHECK(f.labels.at("_Z4kernv") == 0x0);
  CHECK(f.labels.at(".L_x_117") == 0x80);  // the end marker: one past the last instruction
  CHECK(f.instructions[5].klass == InstrClass::mma);
}

TEST_CASE("parse_sass splits functions and resolves each one's labels in its own addresses") {
  const std::string first = function_text("first", R"(
        MOV R0, RZ                                     // 0x00
.L_x_0:
        IADD3 R0, R0, 0x1, RZ                          // 0x10
        @P0 BRA `(.L_x_0)                              // 0x20
        EXIT                                           // 0x30
)");
  const std::string second = function_text("second", R"(
.L_x_0:
        NOP                                            // 0x00
        BRA `(.L_x_0)                                  // 0x10
)");
  const auto functions = parse_sass(first + second);
  REQUIRE(functions.size() == 2);
  CHECK(functions[0].name == "first");
  CHECK(functions[1].name == "second");
  CHECK(*functions[0].instructions[2].branch_target == 0x10);
  CHECK(*functions[1].instructions[1].branch_target == 0x0);
  CHECK(find_loops(functions[0]).size() == 1);
  CHECK(find_loops(functions[1]).size() == 1);
}

TEST_CASE("a branch to a bare address and a branch to an unknown label") {
  const SassFunction f = only_function(function_text("k", R"(
        NOP                                            // 0x00
        HMMA.16816.F32.BF16 R0, R4, R8, R0             // 0x10
        BRA 0x10                                       // 0x20
        BRA `(.L_x_nowhere)                            // 0x30
)"));
  CHECK(*f.instructions[2].branch_target == 0x10);
  CHECK_FALSE(f.instructions[3].branch_target.has_value());
  const auto loops = find_loops(f);
  REQUIRE(loops.size() == 1);
  CHECK(loops[0].start == 0x10);
  CHECK(loops[0].end == 0x20);
}

TEST_CASE("classify_opcode puts each opcode in its class") {
  for (auto op : {"HMMA", "IMMA", "HGMMA", "QGMMA", "QMMA", "OMMA", "UTCHMMA"}) CHECK(classify_opcode(op) == InstrClass::mma);
  for (auto op : {"LDS", "LDSM"}) CHECK(classify_opcode(op) == InstrClass::shared_load);
  for (auto op : {"LDGSTS", "UBLKCP", "UTMALDG"}) CHECK(classify_opcode(op) == InstrClass::async_copy);
  for (auto op : {"LDG", "STG", "RED", "ATOMG"}) CHECK(classify_opcode(op) == InstrClass::global_memory);
  for (auto op : {"STS", "STSM"}) CHECK(classify_opcode(op) == InstrClass::shared_store);
  for (auto op : {"LDL", "STL"}) CHECK(classify_opcode(op) == InstrClass::local_memory);
  for (auto op : {"IMAD", "IADD3", "LOP3", "SHF", "PRMT", "LEA", "ISETP", "SEL", "MOV", "VIADD", "UIADD3", "ULOP3",
                  "UMOV", "CS2R"})
    CHECK(classify_opcode(op) == InstrClass::integer);
  for (auto op : {"FFMA", "FMUL", "FADD", "HFMA2", "HMUL2", "HADD2", "F2F", "F2FP", "MUFU"})
    CHECK(classify_opcode(op) == InstrClass::floating);
  for (auto op : {"BRA", "BAR", "DEPBAR", "LDGDEPBAR", "WARPSYNC", "BSSY", "BSYNC", "EXIT", "NOP"})
    CHECK(classify_opcode(op) == InstrClass::control);
  for (auto op : {"LDC", "ULDC", "S2R", "S2UR", "SHFL", "VOTE"}) CHECK(classify_opcode(op) == InstrClass::other);
}

TEST_CASE("mma_macs_per_warp_instruction reads the shape in the opcode") {
  CHECK(*mma_macs_per_warp_instruction("HMMA.16816.F32.BF16") == 16 * 8 * 16);
  CHECK(*mma_macs_per_warp_instruction("HMMA.1688.F32.TF32") == 16 * 8 * 8);
  CHECK(*mma_macs_per_warp_instruction("IMMA.16832.S8.S8") == 16 * 8 * 32);
  CHECK(*mma_macs_per_warp_instruction("QMMA.16832.F32.E4M3.E4M3") == 16 * 8 * 32);
  CHECK(*mma_macs_per_warp_instruction("OMMA.SF.16864.F32.E2M1.E2M1.UE8M0") == 16 * 8 * 64);
  CHECK(*mma_macs_per_warp_instruction("DMMA.884") == 8 * 8 * 4);
  // A warpgroup instruction: the 4 warps issuing it share the 64 x 128 x 16 product.
  CHECK(*mma_macs_per_warp_instruction("HGMMA.64x128x16.F32.BF16") == 64 * 128 * 16 / 4);
  CHECK(*mma_macs_per_warp_instruction("QGMMA.64x64x32.F32.E4M3.E4M3") == 64 * 64 * 32 / 4);
  CHECK_FALSE(mma_macs_per_warp_instruction("UTCHMMA.2CTA").has_value());
}

TEST_CASE("nested loops: the main loop is the innermost with the most mma") {
  // The outer loop [0x10, 0x60] holds the inner [0x20, 0x40] with 2 HMMA, and one of its own: 3 > 2.
  const SassFunction outer_wins = only_function(function_text("k", R"(
        MOV R0, RZ                                     // 0x00
.L_x_1:
        IADD3 R0, R0, 0x1, RZ                          // 0x10
.L_x_2:
        HMMA.16816.F32.BF16 R4, R8, R12, R4            // 0x20
        HMMA.16816.F32.BF16 R4, R8, R14, R4            // 0x30
        @P1 BRA `(.L_x_2)                              // 0x40
        HMMA.16816.F32.BF16 R4, R8, R16, R4            // 0x50
        @P0 BRA `(.L_x_1)                              // 0x60
        EXIT                                           // 0x70
)"));
  auto loops = find_loops(outer_wins);
  REQUIRE(loops.size() == 2);
  auto main = find_main_loop(outer_wins, loops);
  REQUIRE(main.has_value());
  CHECK(main->start == 0x10);
  CHECK(main->end == 0x60);
  CHECK(count_loop(outer_wins, *main).total == 6);
  CHECK(count_loop(outer_wins, *main).of(InstrClass::mma) == 3);

  // Every mma in the inner loop: both hold 2, the smaller range wins.
  const SassFunction inner_wins = only_function(function_text("k", R"(
        MOV R0, RZ                                     // 0x00
.L_x_1:
        IADD3 R0, R0, 0x1, RZ                          // 0x10
.L_x_2:
        HMMA.16816.F32.BF16 R4, R8, R12, R4            // 0x20
        HMMA.16816.F32.BF16 R4, R8, R14, R4            // 0x30
        @P1 BRA `(.L_x_2)                              // 0x40
        FFMA R1, R2, R3, R1                            // 0x50
        @P0 BRA `(.L_x_1)                              // 0x60
        EXIT                                           // 0x70
)"));
  loops = find_loops(inner_wins);
  main = find_main_loop(inner_wins, loops);
  REQUIRE(main.has_value());
  CHECK(main->start == 0x20);
  CHECK(main->end == 0x40);
  const auto outer = enclosing_loop(loops, *main);
  REQUIRE(outer.has_value());
  CHECK(outer->start == 0x10);
  CHECK(outer->end == 0x60);
  CHECK_FALSE(enclosing_loop(loops, *outer).has_value());
}

TEST_CASE("a kernel with a wgmma loop and an mma.sync loop: the wgmma loop is the main loop") {
  // The grouped GEMM's sm_90a prefill kernels: a wgmma main loop [0x10, 0x50] for the experts
  // whose scales fold into the fragments, an mma.sync one [0x70, 0xc0] with more (smaller) mma
  // for the rest.
  const SassFunction f = only_function(function_text("k", R"(
        MOV R0, RZ                                     // 0x00
.L_x_1:
        WARPGROUP.ARRIVE                               // 0x10
        HGMMA.64x128x16.F32.BF16 R24, R88, gdesc[UR16], R24 // 0x20
        HGMMA.64x128x16.F32.BF16 R24, R92, gdesc[UR16], R24, gsb0 // 0x30
        WARPGROUP.DEPBAR.LE gsb0, 0x1                  // 0x40
        @P0 BRA `(.L_x_1)                              // 0x50
        EXIT                                           // 0x60
.L_x_2:
        HMMA.16816.F32.BF16 R4, R8, R12, R4            // 0x70
        HMMA.16816.F32.BF16 R4, R8, R14, R4            // 0x80
        HMMA.16816.F32.BF16 R4, R8, R16, R4            // 0x90
        HMMA.16816.F32.BF16 R4, R8, R18, R4            // 0xa0
        IADD3 R0, R0, 0x1, RZ                          // 0xb0
        @P1 BRA `(.L_x_2)                              // 0xc0
        EXIT                                           // 0xd0
)"));
  const auto loops = find_loops(f);
  REQUIRE(loops.size() == 2);
  const auto main = find_main_loop(f, loops);
  REQUIRE(main.has_value());
  CHECK(main->start == 0x10);
  CHECK(main->end == 0x50);
  // bm bn bk / warps = 128 x 128 x 64 / 8 MACs per warp and stage: 4 HGMMA (32768 MACs a warp)
  // per stage, so the loop's 2 are half a stage; the analysis says they are wgmma's.
  const auto a = analyze_main_loop(f, 128.0 * 128 * 64 / 8);
  REQUIRE(a.has_value());
  CHECK(a->warpgroup_mma);
  CHECK(a->mma_macs == 64.0 * 128 * 16 / 4);
  CHECK(a->mma_per_stage == 4);
  CHECK(a->rate_macs == 2048);
}

TEST_CASE("wgmma loops of several N: the widest is the main loop") {
  // The grouped GEMM's wgmma tiles keep a main loop per N: a tile whose rows fit a quarter or
  // half of it runs the shorter wgmma's. As many wgmma's in each, the smaller loops first and
  // shorter; the whole tile's (N 128) is the main loop, and its wgmma's set the MACs.
  const SassFunction f = only_function(function_text("k", R"(
        MOV R0, RZ                                     // 0x00
.L_x_1:
        HGMMA.64x32x16.F32.BF16 R24, R88, gdesc[UR16], R24, gsb0 // 0x10
        @P0 BRA `(.L_x_1)                              // 0x20
.L_x_2:
        HGMMA.64x64x16.F32.BF16 R24, R88, gdesc[UR16], R24, gsb0 // 0x30
        @P1 BRA `(.L_x_2)                              // 0x40
.L_x_3:
        WARPGROUP.ARRIVE                               // 0x50
        HGMMA.64x128x16.F32.BF16 R24, R88, gdesc[UR16], R24, gsb0 // 0x60
        WARPGROUP.DEPBAR.LE gsb0, 0x1                  // 0x70
        @P2 BRA `(.L_x_3)                              // 0x80
        EXIT                                           // 0x90
)"));
  const auto loops = find_loops(f);
  REQUIRE(loops.size() == 3);
  const auto main = find_main_loop(f, loops);
  REQUIRE(main.has_value());
  CHECK(main->start == 0x50);
  CHECK(main->end == 0x80);
  const auto a = analyze_main_loop(f, 128.0 * 128 * 64 / 8);
  REQUIRE(a.has_value());
  CHECK(a->mma_macs == 64.0 * 128 * 16 / 4);
  CHECK(a->mma_per_stage == 4);
}

TEST_CASE("an fp8 wgmma loop (QGMMA) is a warpgroup main loop as HGMMA's is") {
  // The W4A8 INT4 tiles: one m64n128k32 e4m3 wgmma per 32 k; an mma.sync loop beside it with
  // more mma's does not win.
  const SassFunction f = only_function(function_text("k", R"(
        MOV R0, RZ                                     // 0x00
.L_x_1:
        WARPGROUP.ARRIVE                               // 0x10
        QGMMA.64x128x32.F32.E4M3.E4M3 R24, R88, gdesc[UR16], R24, gsb0 // 0x20
        WARPGROUP.DEPBAR.LE gsb0, 0x1                  // 0x30
        @P0 BRA `(.L_x_1)                              // 0x40
        EXIT                                           // 0x50
.L_x_2:
        HMMA.16816.F32.BF16 R4, R8, R12, R4            // 0x60
        HMMA.16816.F32.BF16 R4, R8, R14, R4            // 0x70
        IADD3 R0, R0, 0x1, RZ                          // 0x80
        @P1 BRA `(.L_x_2)                              // 0x90
        EXIT                                           // 0xa0
)"));
  const auto loops = find_loops(f);
  REQUIRE(loops.size() == 2);
  const auto main = find_main_loop(f, loops);
  REQUIRE(main.has_value());
  CHECK(main->start == 0x10);
  CHECK(main->end == 0x40);
  // 128 x 128 x 128 / 8 MACs per warp and stage: 4 QGMMA of 64 x 128 x 32 / 4 each.
  const auto a = analyze_main_loop(f, 128.0 * 128 * 128 / 8);
  REQUIRE(a.has_value());
  CHECK(a->warpgroup_mma);
  CHECK(a->mma_macs == 64.0 * 128 * 32 / 4);
  CHECK(a->mma_per_stage == 4);
  CHECK(a->rate_macs == 4096);  // fp8 wgmma: twice 16-bit's MACs per clock
}

TEST_CASE("a main loop with an inner copy loop counts the copy loop's body once") {
  // The stage loop [0x10, 0x80] holds a copy loop [0x20, 0x40] (no mma) that runs an unknown
  // number of times.
  const SassFunction f = only_function(function_text("k", R"(
        MOV R0, RZ                                     // 0x00
.L_x_1:
        BAR.SYNC.DEFER_BLOCKING 0x0                    // 0x10
.L_x_2:
        LDGSTS.E.BYPASS.128 [R2], desc[UR4][R4.64]     // 0x20
        IADD3 R2, R2, 0x10, RZ                         // 0x30
        @P1 BRA `(.L_x_2)                              // 0x40
        LDSM.16.M88.4 R8, [R3]                         // 0x50
        LDS.128 R12, [R6]                              // 0x60
        HMMA.16816.F32.BF16 R16, R8, R12, R16          // 0x70
        @P0 BRA `(.L_x_1)                              // 0x80
        EXIT                                           // 0x90
)"));
  const auto loops = find_loops(f);
  const auto main = find_main_loop(f, loops);
  REQUIRE(main.has_value());
  CHECK(main->start == 0x10);
  CHECK(main->end == 0x80);
  const InstrCounts counts = count_loop(f, *main);
  CHECK(counts.total == 8);
  CHECK(counts.of(InstrClass::async_copy) == 1);
  CHECK(counts.of(InstrClass::shared_load) == 2);
  CHECK(counts.of(InstrClass::mma) == 1);
  CHECK(counts.of(InstrClass::control) == 3);  // BAR and two BRA
  CHECK(counts.by_opcode.at("BRA") == 2);

  // One stage per iteration (1 mma of 2048 MACs, a stage of 2048 MACs per warp).
  const auto a = analyze_main_loop(f, 2048);
  REQUIRE(a.has_value());
  CHECK(a->stages == 1);
  CHECK(a->counts.total == 8);
  CHECK(a->in_other_nested_loops == 3);  // the copy loop's LDGSTS, IADD3, BRA
  CHECK(a->warning.empty());
  CHECK(a->note.empty());
}

TEST_CASE("forward predicated branches and predicated exits are no loops") {
  const SassFunction f = only_function(function_text("k", R"(
        @P0 EXIT                                       // 0x00
        @P1 BRA `(.L_x_9)                              // 0x10
        HMMA.16816.F32.BF16 R4, R8, R12, R4            // 0x20
.L_x_9:
        @!P2 EXIT                                      // 0x30
        EXIT                                           // 0x40
)"));
  CHECK(*f.instructions[1].branch_target == 0x30);
  CHECK(find_loops(f).empty());
  CHECK_FALSE(find_main_loop(f, find_loops(f)).has_value());
}

TEST_CASE("a kernel without mma has no main loop") {
  const SassFunction f = only_function(function_text("align", R"(
.L_x_0:
        LDG.E R2, desc[UR4][R4.64]                     // 0x00
        ATOMS.ADD R3, [R2], R6                         // 0x10
        @P0 BRA `(.L_x_0)                              // 0x20
        EXIT                                           // 0x30
)"));
  const auto loops = find_loops(f);
  CHECK(loops.size() == 1);
  CHECK_FALSE(find_main_loop(f, loops).has_value());
  CHECK_FALSE(analyze_main_loop(f, 2048).has_value());
}

TEST_CASE("the unroll factor: whole stages, a part of a stage, and a fraction that must be rounded") {
  // Four m16n8k16 mma per iteration of [0x00, 0x40].
  const SassFunction four = only_function(function_text("k", R"(
.L_x_0:
        HMMA.16816.F32.BF16 R4, R8, R12, R4            // 0x00
        HMMA.16816.F32.BF16 R4, R8, R12, R4            // 0x10
        HMMA.16816.F32.BF16 R4, R8, R12, R4            // 0x20
        HMMA.16816.F32.BF16 R4, R8, R12, R4            // 0x30
        @P0 BRA `(.L_x_0)                              // 0x40
        EXIT                                           // 0x50
)"));
  // A stage of 2 mma per warp (bm bn bk / warps = 4096 MACs): two stages per iteration.
  auto a = analyze_main_loop(four, 4096);
  REQUIRE(a.has_value());
  CHECK(a->mma_per_stage == 2);
  CHECK(a->unroll_raw == 2);
  CHECK(a->stages == 2);
  CHECK(a->counts.total == 5);
  CHECK(a->warning.empty());

  // A stage of 3 mma: 4 / 3 is no integer, rounded to 1 with a warning.
  a = analyze_main_loop(four, 3 * 2048);
  REQUIRE(a.has_value());
  CHECK(a->unroll_raw == doctest::Approx(4.0 / 3));
  CHECK(a->stages == 1);
  CHECK_FALSE(a->warning.empty());

  // A stage of 8 mma and no enclosing loop: 1/2, rounded up to 1, with a warning.
  a = analyze_main_loop(four, 8 * 2048);
  REQUIRE(a.has_value());
  CHECK(a->unroll_raw == 0.5);
  CHECK(a->stages == 1);
  CHECK(a->counted.start == a->main.start);
  CHECK_FALSE(a->warning.empty());
}

TEST_CASE("a main loop over half a stage is counted through its enclosing stage loop") {
  // The shape of the decode kernel of commit da5d958: the stage loop [0x00, 0x90] (barrier,
  // copies) around an inner loop over the stage's two k32 steps [0x30, 0x70] holding every mma.
  const SassFunction f = only_function(function_text("k", R"(
.L_x_75:
        DEPBAR.LE SB0, 0x2                             // 0x00
        BAR.SYNC.DEFER_BLOCKING 0x0                    // 0x10
        LDGSTS.E.BYPASS.128 [R2], desc[UR4][R4.64]     // 0x20
.L_x_74:
        LDS.128 R12, [R6]                              // 0x30
        LOP3.LUT R13, R12, 0xf, RZ, 0xc0, !PT          // 0x40
        HMMA.16816.F32.BF16 R16, R8, R12, R16          // 0x50
        HMMA.16816.F32.BF16 R20, R8, R14, R20          // 0x60
        @!P0 BRA `(.L_x_74)                            // 0x70
        VIADD R46, R46, 0x1                            // 0x80
        @!P1 BRA `(.L_x_75)                            // 0x90
        EXIT                                           // 0xa0
)"));
  // A stage of bm 16 x bn 32 x bk 16 on one warp = 8192 MACs = 4 mma: the inner loop's 2 are half.
  const auto a = analyze_main_loop(f, 4 * 2048);
  REQUIRE(a.has_value());
  CHECK(a->main.start == 0x30);
  CHECK(a->main.end == 0x70);
  CHECK(a->main_counts.total == 5);
  CHECK(a->unroll_raw == 0.5);
  CHECK(a->counted.start == 0x00);
  CHECK(a->counted.end == 0x90);
  CHECK(a->inner_trips == 2);
  CHECK(a->stages == 1);
  // The stage loop's 10 instructions, plus the inner body's 5 once more.
  CHECK(a->counts.total == 15);
  CHECK(a->counts.of(InstrClass::mma) == 4);
  CHECK(a->counts.of(InstrClass::shared_load) == 2);
  CHECK(a->in_other_nested_loops == 0);
  CHECK(a->warning.empty());
  CHECK_FALSE(a->note.empty());
}

TEST_CASE("if-converted mma under @P and @!P count once for the unroll factor and twice as instructions") {
  // The prefill kernels of commit 3577ca3 start each group's sums from zero under !P0 and
  // accumulate under P0: both copies issue, one stage's products are done once.
  const SassFunction f = only_function(function_text("k", R"(
.L_x_3:
        @P0 HMMA.16816.F32.BF16 R48, R108, R136, R48   // 0x00
        @P0 HMMA.16816.F32.BF16 R52, R108, R138, R52   // 0x10
        @!P0 HMMA.16816.F32.BF16 R48, R108, R136, RZ   // 0x20
        @!P0 HMMA.16816.F32.BF16 R52, R108, R138, RZ   // 0x30
        HMMA.16816.F32.BF16 R48, R120, R140, R48       // 0x40
        @PT HMMA.16816.F32.BF16 R52, R120, R142, R52   // 0x50
        @!P1 BRA `(.L_x_3)                             // 0x60
)"));
  const auto loops = find_loops(f);
  REQUIRE(loops.size() == 1);
  CHECK(count_mma_one_side(f, loops[0]) == 4);
  // A stage of 4 mma per warp: one stage per iteration, 7 instructions issued for it.
  const auto a = analyze_main_loop(f, 4 * 2048);
  REQUIRE(a.has_value());
  CHECK(a->unroll_mma == 4);
  CHECK(a->unroll_raw == 1);
  CHECK(a->stages == 1);
  CHECK(a->counts.total == 7);
  CHECK(a->counts.of(InstrClass::mma) == 6);
  CHECK(a->warning.empty());
}
