#!/usr/bin/env bash
# Installs the build tree into a fresh prefix and checks it from a consumer's side.
#
#   run_install_test.sh MODE BUILD_DIR SOURCE_DIR WORK_DIR [KEY=VALUE ...]
#
# MODE:
#   cmake      configure and build examples/c with find_package(stitch), then run it
#   pkgconfig  build examples/c/main.c with cc and `pkg-config --cflags --libs stitch`, run it
#   symbols    libstitch.so exports stitch_* symbols and nothing else
# Every mode first installs into WORK_DIR/prefix and checks the installed tree's layout.
# KEY=VALUE settings (all optional): CMAKE=..., GENERATOR=..., CC=..., DLPACK_DIR=...,
# DLPACK_INCLUDE=... (where <dlpack/dlpack.h> is, for the pkg-config build; stitch.pc does not
# name it since Debian's DLPack ships no .pc file).
set -euo pipefail

mode=$1
build_dir=$2
source_dir=$3
work_dir=$4
shift 4

CMAKE=cmake
GENERATOR=
CC=cc
DLPACK_DIR=
DLPACK_INCLUDE=
for kv in "$@"; do
  case "$kv" in
    CMAKE=* | GENERATOR=* | CC=* | DLPACK_DIR=* | DLPACK_INCLUDE=*) declare "$kv" ;;
    *) echo "unknown setting: $kv" >&2; exit 2 ;;
  esac
done

run() { echo "+ $*"; "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

prefix=$work_dir/prefix
rm -rf "$work_dir"
mkdir -p "$work_dir"

run "$CMAKE" --install "$build_dir" --prefix "$prefix"

# The library directory is lib or lib/<multiarch>, as GNUInstallDirs chose at configure time.
libstitch=$(find "$prefix" -name libstitch.so -print -quit)
[[ -n "$libstitch" ]] || fail "no libstitch.so under $prefix"
libdir=$(dirname "$libstitch")
for f in "$prefix/include/stitch/stitch.h" "$libdir/cmake/stitch/stitchConfig.cmake" \
  "$libdir/cmake/stitch/stitchConfigVersion.cmake" "$libdir/cmake/stitch/stitchTargets.cmake" \
  "$libdir/pkgconfig/stitch.pc"; do
  [[ -f "$f" ]] || fail "missing from the install tree: $f"
done
[[ -L "$libdir/libstitch.so" ]] || fail "libstitch.so is not the development symlink"
soname=$(readelf -d "$libstitch" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[[ -n "$soname" && -e "$libdir/$soname" ]] || fail "SONAME '$soname' is not installed in $libdir"

export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

case "$mode" in
  cmake)
    args=(-S "$source_dir/examples/c" -B "$work_dir/example" -DCMAKE_PREFIX_PATH="$prefix"
      -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=Debug)
    [[ -n "$GENERATOR" ]] && args+=(-G "$GENERATOR")
    [[ -n "$DLPACK_DIR" ]] && args+=(-Ddlpack_DIR="$DLPACK_DIR")
    run "$CMAKE" "${args[@]}"
    run "$CMAKE" --build "$work_dir/example"
    run "$work_dir/example/stitch_example"
    ;;
  pkgconfig)
    command -v pkg-config >/dev/null || fail "pkg-config is not installed (scripts/setup.sh installs it)"
    export PKG_CONFIG_PATH=$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    flags=$(pkg-config --cflags --libs stitch)
    echo "pkg-config --cflags --libs stitch: $flags"
    extra=()
    [[ -n "$DLPACK_INCLUDE" ]] && extra+=(-I"$DLPACK_INCLUDE")
    # shellcheck disable=SC2086  # $flags is a list of words by design
    run "$CC" -std=c99 -Wall -Wextra -Wpedantic "${extra[@]}" "$source_dir/examples/c/main.c" \
      $flags -o "$work_dir/stitch_example"
    run "$work_dir/stitch_example"
    ;;
  symbols)
    # Global and weak definitions only (nm's upper-case types): ld keeps a few local symbols in
    # .dynsym (typeinfo of std templates that libLLVM also defines, localized by the version
    # script), and a local symbol cannot be bound by anyone else.
    symbols=$(nm -D --defined-only "$libstitch" | awk 'NF >= 3 && $2 ~ /^[A-Z]$/ {print $3}')
    [[ -n "$symbols" ]] || fail "libstitch.so exports nothing"
    others=$(grep -v '^stitch_' <<<"$symbols" || true)
    if [[ -n "$others" ]]; then
      echo "libstitch.so exports symbols outside the C API (see cmake/stitch.map):" >&2
      echo "$others" >&2
      exit 1
    fi
    echo "libstitch.so exports $(wc -l <<<"$symbols") symbols, all stitch_*"
    ;;
  *)
    fail "unknown mode: $mode"
    ;;
esac
