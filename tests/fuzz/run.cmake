# cmake -P script behind the ctest "fuzz: ...": finds a clang++ that links libFuzzer, builds this
# directory's project with it and runs every fuzz target (fuzz_targets.txt) for SECONDS from its
# seed corpus (corpus/<target>/, copied so the repository is never written). Any finding (crash,
# sanitizer report, leak, timeout, out of memory) fails the test and names the saved input.
# Without clang or libFuzzer it prints "fuzz test skipped: <why>" (the test's skip pattern), or
# fails where REQUIRE (MOEJIT_REQUIRE_TOOLCHAIN) is on.
#
# Variables: SOURCE_DIR (tests/fuzz), WORK (scratch directory), GENERATOR, SECONDS (per target),
# REQUIRE, CLANGXX (optional: the clang++ to use), BUILD_DIR (optional: an existing build of this
# project to reuse; default WORK/build).
cmake_minimum_required(VERSION 3.25)

macro(toolchain_missing why)
  if(REQUIRE)
    message(FATAL_ERROR "${why}; MOEJIT_REQUIRE_TOOLCHAIN is ON (install clang and libclang-rt-dev: .ci/install-deps)")
  endif()
  message("fuzz test skipped: ${why}")
  return()
endmacro()

if(NOT BUILD_DIR)
  set(BUILD_DIR ${WORK}/build)
endif()
if(NOT CLANGXX)
  find_program(CLANGXX NAMES clang++ clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++-14)
endif()
if(NOT CLANGXX)
  toolchain_missing("no clang++ on PATH (libFuzzer comes with clang)")
endif()

# libFuzzer is a separate package (libclang-rt-dev) on Debian: link a probe to find out.
file(MAKE_DIRECTORY ${WORK}/probe)
file(WRITE ${WORK}/probe/probe.cpp
     "#include <cstddef>\n#include <cstdint>\nextern \"C\" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }\n")
execute_process(COMMAND ${CLANGXX} -fsanitize=fuzzer,address,undefined ${WORK}/probe/probe.cpp -o ${WORK}/probe/probe
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  toolchain_missing("${CLANGXX} cannot link a libFuzzer target (libclang-rt-dev missing?): ${out}")
endif()

execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BUILD_DIR} -G ${GENERATOR}
                        -DCMAKE_CXX_COMPILER=${CLANGXX} -DCMAKE_BUILD_TYPE=RelWithDebInfo
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring ${SOURCE_DIR} failed:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the fuzz targets failed:\n${out}")
endif()

file(READ ${BUILD_DIR}/fuzz_targets.txt targets)
if(NOT targets)
  message(FATAL_ERROR "${BUILD_DIR}/fuzz_targets.txt lists no fuzz target")
endif()
set(failed "")
foreach(target IN LISTS targets)
  set(seeds ${SOURCE_DIR}/corpus/${target})
  file(GLOB seed_files ${seeds}/*)
  if(NOT seed_files)
    message(FATAL_ERROR "fuzz target ${target}: no seed corpus in ${seeds}")
  endif()
  # New inputs go to a fresh scratch corpus (the first directory); the seeds are only read.
  set(scratch ${WORK}/corpus/${target})
  file(REMOVE_RECURSE ${scratch})
  file(MAKE_DIRECTORY ${scratch} ${WORK}/findings)
  execute_process(COMMAND ${BUILD_DIR}/fuzz_${target} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048
                          -print_final_stats=1 -artifact_prefix=${WORK}/findings/${target}- ${scratch} ${seeds}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(REGEX MATCH "stat::number_of_executed_units: *[0-9]+" runs "${out}")
  if(rc EQUAL 0)
    message("fuzz_${target}: no finding in ${SECONDS} s (${runs})")
  else()
    string(LENGTH "${out}" length)
    if(length GREATER 6000)
      math(EXPR from "${length} - 6000")
      string(SUBSTRING "${out}" ${from} 6000 out)
    endif()
    message("fuzz_${target}: FINDING (exit ${rc}); the input is saved under ${WORK}/findings/${target}-*\n${out}")
    list(APPEND failed ${target})
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "fuzz targets with findings: ${failed}")
endif()
