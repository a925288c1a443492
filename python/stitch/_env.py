"""STITCH_* environment toggles read by the Python package, and the check of all of them.

Booleans follow the library's one parser (runtime/support/env.h): 1/true/yes/on and 0/false/no/off,
case-insensitive; unset or empty is the default; anything else is an error listing them, as an
unknown value of any toggle is.

The package reads four variables of its own, STITCH_DISABLE and STITCH_REPORT (the PyTorch hook),
STITCH_HUGE_PAGES and STITCH_HOST_POOL_MB (``Program.run_torch``'s host outputs), and reads
STITCH_BACKEND as the library does (the PyTorch hook resolves ``auto`` per device itself); the
library reads the rest. The README's table lists them all, and ``stitch.check_environment()``
checks them all: the library's ``stitch_environment_check`` (each variable read by the code that
uses it, these included with the same rules), then :func:`check` here, the readers the package
itself uses. Integers follow env::getInt: decimal digits with an optional minus sign, in range;
choices follow env::getChoice: one of the listed words, exactly.
"""

import os

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

DISABLE = "STITCH_DISABLE"
REPORT = "STITCH_REPORT"
BACKEND = "STITCH_BACKEND"
HUGE_PAGES = "STITCH_HUGE_PAGES"
HOST_POOL_MB = "STITCH_HOST_POOL_MB"


def parse_bool(text: str):
    """True or False for an accepted spelling, None otherwise."""
    t = text.lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    return None


def get_bool(name: str, default: bool) -> bool:
    """The boolean value of environment variable `name` (default when unset or empty)."""
    value = os.environ.get(name, "")
    if value == "":
        return default
    b = parse_bool(value)
    if b is None:
        raise ValueError(f"{name}={value} is not valid; valid values: {', '.join(_TRUE)} (true), "
                         f"{', '.join(_FALSE)} (false)")
    return b


def disabled() -> bool:
    """STITCH_DISABLE (default off): the PyTorch hook leaves its argument to PyTorch."""
    return get_bool(DISABLE, False)


def get_choice(name: str, choices, default: str) -> str:
    """The value of environment variable `name`, one of `choices` (default when unset or empty),
    as the library's env::getChoice."""
    value = os.environ.get(name, "")
    if value == "":
        return default
    if value not in choices:
        raise ValueError(f"{name}={value} is not valid; valid values: {', '.join(choices)}")
    return value


# STITCH_REPORT's values: where the PyTorch hook prints each graph's report when it compiles it.
REPORT_STREAMS = ("off", "stdout", "stderr")
# STITCH_BACKEND's values, in the library's order (runtime/support/env.cpp).
BACKENDS = ("auto", "cuda", "hip", "cpu", "reference")


def report() -> str:
    """STITCH_REPORT (default off): off, stdout or stderr."""
    return get_choice(REPORT, REPORT_STREAMS, "off")


def backend() -> str:
    """STITCH_BACKEND (default auto)."""
    return get_choice(BACKEND, BACKENDS, "auto")


def huge_pages() -> bool:
    """STITCH_HUGE_PAGES (default on): large host outputs get a huge-page mapping."""
    return get_bool(HUGE_PAGES, True)


def get_int(name: str, least: int, most: int, default: int) -> int:
    """The integer value of environment variable `name` in [least, most] (default when unset or
    empty), as the library's env::getInt."""
    value = os.environ.get(name, "")
    if value == "":
        return default
    n = int(value, 10) if value.lstrip("-").isdigit() else None  # from_chars's forms only
    if n is None or n < least or n > most:
        raise ValueError(f"{name}={value} is not valid; valid values: an integer from {least} to "
                         f"{most}")
    return n


def host_pool_mb() -> int:
    """STITCH_HOST_POOL_MB (default 1024): MiB of freed host outputs run_torch keeps to reuse."""
    return get_int(HOST_POOL_MB, 0, 1 << 20, 1024)


def check() -> None:
    """Reads the package's own variables as their users do; ValueError on a bad value."""
    disabled()
    report()
    huge_pages()
    host_pool_mb()
