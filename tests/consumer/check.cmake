# cmake -P script behind the test "an installed moejit is usable through find_package and
# pkg-config": installs the build tree into a fresh prefix, then builds tests/consumer/ against it
# the ways an engine would and runs what it built:
#   1. find_package(moejit CONFIG) with moejit::moejit (shared), then moejit::moejit_static;
#   2. pkg-config: `c++ consumer.cpp $(pkg-config --cflags --libs moejit)` and the same from C;
#      the static library with `pkg-config --static --libs` (its Libs.private).
# Variables: BUILD_DIR (the moejit build), CONFIG (its configuration), WORK (scratch directory,
# emptied), SOURCE_DIR (tests/consumer), GENERATOR, C_COMPILER, CXX_COMPILER, LIBDIR (the
# relative CMAKE_INSTALL_LIBDIR), VERSION (the project's).
cmake_minimum_required(VERSION 3.25)

foreach(var BUILD_DIR WORK SOURCE_DIR GENERATOR C_COMPILER CXX_COMPILER LIBDIR VERSION)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check.cmake: ${var} is not set")
  endif()
endforeach()

# Runs a command; on failure prints its output and stops. Its stdout lands in `out_var`.
function(run out_var what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(JOIN " " cmd ${ARGN})
    message(FATAL_ERROR "${what} failed (${rc}):\n  ${cmd}\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/cache)
set(prefix ${WORK}/prefix)

set(config_args "")
if(CONFIG)
  set(config_args --config ${CONFIG})
endif()
run(ignored "cmake --install into ${prefix}" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} ${config_args})
foreach(f include/moejit/moejit.h include/moejit/moejit.hpp bin/moejit ${LIBDIR}/libmoejit.a
          ${LIBDIR}/cmake/moejit/moejitConfig.cmake ${LIBDIR}/cmake/moejit/moejitConfigVersion.cmake
          ${LIBDIR}/pkgconfig/moejit.pc)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "the install has no ${f}")
  endif()
endforeach()
file(GLOB shared_libs ${prefix}/${LIBDIR}/libmoejit.so*)
if(NOT shared_libs)
  message(FATAL_ERROR "the install has no ${LIBDIR}/libmoejit.so")
endif()
# Nothing internal is installed: include/ has the two public headers and nothing else.
file(GLOB_RECURSE headers RELATIVE ${prefix}/include ${prefix}/include/*)
if(NOT headers STREQUAL "moejit/moejit.h;moejit/moejit.hpp")
  message(FATAL_ERROR "installed headers: ${headers}; expected moejit/moejit.h and moejit/moejit.hpp only")
endif()

# 1. find_package, against each library.
foreach(target moejit::moejit moejit::moejit_static)
  string(REPLACE "::" "-" name ${target})
  set(bin ${WORK}/${name})
  run(configured "configure tests/consumer with ${target}"
      ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${bin} -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
      -DCMAKE_PREFIX_PATH=${prefix} -DMOEJIT_TARGET=${target}
      -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
  # The package found is the one just installed, and its only include directory is include/.
  set(expected "moejit ${VERSION} from ${prefix}/${LIBDIR}/cmake/moejit; ${target} includes: ${prefix}/include\n")
  string(FIND "${configured}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "configuring tests/consumer should have said\n  ${expected}but said:\n${configured}")
  endif()
  run(ignored "build tests/consumer with ${target}" ${CMAKE_COMMAND} --build ${bin})
  foreach(program consumer_cpp consumer_c)
    run(said "run ${program} (${target})" ${bin}/${program} ${WORK}/cache)
    message(STATUS "  ${said}")
  endforeach()
endforeach()

# 2. pkg-config, with the search path pointing at the install alone.
set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
find_program(PKG_CONFIG NAMES pkg-config pkgconf REQUIRED)
run(pc_version "pkg-config --modversion moejit" ${PKG_CONFIG} --modversion moejit)
string(STRIP "${pc_version}" pc_version)
if(NOT pc_version STREQUAL VERSION)
  message(FATAL_ERROR "moejit.pc says version ${pc_version}, the project ${VERSION}")
endif()
run(pc_libdir "pkg-config --variable=libdir" ${PKG_CONFIG} --variable=libdir moejit)
string(STRIP "${pc_libdir}" pc_libdir)
if(NOT pc_libdir STREQUAL "${prefix}/${LIBDIR}")
  message(FATAL_ERROR "moejit.pc's libdir is ${pc_libdir}, expected ${prefix}/${LIBDIR}")
endif()
run(pc_cflags "pkg-config --cflags moejit" ${PKG_CONFIG} --cflags moejit)
run(pc_libs "pkg-config --libs moejit" ${PKG_CONFIG} --libs moejit)
run(pc_static_libs "pkg-config --static --libs moejit" ${PKG_CONFIG} --static --libs moejit)
separate_arguments(pc_cflags UNIX_COMMAND "${pc_cflags}")
separate_arguments(pc_libs UNIX_COMMAND "${pc_libs}")
separate_arguments(pc_static_libs UNIX_COMMAND "${pc_static_libs}")
# The static archive by name (-lmoejit would pick the shared library next to it), then what
# Libs.private adds.
list(TRANSFORM pc_static_libs REPLACE "^-lmoejit$" "-l:libmoejit.a")

set(pc_bin ${WORK}/pkg-config)
file(MAKE_DIRECTORY ${pc_bin})
run(ignored "c++ consumer.cpp $(pkg-config --cflags --libs moejit)"
    ${CXX_COMPILER} -std=c++17 ${SOURCE_DIR}/consumer.cpp ${pc_cflags} ${pc_libs} -Wl,-rpath,${pc_libdir}
    -o ${pc_bin}/consumer_cpp)
run(ignored "cc consumer.c $(pkg-config --cflags --libs moejit)"
    ${C_COMPILER} -std=c99 ${SOURCE_DIR}/consumer.c ${pc_cflags} ${pc_libs} -Wl,-rpath,${pc_libdir}
    -o ${pc_bin}/consumer_c)
run(ignored "c++ consumer.cpp $(pkg-config --cflags --static --libs moejit), the static library"
    ${CXX_COMPILER} -std=c++17 ${SOURCE_DIR}/consumer.cpp ${pc_cflags} ${pc_static_libs}
    -o ${pc_bin}/consumer_cpp_static)
foreach(program consumer_cpp consumer_c consumer_cpp_static)
  run(said "run ${program} (pkg-config)" ${pc_bin}/${program} ${WORK}/cache)
  message(STATUS "  ${said}")
endforeach()
# The shared build must really have used libmoejit.so from the install.
find_program(READELF readelf)
if(READELF)
  run(needed "readelf -d consumer_cpp" ${READELF} -d ${pc_bin}/consumer_cpp)
  if(NOT needed MATCHES "libmoejit\\.so")
    message(FATAL_ERROR "consumer_cpp built with pkg-config --libs does not load libmoejit.so:\n${needed}")
  endif()
endif()

message(STATUS "the installed moejit works through find_package (shared, static) and pkg-config (shared, static)")
