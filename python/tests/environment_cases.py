"""What the environment tests share (test_environment.py, torch2/test_compile_environment.py): a
bad value of every variable of the README's table, and how a ValueError must name it."""
import os
import re

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")

# A bad value of every variable that has valid values to break.
BAD = {
    "STITCH_LOG_LEVEL": "loud",
    "STITCH_BACKEND": "gpu",
    "STITCH_FUSION": "bogus",
    "STITCH_CACHE": "2",
    "STITCH_CACHE_MAX_MB": "-5",
    "STITCH_CACHE_KEY_FILE": "/nonexistent/stitch-key",
    "STITCH_REMOTE_CACHE": "garbage",
    "STITCH_REMOTE_CACHE_NAMESPACE": "a/b",
    "STITCH_REMOTE_CACHE_TIMEOUT_MS": "0",
    "STITCH_REMOTE_CACHE_TTL": "-1",
    "STITCH_REMOTE_CACHE_RETRY_MS": "soon",
    "STITCH_DUMP": "ptx",
    "STITCH_NUM_THREADS": "0",
    "STITCH_SPIN_US": "abc",
    "STITCH_CPU_OPENMP": "2",
    "STITCH_CPU_STREAMING_STORES": "2",
    "STITCH_CPU_FEATURES": "-no-such-feature",
    "STITCH_SHAPE_CLASSES": "2",
    "STITCH_AUTOTUNE": "2",
    "STITCH_AUTOTUNE_CANDIDATES": "17",
    "STITCH_AUTOTUNE_BUDGET_MS": "0",
    "STITCH_COST_CALIBRATION": "2",
    "STITCH_COMPILE_THREADS": "0",
    "STITCH_DISABLE": "banana",
    "STITCH_REPORT": "loud",
    "STITCH_HUGE_PAGES": "banana",
    "STITCH_HOST_POOL_MB": "lots",
}
# Read by the cpu backend alone: a build without LLVM has none, ignores them and cannot tell a bad
# value (STITCH_CPU_FEATURES' names are LLVM's); their cases skip there.
HOST_BACKEND_ONLY = {"STITCH_CPU_FEATURES"}


def skip_if_unread(name):
    """Skips the case of a variable this build never reads."""
    import pytest
    import stitch
    if name in HOST_BACKEND_ONLY and stitch.backends()["cpu"] is not None:
        pytest.skip(f"{name} is read by the cpu backend alone, which this build has not")


# Secrets: a bad one is named by its variable alone; the message never prints the value.
SECRETS = {"STITCH_CACHE_KEY": "too short a secret"}
# Paths take any value (a library that does not load is logged when it is first needed).
PATHS = {"STITCH_CACHE_DIR", "STITCH_DUMP_DIR", "STITCH_LIBRARY", "STITCH_CUDA_LIBRARY",
         "STITCH_NVRTC_LIBRARY", "STITCH_HIP_LIBRARY"}


def readme_variables():
    """The variables the README's table ("Environment variables") lists."""
    names, section = [], False
    with open(README) as f:
        for line in f:
            if line.startswith("## "):
                section = line.strip() == "## Environment variables"
            if section and line.startswith("| `STITCH_"):
                names += re.findall(r"`(STITCH_[A-Z0-9_]+)`", line.split("|")[1])
    return names


def expect_named(excinfo, name, value):
    msg = str(excinfo.value)
    assert f"{name}={value} is not valid" in msg, msg
    assert "valid values: " in msg, msg
