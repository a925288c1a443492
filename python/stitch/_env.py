"""STITCH_* environment toggles read by the Python package.

Booleans follow the library's one parser (src/support/env.h): 1/true/yes/on and 0/false/no/off,
case-insensitive; unset or empty is the default; anything else is an error listing them, as an
unknown value of any toggle is.
"""

import os

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


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
