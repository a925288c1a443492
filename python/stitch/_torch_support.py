"""The PyTorch versions ``torch.compile(backend="stitch")`` supports, and the check of them.

The backend builds on Dynamo's and AOTAutograd's interfaces (aot_autograd, the min-cut partition,
FakeTensor metadata, symbolic shapes), which PyTorch changes from release to release without
notice, so the range is the one tested: MINIMUM is the oldest release the torch.compile tests
pass on, NEWEST_TESTED the newest (README, "Installing with pip", says which were run). Older
releases, and PyTorch 1.x, fail with :class:`UnsupportedTorch` before Dynamo is involved: at
``torch.compile(backend="stitch")`` when the backend comes from the package's entry point, or at
``import stitch.torch``'s registration. A newer 2.x is allowed, with one warning, since most
releases keep these interfaces; ``stitch.torch.optimize`` (torch.fx tracing only) also runs on
PyTorch 1.13 and is not covered by this check.

Nothing here imports torch: callers pass ``torch.__version__``.
"""

import logging
import re
from typing import Optional, Tuple

MINIMUM = (2, 10)
NEWEST_TESTED = (2, 15)

log = logging.getLogger("stitch.torch")
_warned = False


class UnsupportedTorch(RuntimeError):
    """The installed PyTorch is outside the range the backend supports."""


def _release(version: str) -> Optional[Tuple[int, int]]:
    """(major, minor) of a PyTorch version string ("2.15.0+cu132", "2.16.0a0+git1234")."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _name(release: Tuple[int, int]) -> str:
    return "%d.%d" % release


def problem(version: str) -> Optional[str]:
    """Why torch.compile(backend="stitch") cannot run on PyTorch `version`, or None."""
    release = _release(version)
    supported = "PyTorch %s to %s (tested)" % (_name(MINIMUM), _name(NEWEST_TESTED))
    if release is None:
        return "stitch: cannot read the PyTorch version %r; torch.compile(backend=\"stitch\") " \
               "supports %s" % (version, supported)
    if release < MINIMUM or release[0] != MINIMUM[0]:
        return ("stitch: torch.compile(backend=\"stitch\") supports %s; this is PyTorch %s. "
                "Install a supported release (pip install \"torch>=%s\")%s"
                % (supported, version, _name(MINIMUM),
                   "; stitch.torch.optimize works on PyTorch 1.13" if release[0] < 2 else ""))
    return None


def require(version: str) -> None:
    """Raises UnsupportedTorch for an unsupported `version`; warns once for one newer than the
    newest tested."""
    global _warned
    message = problem(version)
    if message:
        raise UnsupportedTorch(message)
    release = _release(version)
    if release is not None and release > NEWEST_TESTED and not _warned:
        _warned = True
        log.warning("stitch: PyTorch %s is newer than the newest release the torch.compile "
                    "backend was tested with (%s)", version, _name(NEWEST_TESTED))
