"""The hook's settings: ``torch.compile(model, backend="stitch", options={...})``, else the
STITCH_* variables.

Each option mirrors a variable, which is its default when the option is absent (or None); an
option given wins over its variable, and the variable over the built-in default:

    option          variable            values
    backend         STITCH_BACKEND      auto | cpu | reference | cuda | hip
    fusion          STITCH_FUSION       stitch | basic | off          (engine option)
    dump            STITCH_DUMP         "plan,source" or a list of plan, source, llvm  (engine)
    dump_dir        STITCH_DUMP_DIR     a directory                   (engine option)
    plan_candidate  (none: 0)           0 .. 64                       (engine option)
    remote_cache    STITCH_REMOTE_CACHE redis://... | off             (engine option)
    autotune        STITCH_AUTOTUNE     a boolean                     (engine option)
    autotune_candidates STITCH_AUTOTUNE_CANDIDATES 1 .. 16             (engine option)
    autotune_budget_ms  STITCH_AUTOTUNE_BUDGET_MS  1 .. 600000         (engine option)
    report          STITCH_REPORT       off | stdout | stderr, True (stderr), False (off)
    disable         STITCH_DISABLE      a boolean

The other variables (STITCH_NUM_THREADS, STITCH_CACHE_DIR, STITCH_LOG_LEVEL, ...) configure what
the whole process shares (the cpu pool, the kernel cache, the log), so they are not options: one
compiled function cannot have a thread pool of its own.

Engine options go to ``stitch.engine``, each as given, else its variable's value when that is
set: an engine reads the variables once, when it is made, and ``stitch.engine`` keeps one engine
per option set for the whole process, so a variable changed between two compiles would otherwise
not reach the second. With neither, the option is left out, and the hook's engines are the ones
``stitch.engine(backend=...)`` returns to anyone else. Their values are checked by the library,
not here: the engines are made when the options are read (:meth:`CompileOptions.prepare`), so a
bad value fails the compile with the library's own words, never a piece's first run (which would
only make it run eagerly).

Backends: ``auto`` is the hook's rule, per device: ``cuda`` for CUDA tensors, ``cpu`` for CPU
tensors (``reference`` in a build without LLVM). A backend named, by the option or by
STITCH_BACKEND, runs every piece, and one that cannot take a piece's device (cpu or reference
for CUDA tensors, cuda or hip for CPU tensors) is a ValueError when the graph is compiled. One
that this build or machine lacks fails its pieces as any unavailable backend does: they run
eagerly, logged once at WARNING and marked in the report.

Every error here is a ValueError whose message names the option (or the variable), the value and
the valid values.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, Iterable, Mapping, Optional

import stitch
from stitch import StitchError, Status, _env

OPTIONS = ("autotune", "autotune_budget_ms", "autotune_candidates", "backend", "disable", "dump",
           "dump_dir", "fusion", "plan_candidate", "remote_cache", "report")
# The engine options whose variable is passed when the option is not (see the module note).
# STITCH_REMOTE_CACHE is not: the remote layer is the process's, set up from it once.
_ENGINE_VARIABLES = {"fusion": "STITCH_FUSION", "dump": "STITCH_DUMP",
                     "dump_dir": "STITCH_DUMP_DIR", "autotune": "STITCH_AUTOTUNE",
                     "autotune_candidates": "STITCH_AUTOTUNE_CANDIDATES",
                     "autotune_budget_ms": "STITCH_AUTOTUNE_BUDGET_MS"}
# The engine options that take an int (a bool is refused: True is not a count).
_INT_OPTIONS = ("plan_candidate", "autotune_candidates", "autotune_budget_ms")
BACKENDS = ("auto", "cpu", "reference", "cuda", "hip")
# The backends that can run tensors of each PyTorch device type (ROCm's PyTorch calls its GPUs
# "cuda" too).
DEVICE_BACKENDS = {"cpu": ("cpu", "reference"), "cuda": ("cuda", "hip")}
# The variables that configure the whole process: environment only (README, "Environment
# variables"; test_compile_options.py checks this list against the README's table).
PROCESS_WIDE = ("log_level", "cache", "cache_dir", "cache_max_mb", "cache_key", "cache_key_file",
                "remote_cache_namespace", "remote_cache_timeout_ms", "remote_cache_ttl",
                "remote_cache_retry_ms", "num_threads", "spin_us", "cpu_openmp",
                "cpu_streaming_stores", "cpu_features", "shape_classes", "compile_threads",
                "huge_pages", "host_pool_mb", "library", "cuda_library", "nvrtc_library",
                "hip_library", "cost_calibration")
# What the error of a value of the wrong kind says is valid.
_VALID = {
    "backend": ", ".join(BACKENDS),
    "disable": "True, False, or a boolean string (1, true, yes, on, 0, false, no, off)",
    "dump": "a comma list, or a list, of plan, source, llvm",
    "dump_dir": "a directory (a str or os.PathLike)",
    "fusion": "stitch, basic, off",
    "plan_candidate": "an integer from 0 (the planner's pick) to 64",
    "autotune": "True, False, or a boolean string (1, true, yes, on, 0, false, no, off)",
    "autotune_candidates": "an integer from 1 to 16",
    "autotune_budget_ms": "an integer from 1 to 600000",
    "remote_cache": "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], or off",
    "report": "off, stdout, stderr, True (stderr), False (off)",
}


def _invalid(name: str, value: Any) -> ValueError:
    return ValueError("stitch: torch.compile option %s=%r is not valid; valid values: %s"
                      % (name, value, _VALID[name]))


def _as_engine_value(name: str, value: Any) -> str:
    """An engine option's value as the C API's string; its kind is checked here, its value by the
    library."""
    if name == "dump" and isinstance(value, (list, tuple)):
        if not all(isinstance(v, str) for v in value):
            raise _invalid(name, value)
        return ",".join(value)
    if name == "dump_dir" and isinstance(value, os.PathLike):
        value = os.fspath(value)
    if name in _INT_OPTIONS and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if name == "autotune" and isinstance(value, bool):
        return "1" if value else "0"
    if not isinstance(value, str):
        raise _invalid(name, value)
    return value


def _bool(name: str, value: Any) -> bool:
    b = value if isinstance(value, bool) else \
        _env.parse_bool(value) if isinstance(value, str) else None
    if b is None:
        raise _invalid(name, value)
    return b


def _report_stream(value: Any) -> str:
    if value is True:
        return "stderr"
    if value is False:
        return "off"
    if value not in _env.REPORT_STREAMS:
        raise _invalid("report", value)
    return value


class CompileOptions:
    """The resolved settings of one torch.compile call (or of the environment alone:
    :meth:`from_environment`), and the engine each device's pieces run on."""

    def __init__(self, backend: str, backend_setting: str, engine_options: Dict[str, str],
                 given: Dict[str, Any], report: str, disable: bool):
        self.backend = backend
        self.backend_setting = backend_setting  # how errors name it: option or variable
        self.engine_options = engine_options    # options given, else their variables' values
        self.given = given                      # the options as the caller gave them
        self.report = report
        self.disable = disable
        self._engines: Dict[str, "stitch.Engine"] = {}  # by device type

    @classmethod
    def from_environment(cls) -> "CompileOptions":
        """The settings without options: the variables' (stitch.torch.optimize's too)."""
        return cls.parse(None)

    @classmethod
    def parse(cls, options: Optional[Mapping[str, Any]], mode: Optional[str] = None
              ) -> "CompileOptions":
        """Reads torch.compile's `options` and `mode`; ValueError naming each problem, one per
        line. The engine options' values are checked by :meth:`prepare`."""
        if mode not in (None, "default"):
            raise ValueError(
                "stitch: torch.compile mode=%r is not supported: Stitch has no modes; pass "
                "settings with options={...} (valid options: %s)" % (mode, ", ".join(OPTIONS)))
        options = dict(options or {})
        problems = []
        for name in options:
            if name in OPTIONS:
                continue
            line = "stitch: unknown torch.compile option %r; valid options: %s" % (
                name, ", ".join(OPTIONS))
            if isinstance(name, str) and name.lower() in PROCESS_WIDE:
                line += " (%s is an environment variable only, STITCH_%s: it configures the " \
                        "whole process)" % (name, name.upper())
            problems.append(line)
        given = {k: v for k, v in options.items() if k in OPTIONS and v is not None}
        resolved: Dict[str, Any] = {}
        engine_options: Dict[str, str] = {}
        for name, value in given.items():
            try:
                if name == "backend":
                    if value not in BACKENDS:
                        raise _invalid(name, value)
                    resolved[name] = value
                elif name == "disable":
                    resolved[name] = _bool(name, value)
                elif name == "report":
                    resolved[name] = _report_stream(value)
                else:
                    engine_options[name] = _as_engine_value(name, value)
            except ValueError as e:
                problems.append(str(e))
        if problems:
            raise ValueError("\n".join(problems))
        for name, variable in _ENGINE_VARIABLES.items():
            if name not in engine_options and os.environ.get(variable):
                engine_options[name] = os.environ[variable]  # checked by check_environment
        if "backend" in resolved:
            backend, setting = resolved["backend"], "torch.compile option backend"
        else:
            backend, setting = _env.backend(), _env.BACKEND
        return cls(backend, setting, engine_options, given,
                   resolved["report"] if "report" in resolved else _env.report(),
                   resolved["disable"] if "disable" in resolved else _env.disabled())

    # -- engines ----------------------------------------------------------------------------
    @property
    def fusion(self) -> Optional[str]:
        """The fusion mode the engines are given (None: neither the option nor STITCH_FUSION,
        so the default)."""
        return self.engine_options.get("fusion")

    def engine_for(self, device: Any) -> "stitch.Engine":
        """The engine for tensors on `device` (a torch.device), made on first use and kept.
        ValueError for a backend that cannot run the device's tensors, or a bad engine option;
        StitchError for an unavailable backend (the piece then runs eagerly)."""
        kind = device.type
        e = self._engines.get(kind)
        if e is None:
            e = self._engines[kind] = self._make_engine(kind)
        return e

    def _make_engine(self, kind: str) -> "stitch.Engine":
        if self.backend == "auto":
            if kind == "cuda":
                return self._engine("cuda")
            try:
                return self._engine("cpu")
            except StitchError as e:
                if e.status != Status.BACKEND_UNAVAILABLE:
                    raise
                # A build without LLVM: the reference interpreter is slow but exact.
                return self._engine("reference")
        if self.backend not in DEVICE_BACKENDS.get(kind, ()):
            if self.backend_setting == _env.BACKEND:
                setting = "%s=%s" % (_env.BACKEND, self.backend)
            else:
                setting = "%s=%r" % (self.backend_setting, self.backend)
            raise ValueError("stitch: %s cannot run the graph's %s tensors; valid values for "
                             "them: %s" % (setting, kind,
                                           ", ".join(("auto",) + DEVICE_BACKENDS.get(kind, ()))))
        return self._engine(self.backend)

    def _engine(self, backend: str) -> "stitch.Engine":
        try:
            return stitch.engine(backend=backend, **self.engine_options)
        except StitchError as e:
            if e.status != Status.INVALID_ARGUMENT or not self.engine_options:
                raise
            raise self._bad_engine_option(e) from None

    def _bad_engine_option(self, error: StitchError) -> ValueError:
        """The library's error for the engine options, with the option that is wrong named: the
        first that fails on an engine of its own."""
        for name, text in self.engine_options.items():
            try:
                stitch.Engine(backend="reference", **{name: text}).close()
            except StitchError as e:
                if e.status != Status.INVALID_ARGUMENT:
                    continue
                message = e.message
                if message.startswith(name):  # "dump=plan,ptx is not valid; ..."
                    return ValueError("stitch: torch.compile option " + message)
                return ValueError("stitch: torch.compile option %s=%r is not valid: %s"
                                  % (name, self.given.get(name, text), message))
        return ValueError("stitch: torch.compile options %s are not valid: %s"
                          % (", ".join(self.engine_options), error.message))

    def check_engine_options(self) -> None:
        """Checks the engine options' values (ValueError), on the reference interpreter, which
        every build has."""
        if self.engine_options:
            self._engine("reference")

    def prepare(self, device_types: Iterable[str],
                runnable_only: bool = False) -> Dict[str, "stitch.Engine"]:
        """Makes the engines of these device types now ("cpu", "cuda"; others are not Stitch's),
        which checks the backend against each and the engine options' values (ValueError).
        `runnable_only`: skips the types the backend cannot run rather than raising (the graph's
        inputs, when Dynamo enters the backend: a CPU scalar beside a CUDA model's tensors
        matters only if a piece runs on it, which its graph's compile finds). An unavailable
        backend is left to the pieces (they run eagerly and say so). With no engine made, the
        engine options are still checked, on the reference interpreter. Returns the engines
        made, by device type."""
        import torch
        made = {}
        for kind in sorted(set(device_types)):
            if kind not in DEVICE_BACKENDS or runnable_only and self.backend != "auto" and \
                    self.backend not in DEVICE_BACKENDS[kind]:
                continue
            try:
                made[kind] = self.engine_for(torch.device(kind))
            except StitchError as e:
                if e.status != Status.BACKEND_UNAVAILABLE:
                    raise
        if not made:
            self.check_engine_options()
        return made

    # -- the report -------------------------------------------------------------------------
    def print_report(self, title: str, report: Any) -> None:
        """Prints `report` (a GraphReport) under `title` where the report option says (looked up
        at each print, so a replaced sys.stdout, pytest's capture say, is the one written)."""
        if self.report == "off":
            return
        stream = sys.stdout if self.report == "stdout" else sys.stderr
        print("%s\n%s" % (title, report), file=stream, flush=True)
