"""The OpInfo cases and what is expected of them.

A case is one entry of PyTorch's ``op_db`` (an op and its variant, e.g. ``softmax.with_dtype``) in
one dtype (f32, bf16: those the entry supports on the CPU) and one mode (``static``:
``torch.compile(dynamic=False)``; ``dynamic``: ``dynamic=True``). Its pytest id is
``OP-DTYPE-MODE`` (``nn.functional.gelu-bf16-dynamic``).

Three files beside this one say what is expected (their headers give the format):

* ``expected_failures.txt``: cases that fail today, each with its kind (``raises``: the compiled
  function raises where eager does not; ``fallback``: a Stitch piece ran eagerly at run time;
  ``wrong``: a wrong answer) and the reason. The list may only shrink: a listed case that passes
  fails the test ("unexpected success: remove it"), and so does a listed case that fails in
  another way than listed.
* ``skipped.txt``: entries not run, with the reason (random ops, uninitialized memory).
* ``in_stitch.txt``: per case, the aten ops that ran in Stitch pieces (forward ``fw:``, backward
  ``bw:``; an op PyTorch decomposed is named by its origin). A case may not lose one of them: an
  op that silently falls back to PyTorch fails the test, naming the reason the report gives.

The settings are environment variables (see ``Settings``) so that CTest, CI and a developer's
shell pass them the same way.
"""

from __future__ import annotations

import datetime
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Tuple

import torch

HERE = Path(__file__).resolve().parent
EXPECTED_FAILURES = HERE / "expected_failures.txt"
SKIPPED = HERE / "skipped.txt"
IN_STITCH = HERE / "in_stitch.txt"

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
MODES = ("static", "dynamic")
KINDS = ("raises", "wrong", "fallback")

# The sample of cases a CI run takes (see README, "PyTorch tests"): about 55 s of CPU time, under
# 2 minutes on the 2-core CI machine beside the rest of the default lane.
DEFAULT_CASES = 200
# Samples per case: the first two of each entry's sample_inputs (the figures in the notes and
# in_stitch.txt are for this count).
DEFAULT_SAMPLES = 2


class ConfigError(Exception):
    """A malformed expectations file or setting: the run stops at collection, naming it."""


def _env_count(name: str, default: int) -> Optional[int]:
    """An environment count: a positive int, or ``all`` (None)."""
    v = os.environ.get(name, "").strip()
    if not v:
        return default
    if v == "all":
        return None
    try:
        n = int(v)
    except ValueError:
        n = 0
    if n <= 0:
        raise ConfigError("%s=%r: expected a positive number or 'all'" % (name, v))
    return n


@dataclass(frozen=True)
class Settings:
    cases: Optional[int]          # STITCH_OPINFO_CASES: how many cases to run (None: all)
    seed: int                     # STITCH_OPINFO_SEED: which ones (default: today's UTC date)
    samples: Optional[int]        # STITCH_OPINFO_SAMPLES: samples per case (None: all)
    sample_index: Optional[int]   # STITCH_OPINFO_SAMPLE: run only this sample of each case
    record: bool                  # STITCH_OPINFO_RECORD=1: rewrite in_stitch.txt from this run
    backend: str                  # STITCH_TEST_BACKEND (harness): another backend, to check the test

    @staticmethod
    def from_env() -> "Settings":
        seed_text = os.environ.get("STITCH_OPINFO_SEED", "").strip()
        if seed_text:
            try:
                seed = int(seed_text)
            except ValueError:
                raise ConfigError("STITCH_OPINFO_SEED=%r: expected an integer" % seed_text)
        else:
            seed = int(datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d"))
        index_text = os.environ.get("STITCH_OPINFO_SAMPLE", "").strip()
        index = None
        if index_text:
            if not index_text.isdigit():
                raise ConfigError("STITCH_OPINFO_SAMPLE=%r: expected a sample index (0, 1, ...)"
                                  % index_text)
            index = int(index_text)
        record_text = os.environ.get("STITCH_OPINFO_RECORD", "").strip()
        if record_text not in ("", "0", "1"):
            raise ConfigError("STITCH_OPINFO_RECORD=%r: expected 0 or 1" % record_text)
        s = Settings(cases=_env_count("STITCH_OPINFO_CASES", DEFAULT_CASES), seed=seed,
                     samples=_env_count("STITCH_OPINFO_SAMPLES", DEFAULT_SAMPLES),
                     sample_index=index, record=record_text == "1",
                     backend=os.environ.get("STITCH_TEST_BACKEND", "stitch"))
        if s.record and (s.samples != DEFAULT_SAMPLES or s.sample_index is not None):
            raise ConfigError("STITCH_OPINFO_RECORD=1 records in_stitch.txt for the default %d "
                              "samples per case: unset STITCH_OPINFO_SAMPLES and "
                              "STITCH_OPINFO_SAMPLE" % DEFAULT_SAMPLES)
        return s

    @property
    def stitch(self) -> bool:
        """Whether the expectations apply: they describe the stitch backend only."""
        return self.backend == "stitch"


def op_name(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


@dataclass(frozen=True)
class Case:
    op: object  # an OpInfo
    name: str   # op_name(op)
    dtype: str  # a key of DTYPES
    mode: str   # one of MODES

    @property
    def id(self) -> str:
        return "%s-%s-%s" % (self.name, self.dtype, self.mode)

    @property
    def key(self) -> Tuple[str, str, str]:
        return (self.name, self.dtype, self.mode)

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def dynamic(self) -> bool:
        return self.mode == "dynamic"

    @property
    def seed(self) -> int:
        """Seeds the case's sample inputs: the same tensors whatever else the run selects."""
        return zlib.crc32(self.id.encode())


def load_op_db():
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def all_cases(op_db) -> List[Case]:
    """Every (entry, dtype, mode) the CPU supports, in op_db's order."""
    cases = []
    seen = set()
    for op in op_db:
        name = op_name(op)
        if name in seen:  # op_db has no duplicates today; ids must stay unique if it ever does
            continue
        seen.add(name)
        supported = op.supported_dtypes("cpu")
        for dt, tdt in DTYPES.items():
            if tdt in supported:
                cases.extend(Case(op, name, dt, mode) for mode in MODES)
    return cases


# -- expectations files -----------------------------------------------------------------------


def _lines(path: Path):
    """(line number, text) of each line that is neither blank nor a comment."""
    for no, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if line and not line.startswith("#"):
            yield no, line


def _expand(text: str, allowed, what: str, where: str) -> List[str]:
    if text == "*":
        return list(allowed)
    items = text.split(",")
    bad = [i for i in items if i not in allowed]
    if bad or not items:
        raise ConfigError("%s: %s %r: expected %s, a comma list of them, or *"
                          % (where, what, text, "|".join(allowed)))
    return items


@dataclass(frozen=True)
class ExpectedFailure:
    line: int
    kind: str
    reason: str

    def where(self) -> str:
        return "%s:%d" % (EXPECTED_FAILURES.name, self.line)


def _check_entry(name: str, dtypes: List[str], supported: Dict[str, set], where: str) -> None:
    if name not in supported:
        raise ConfigError("%s: %r is no op_db entry (renamed or removed: drop the line)"
                          % (where, name))
    missing = [d for d in dtypes if d not in supported[name]]
    if missing:
        raise ConfigError("%s: %s has no %s case on the CPU" % (where, name, ",".join(missing)))


def load_expected_failures(supported: Dict[str, set]) -> Dict[Tuple[str, str, str],
                                                               ExpectedFailure]:
    """Case key -> its entry. Columns: op, dtypes, modes, kind, reason (the rest of the line)."""
    out: Dict[Tuple[str, str, str], ExpectedFailure] = {}
    for no, line in _lines(EXPECTED_FAILURES):
        where = "%s:%d" % (EXPECTED_FAILURES.name, no)
        parts = line.split(None, 4)
        if len(parts) < 5:
            raise ConfigError("%s: expected 'op dtypes modes kind reason'" % where)
        name, dts, modes, kind, reason = parts
        if kind not in KINDS:
            raise ConfigError("%s: kind %r: expected one of %s" % (where, kind, ", ".join(KINDS)))
        dtypes = _expand(dts, list(DTYPES) if dts != "*" else sorted(supported.get(name, ())),
                         "dtype", where)
        _check_entry(name, dtypes, supported, where)
        entry = ExpectedFailure(no, kind, reason)
        for k in ((name, d, m) for d in dtypes for m in _expand(modes, MODES, "mode", where)):
            if k in out:
                raise ConfigError("%s: %s is listed already at line %d" % (where, "-".join(k),
                                                                           out[k].line))
            out[k] = entry
    return out


def load_skipped(supported: Dict[str, set]) -> Dict[str, str]:
    """op_db entry -> why it is not run. Columns: op, reason."""
    out: Dict[str, str] = {}
    for no, line in _lines(SKIPPED):
        where = "%s:%d" % (SKIPPED.name, no)
        parts = line.split(None, 1)
        if len(parts) < 2:
            raise ConfigError("%s: expected 'op reason'" % where)
        if not supported.get(parts[0]):
            raise ConfigError("%s: %r is no op_db entry with an f32 or bf16 case on the CPU"
                              % (where, parts[0]))
        out[parts[0]] = parts[1]
    return out


def load_in_stitch(supported: Dict[str, set]) -> Dict[Tuple[str, str, str], FrozenSet[str]]:
    """Case key -> the ops ("fw:aten.add", "bw:aten.sum") it ran in Stitch when recorded.
    Columns: op, dtype, mode, then the ops."""
    out: Dict[Tuple[str, str, str], FrozenSet[str]] = {}
    for no, line in _lines(IN_STITCH):
        where = "%s:%d" % (IN_STITCH.name, no)
        parts = line.split()
        if len(parts) < 4 or parts[1] not in DTYPES or parts[2] not in MODES or not all(
                p.startswith(("fw:", "bw:")) for p in parts[3:]):
            raise ConfigError("%s: expected 'op dtype mode fw:OP|bw:OP ...'" % where)
        _check_entry(parts[0], [parts[1]], supported, where)
        out[(parts[0], parts[1], parts[2])] = frozenset(parts[3:])
    return out


def write_in_stitch(sets: Dict[Tuple[str, str, str], FrozenSet[str]], order: List[Case]) -> None:
    """Rewrites in_stitch.txt with `sets`, in op_db's order, keeping its header."""
    header = [ln for ln in IN_STITCH.read_text().splitlines() if ln.startswith("#")]
    rank = {c.key: i for i, c in enumerate(order)}
    body = ["%s %s %s %s" % (k[0], k[1], k[2], " ".join(sorted(v)))
            for k, v in sorted(sets.items(), key=lambda kv: rank.get(kv[0], len(rank)))
            if v]
    IN_STITCH.write_text("\n".join(header + body) + "\n")


def supported_dtypes(op_db) -> Dict[str, set]:
    """op_db entry -> the dtype names of DTYPES it has on the CPU."""
    return {op_name(op): {d for d, t in DTYPES.items() if t in op.supported_dtypes("cpu")}
            for op in op_db}
