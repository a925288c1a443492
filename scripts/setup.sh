#!/usr/bin/env bash
# Installs the Debian packages Stitch builds against, only when some are missing.
# Idempotent: when everything is present it makes no network call and returns at once.
set -euo pipefail

# One package a word. Later features append here (llvm-19-dev, libbenchmark-dev, hipcc, ...).
# libamdhip64-5: HIP 5.2's runtime, which holds hipRTC; with the comgr and LLVM 15 it pulls in
# (device libraries embedded) it compiles for gfx90a with no GPU, so CI compiles every HIP kernel.
# Nothing links it: Stitch opens it with dlopen. hipcc, libamdhip64-dev and rocm-device-libs are
# not needed for that. python3-torch, python3-numpy, python3-pytest: the Python binding and PyTorch
# hook tests (python/tests), run by ctest with /usr/bin/python3. clang-19, libclang-rt-19-dev:
# libFuzzer and clang's sanitizer runtimes, for the `fuzz` preset (tests/fuzz). python3-venv:
# Debian's python3 makes no virtualenv without it; scripts/install_torch.py makes .venv-torch (PyPI's
# PyTorch 2.x for the torch.compile tests) with it, called by scripts/test.sh, not here (demo.sh
# and the sanitizer lanes need no PyTorch). libhiredis-dev: the kernel cache's Redis remote layer
# (runtime/remote_cache.h); redis-server: its tests start one of their own on a loopback port
# (tests/common/redis_server.h), and so does the warm-start benchmark. libzstd-dev: the wheel
# (pyproject.toml) links LLVM's static libraries, whose CMake package then needs zstd's.
STITCH_DEBIAN_PACKAGES="build-essential cmake ninja-build pkg-config libspdlog-dev libgtest-dev libdlpack-dev libbenchmark-dev llvm-19-dev libzstd-dev libamdhip64-5 libsleef-dev python3-torch python3-numpy python3-pytest python3-venv clang-19 libclang-rt-19-dev libhiredis-dev redis-server"

missing=()
for pkg in $STITCH_DEBIAN_PACKAGES; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all Debian dependencies present"
  exit 0
fi

echo "setup: installing missing packages: ${missing[*]}"
# `env` carries DEBIAN_FRONTEND through sudo, which drops the caller's environment.
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo_cmd=(sudo)
  else
    echo "setup: not root and sudo is not available; install these first: ${missing[*]}" >&2
    exit 1
  fi
fi
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"
