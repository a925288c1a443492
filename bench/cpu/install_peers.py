#!/usr/bin/env python3
"""Installs the CPU benchmark's peers into the running virtualenv, from PyPI only, as small as
works; run by scripts/bench-cpu.sh with the venv's python. Writes what it did (packages, download
size, time, which PyTorch) to .venv-bench/peers.json, which run.py puts in its report.

PyTorch comes from scripts/install_torch.py (shared with the test set-up): the pinned torch 2.x
with only the CUDA libraries libtorch needs to import (its docstring says how); exit code 3 when
torch does not import, and bench-cpu.sh falls back to Debian's python3-torch 1.13 (eager only, no
torch.compile), saying so in the report. numpy and matplotlib install normally (CPU wheels; exit
code 1 when they fail); JAX (`jax[cpu]`) too, but a JAX that will not install or import is
recorded and skipped, and run.py's JAX columns say n/a.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from install_torch import install_torch, log, pip_install  # noqa: E402

RECORD = Path(sys.prefix) / "peers.json"


def imports(*mods: str) -> bool:
    importlib.invalidate_caches()  # a package pip just installed
    try:
        for mod in mods:
            importlib.import_module(mod)
        return True
    except ImportError:
        return False


def main() -> int:
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {"steps": []}
    record.setdefault("steps", [])
    t0 = time.monotonic()
    torch_ok = install_torch(record)
    if imports("numpy", "matplotlib"):
        log("numpy, matplotlib already import; reusing them")
    elif not pip_install(["numpy", "matplotlib"], False, record):
        log("numpy/matplotlib install failed")
        RECORD.write_text(json.dumps(record, indent=1))
        return 1
    # JAX is one peer among three: when it will not install, run.py's JAX columns say n/a.
    if imports("jax"):
        log("jax already imports; reusing it")
    elif not pip_install(["jax[cpu]"], False, record) or not imports("jax"):
        log("jax[cpu] did not install or import: the benchmark runs without its JAX columns")
        record["jax"] = "not installed"
    record["last_run_s"] = round(time.monotonic() - t0, 1)
    record["download_mb_total"] = round(sum(s["download_mb"] for s in record["steps"]), 1)
    RECORD.write_text(json.dumps(record, indent=1))
    return 0 if torch_ok else 3


if __name__ == "__main__":
    sys.exit(main())
