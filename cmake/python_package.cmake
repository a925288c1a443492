# The Python package's native part (STITCH_PYTHON_PACKAGE, which pyproject.toml turns on).
#
# scikit-build-core installs the CMake install tree into the wheel's platlib directory, beside the
# pure-Python package that `wheel.packages` copies from python/stitch. This file makes that tree
# live inside the package, so that one directory is both what Python imports and an ordinary
# install prefix (bin, include, lib, lib/cmake, lib/pkgconfig) that C and C++ consumers point
# find_package or pkg-config at (`python -m stitch --cmakedir`):
#
#   stitch/__init__.py ...          the binding and the PyTorch hook (python/stitch)
#   stitch/lib/libstitch.so         the C API; its soname is libstitch.so (no version symlinks:
#                                   a wheel is a zip and holds none); RUNPATH $ORIGIN
#   stitch/lib/lib*.so.N            the shared libraries libstitch.so needs that a base Debian 12
#                                   lacks (SLEEF, spdlog, fmt, hiredis), copied from the build
#                                   machine and found through that RUNPATH
#   stitch/bin/stitch               the command line (RUNPATH $ORIGIN/../lib); the `stitch`
#                                   console script execs it (stitch/_cli.py)
#   stitch/include/stitch, dlpack   the public headers, and DLPack's, which stitch.h includes
#   stitch/lib/cmake/stitch         find_package(stitch) -> stitch::stitch
#   stitch/lib/pkgconfig/stitch.pc
#   stitch/licenses/                the copyright files of everything bundled or linked in
#
# How the native dependencies travel (README, "Installing with pip"): LLVM is linked statically
# (STITCH_LLVM_STATIC: only the components the cpu backend uses; libLLVM.so would bring z3,
# libxml2, ICU and libedit, ~200 MB), the small libraries above are bundled, and the rest is
# required of the system: glibc 2.36 and libstdc++ of GCC 12 or newer, zlib and zstd, which every
# Debian 12 has (they are in its required set). CUDA's and HIP's libraries stay outside, opened
# with dlopen when a GPU backend is first asked for, as in any build.

if(STITCH_ENABLE_LLVM AND NOT STITCH_LLVM_STATIC)
  message(FATAL_ERROR "STITCH_PYTHON_PACKAGE needs STITCH_LLVM_STATIC=ON (or "
                      "STITCH_ENABLE_LLVM=OFF): the wheel does not carry libLLVM.so and what it links")
endif()

set(STITCH_PACKAGE_DIR stitch)
set(CMAKE_INSTALL_BINDIR ${STITCH_PACKAGE_DIR}/bin)
set(CMAKE_INSTALL_LIBDIR ${STITCH_PACKAGE_DIR}/lib)
set(CMAKE_INSTALL_INCLUDEDIR ${STITCH_PACKAGE_DIR}/include)
set(CMAKE_INSTALL_DATADIR ${STITCH_PACKAGE_DIR}/share)

# The libraries a base Debian 12 system has (glibc, GCC's runtime, and zlib and zstd, which its
# required packages depend on); every other library libstitch.so loads is bundled.
set(STITCH_SYSTEM_LIBRARIES
  "^ld-linux" "^libc\\.so" "^libm\\.so" "^libdl\\.so" "^librt\\.so" "^libpthread\\.so"
  "^libstdc\\+\\+\\.so" "^libgcc_s\\.so" "^libz\\.so" "^libzstd\\.so")

# The package's install rules beyond cmake/install.cmake's; called from there once the targets
# exist.
function(stitch_install_python_package)
  set_target_properties(stitch PROPERTIES INSTALL_RPATH "$ORIGIN")

  # DLPack's header: stitch.h includes <dlpack/dlpack.h>, and a machine with the wheel need not
  # have DLPack installed.
  get_target_property(dlpack_include dlpack::dlpack INTERFACE_INCLUDE_DIRECTORIES)
  find_file(STITCH_DLPACK_HEADER dlpack/dlpack.h PATHS ${dlpack_include} NO_DEFAULT_PATH)
  if(NOT STITCH_DLPACK_HEADER)
    find_file(STITCH_DLPACK_HEADER dlpack/dlpack.h REQUIRED)
  endif()
  install(FILES ${STITCH_DLPACK_HEADER} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dlpack)

  # The bundled libraries, resolved at install time from libstitch.so's dependencies, each copied
  # (the file, not its symlink) under the name libstitch.so asks for. Their copyright files, and
  # those of what is linked in statically (LLVM) or shipped as a header (DLPack), go to licenses/
  # when dpkg knows which package each came from.
  set(licensed ${STITCH_DLPACK_HEADER})
  if(STITCH_LLVM_STATIC)
    list(APPEND licensed ${LLVM_LIBRARY_DIR}/libLLVMCore.a)
  endif()
  install(CODE "set(stitch_library \"$<TARGET_FILE:stitch>\")
set(stitch_libdir \"${CMAKE_INSTALL_LIBDIR}\")
set(stitch_licensedir \"${STITCH_PACKAGE_DIR}/licenses\")
set(stitch_system \"${STITCH_SYSTEM_LIBRARIES}\")
set(stitch_licensed \"${licensed}\")")
  install(CODE [[
    set(prefix "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
    file(GET_RUNTIME_DEPENDENCIES
      LIBRARIES ${stitch_library}
      RESOLVED_DEPENDENCIES_VAR bundled
      UNRESOLVED_DEPENDENCIES_VAR unresolved
      PRE_EXCLUDE_REGEXES ${stitch_system})
    if(unresolved)
      message(FATAL_ERROR "libstitch.so needs libraries that cannot be found: ${unresolved}")
    endif()
    foreach(lib IN LISTS bundled)
      get_filename_component(name ${lib} NAME)
      file(REAL_PATH ${lib} file)
      message(STATUS "Bundling ${name} (${file})")
      file(COPY_FILE ${file} ${prefix}/${stitch_libdir}/${name})
      list(APPEND stitch_licensed ${file})
    endforeach()
    find_program(dpkg_query dpkg-query)
    if(dpkg_query)
      file(MAKE_DIRECTORY ${prefix}/${stitch_licensedir})
      foreach(file IN LISTS stitch_licensed)
        # Debian 12 merged /lib into /usr/lib, but a package may have recorded either path.
        string(REGEX REPLACE "^/usr/lib/" "/lib/" other ${file})
        execute_process(COMMAND ${dpkg_query} -S ${file} OUTPUT_VARIABLE owner
                        RESULT_VARIABLE status ERROR_QUIET)
        if(NOT status EQUAL 0)
          execute_process(COMMAND ${dpkg_query} -S ${other} OUTPUT_VARIABLE owner
                          RESULT_VARIABLE status ERROR_QUIET)
        endif()
        string(REGEX REPLACE "[:,].*" "" owner "${owner}")
        set(copyright /usr/share/doc/${owner}/copyright)
        if(status EQUAL 0 AND EXISTS ${copyright})
          file(COPY_FILE ${copyright} ${prefix}/${stitch_licensedir}/${owner}.copyright)
        endif()
      endforeach()
    endif()
  ]])
endfunction()
