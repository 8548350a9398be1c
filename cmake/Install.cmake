# Installing moejit: the shared and static libraries, the two public headers, the `moejit`
# command, a CMake package (find_package(moejit CONFIG): moejit::moejit, moejit::moejit_static)
# and a pkg-config file (moejit.pc). Only include/moejit/ is public; the templates are embedded in
# the libraries, so an installed copy needs no source tree.
include(CMakePackageConfigHelpers)

# moejit.h carries the version too (moejit_version() returns it): the two must agree.
file(STRINGS ${PROJECT_SOURCE_DIR}/include/moejit/moejit.h moejit_h_version REGEX "^#define MOEJIT_VERSION_(MAJOR|MINOR|PATCH) ")
string(REGEX REPLACE ".*MAJOR ([0-9]+);.*MINOR ([0-9]+);.*PATCH ([0-9]+).*" "\\1.\\2.\\3" moejit_h_version "${moejit_h_version}")
if(NOT moejit_h_version VERSION_EQUAL PROJECT_VERSION)
  message(FATAL_ERROR "include/moejit/moejit.h says version ${moejit_h_version}, CMakeLists.txt ${PROJECT_VERSION}")
endif()

set(MOEJIT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/moejit CACHE STRING
    "Where the CMake package (moejitConfig.cmake) is installed, relative to the prefix")
mark_as_advanced(MOEJIT_INSTALL_CMAKEDIR)

install(TARGETS moejit moejit_static EXPORT moejitTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS moejit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/moejit/moejit.h ${PROJECT_SOURCE_DIR}/include/moejit/moejit.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/moejit)

install(EXPORT moejitTargets NAMESPACE moejit:: DESTINATION ${MOEJIT_INSTALL_CMAKEDIR})
# What the package's consumers must link as well: the sanitizer's runtime when this build is
# instrumented (also in the targets' INTERFACE_LINK_OPTIONS).
set(MOEJIT_PC_LINK_FLAGS "")
if(MOEJIT_SANITIZE STREQUAL "address")
  set(MOEJIT_PC_LINK_FLAGS " -fsanitize=address")
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/moejitConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/moejitConfig.cmake
                              INSTALL_DESTINATION ${MOEJIT_INSTALL_CMAKEDIR})
# 0.x: a new minor version may change the ABI.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/moejitConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/moejitConfig.cmake ${PROJECT_BINARY_DIR}/moejitConfigVersion.cmake
        DESTINATION ${MOEJIT_INSTALL_CMAKEDIR})

# pkg-config: `pkg-config --libs moejit` links the shared library; `--static` adds what the static
# one needs (Boost.Context's fibers, threads, dlopen).
if(CMAKE_DL_LIBS)
  set(MOEJIT_PC_LIBS_PRIVATE "-lboost_context -lpthread -l${CMAKE_DL_LIBS}")
else()
  set(MOEJIT_PC_LIBS_PRIVATE "-lboost_context -lpthread")
endif()
# Absolute install directories (GNUInstallDirs allows them) are written as they are.
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(MOEJIT_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(MOEJIT_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
# The prefix is the one installed into (`cmake --install --prefix` may change it): everything
# else is filled in now, the prefix when installing.
set(MOEJIT_PC_PREFIX "@MOEJIT_PC_PREFIX@")
configure_file(${PROJECT_SOURCE_DIR}/cmake/moejit.pc.in ${PROJECT_BINARY_DIR}/moejit.pc.in @ONLY)
install(CODE "
  set(MOEJIT_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${PROJECT_BINARY_DIR}/moejit.pc.in\" \"${PROJECT_BINARY_DIR}/moejit.pc\" @ONLY)")
install(FILES ${PROJECT_BINARY_DIR}/moejit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
