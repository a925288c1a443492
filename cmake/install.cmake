# Install rules and packaging: libstitch.so, the public headers, the `stitch` command line, a
# CMake package (find_package(stitch) -> stitch::stitch) and a pkg-config file (stitch.pc).
#
# Only the shared library is exported. stitch_core and stitch_runtime are static and linked
# PRIVATE into it, so they appear in no consumer's link line and are neither installed nor
# exported. dlpack::dlpack is a PUBLIC dependency (stitch.h includes <dlpack/dlpack.h>), so the
# package config finds dlpack before loading the targets.
include(CMakePackageConfigHelpers)

set(STITCH_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/stitch)

install(TARGETS stitch
  EXPORT stitchTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)

# stitch.h, plus stitch.hpp (and any later public header) once it exists.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/stitch
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")

if(TARGET stitch_cli)
  install(TARGETS stitch_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
  # The command line finds libstitch.so in the installed tree, wherever that was moved.
  file(RELATIVE_PATH STITCH_BIN_TO_LIB /${CMAKE_INSTALL_BINDIR} /${CMAKE_INSTALL_LIBDIR})
  set_target_properties(stitch_cli PROPERTIES INSTALL_RPATH "$ORIGIN/${STITCH_BIN_TO_LIB}")
endif()

install(EXPORT stitchTargets
  NAMESPACE stitch::
  FILE stitchTargets.cmake
  DESTINATION ${STITCH_INSTALL_CMAKEDIR} COMPONENT dev)

# The Python package carries DLPack's header in its own include directory
# (cmake/python_package.cmake), so its package config makes dlpack::dlpack rather than finding it.
set(STITCH_BUNDLED_DLPACK ${STITCH_PYTHON_PACKAGE})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/stitchConfig.cmake.in
  ${PROJECT_BINARY_DIR}/stitchConfig.cmake
  INSTALL_DESTINATION ${STITCH_INSTALL_CMAKEDIR})
# 0.x releases make no ABI promise between minor versions.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/stitchConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/stitchConfig.cmake
  ${PROJECT_BINARY_DIR}/stitchConfigVersion.cmake
  DESTINATION ${STITCH_INSTALL_CMAKEDIR} COMPONENT dev)

# pkg-config: paths are relative to ${prefix}, which is computed from the .pc file's location
# (pcfiledir), so the installed tree can be moved or installed with `cmake --install --prefix`.
file(RELATIVE_PATH STITCH_PC_PREFIX_FROM_PCDIR
  /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" STITCH_PC_PREFIX_FROM_PCDIR "${STITCH_PC_PREFIX_FROM_PCDIR}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/stitch.pc.in ${PROJECT_BINARY_DIR}/stitch.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/stitch.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

if(STITCH_PYTHON_PACKAGE)
  stitch_install_python_package()
endif()
