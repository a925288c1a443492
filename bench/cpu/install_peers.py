#!/usr/bin/env python3
"""Installs the CPU benchmark's peers into the running virtualenv, from PyPI only, as small as
works; run by scripts/bench-cpu.sh with the venv's python. Writes what it did (packages, download
size, time, which PyTorch) to .venv-bench/peers.json, which run.py puts in its report.

PyTorch: PyPI's Linux x86-64 torch wheel is the CUDA build, and its requirements pull the whole
CUDA stack (cuDNN, cuBLAS, NCCL, ... several GB). On a CPU machine most of it is never called, but
libtorch links a few of those libraries, so `import torch` needs them. So:
  1. torch --no-deps plus its pure-Python requirements (filelock, sympy, networkx, jinja2, ...);
  2. `import torch` in a subprocess; each library it cannot load ("libX.so: cannot open", or an
     "undefined symbol" from a too-old system copy, e.g. /usr/local/cuda's NCCL) is mapped to the
     PyPI package that ships it, at torch's own pin, and installed with no dependencies; repeat;
  3. if that does not converge: plain `pip install torch` (everything);
  4. if torch still does not import: report failure (exit 3), and bench-cpu.sh falls back to
     Debian's python3-torch 1.13 (eager only, no torch.compile), saying so in the report.
What step 2 adds depends on the machine: where the CUDA 13 toolkit's libraries are on the loader
path (/usr/local/cuda-13.0/lib on the development machines), torch 2.15 needed only cuFile,
cuSPARSELt, NVSHMEM and a newer NCCL (~520 MB of wheels, against several GB for the full set);
elsewhere the loop installs each further library torch reports missing.
JAX (`jax[cpu]`), numpy and matplotlib install normally (they are CPU wheels).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

VENV = Path(sys.prefix)
RECORD = VENV / "peers.json"

# Library name prefix -> (torch requirement name, or "cuda-toolkit[extra]").
LIB_TO_PKG = {
    "libcudnn": "nvidia-cudnn-cu13",
    "libcusparseLt": "nvidia-cusparselt-cu13",
    "libnccl": "nvidia-nccl-cu13",
    "libnvshmem": "nvidia-nvshmem-cu13",
    "libcufile": "cuda-toolkit[cufile]",
    "libcudart": "cuda-toolkit[cudart]",
    "libcublas": "cuda-toolkit[cublas]",
    "libcufft": "cuda-toolkit[cufft]",
    "libcusparse": "cuda-toolkit[cusparse]",
    "libcusolver": "cuda-toolkit[cusolver]",
    "libnvrtc": "cuda-toolkit[nvrtc]",
    "libnvJitLink": "cuda-toolkit[nvjitlink]",
    "libcupti": "cuda-toolkit[cupti]",
    "libnvToolsExt": "cuda-toolkit[nvtx]",
}
# Undefined-symbol prefix -> library prefix.
SYM_TO_LIB = {"nccl": "libnccl", "cudnn": "libcudnn", "cusparseLt": "libcusparseLt",
              "cusparse": "libcusparse", "cublasLt": "libcublas", "cublas": "libcublas",
              "cufft": "libcufft", "cusolver": "libcusolver", "nvrtc": "libnvrtc", "nvshmem": "libnvshmem",
              "cuFile": "libcufile", "nvJitLink": "libnvJitLink", "cupti": "libcupti", "cuda": "libcudart"}


def log(msg: str) -> None:
    print(f"[peers] {msg}", flush=True)


def pip_install(reqs: list[str], no_deps: bool, record: dict) -> bool:
    """pip download into a temp dir (so the wheels' size is known), then install from it."""
    with tempfile.TemporaryDirectory(prefix="bench-wheels-", dir=VENV) as d:
        t0 = time.monotonic()
        dl = [sys.executable, "-m", "pip", "download", "-q", "-d", d] + (["--no-deps"] if no_deps else []) + reqs
        log(" ".join(dl[3:]))
        if subprocess.run(dl).returncode != 0:
            return False
        mb = sum(p.stat().st_size for p in Path(d).iterdir()) / 1e6
        t1 = time.monotonic()
        inst = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", d] + \
            (["--no-deps"] if no_deps else []) + reqs
        ok = subprocess.run(inst).returncode == 0
        t2 = time.monotonic()
        wheels = sorted(p.name for p in Path(d).iterdir())
        record["steps"].append({"requirements": reqs, "no_deps": no_deps, "wheels": wheels,
                                "download_mb": round(mb, 1), "download_s": round(t1 - t0, 1),
                                "install_s": round(t2 - t1, 1), "ok": ok})
        log(f"  {len(wheels)} wheels, {mb:.0f} MB, download {t1 - t0:.0f} s, install {t2 - t1:.0f} s")
        return ok


def try_import_torch() -> tuple[bool, str]:
    code = "import torch; x = torch.ones(4); assert float((x + x).sum()) == 8.0; print(torch.__version__)"
    p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode == 0, p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""


def torch_pins() -> dict[str, str]:
    """Requirement strings of the installed torch, by project name (markers dropped)."""
    pins = {}
    for r in metadata.requires("torch") or []:
        spec = r.split(";")[0].strip()
        m = re.match(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*)", spec)
        if m:
            pins[m.group(1).lower()] = (m.group(1), m.group(3).strip(), "extra ==" in r)
    return pins


def missing_lib(err: str) -> str | None:
    m = re.search(r"(lib[A-Za-z0-9_]+?)\.so[.0-9]*: cannot open shared object file", err)
    if m:
        return m.group(1)
    m = re.search(r"undefined symbol: ([A-Za-z]+)", err)
    if m:
        sym = m.group(1)
        for prefix in sorted(SYM_TO_LIB, key=len, reverse=True):
            if sym.startswith(prefix):
                return SYM_TO_LIB[prefix]
    return None


def requirement_for(lib: str, pins) -> str | None:
    for prefix in sorted(LIB_TO_PKG, key=len, reverse=True):
        if lib.startswith(prefix):
            pkg = LIB_TO_PKG[prefix]
            name = pkg.split("[")[0]
            if name in pins:
                return pkg + pins[name][1].replace(" ", "")
            return None
    return None


def install_torch(record: dict) -> bool:
    ok, out = try_import_torch()
    if ok:
        log(f"torch {out} already imports; reusing it")
        record["torch"] = {"how": "reused", "version": out}
        return True
    if not pip_install(["torch"], True, record):
        return False
    pins = torch_pins()
    pure = [f"{n}{spec}" for key, (n, spec, is_extra) in pins.items()
            if not is_extra and not key.startswith(("nvidia-", "cuda-", "triton"))]
    if pure and not pip_install(pure, False, record):
        return False
    added = []
    for _ in range(12):
        ok, out = try_import_torch()
        if ok:
            record["torch"] = {"how": "PyPI torch --no-deps + pure-Python deps"
                               + (" + " + ", ".join(added) if added else "")
                               + " (the other CUDA packages torch lists are not installed)",
                               "version": out}
            return True
        lib = missing_lib(out)
        req = requirement_for(lib, pins) if lib else None
        log(f"import torch failed: {out[:200]}")
        if not req or req in added:
            break
        log(f"  {lib} -> {req}")
        added.append(req)
        if not pip_install([req], not req.startswith("cuda-toolkit["), record):
            break
    log("falling back to `pip install torch` with all its dependencies")
    if pip_install(["torch"], False, record):
        ok, out = try_import_torch()
        if ok:
            record["torch"] = {"how": "PyPI torch with all its dependencies", "version": out}
            return True
    record["torch"] = {"how": "failed", "error": out[:300]}
    return False


def main() -> int:
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {"steps": []}
    record.setdefault("steps", [])
    t0 = time.monotonic()
    torch_ok = install_torch(record)
    try:
        import importlib
        for mod in ("jax", "numpy", "matplotlib"):
            importlib.import_module(mod)
        log("jax, numpy, matplotlib already import; reusing them")
    except ImportError:
        if not pip_install(["jax[cpu]", "numpy", "matplotlib"], False, record):
            log("jax/numpy/matplotlib install failed")
            RECORD.write_text(json.dumps(record, indent=1))
            return 1
    record["last_run_s"] = round(time.monotonic() - t0, 1)
    record["download_mb_total"] = round(sum(s["download_mb"] for s in record["steps"]), 1)
    RECORD.write_text(json.dumps(record, indent=1))
    return 0 if torch_ok else 3


if __name__ == "__main__":
    sys.exit(main())
