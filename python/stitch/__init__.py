"""Stitch from Python: a ctypes binding of the C API (include/stitch/stitch.h).

Design note
-----------
The binding is pure Python over ``ctypes`` so that it needs no compile step and works with any
interpreter that can load ``libstitch.so``. It mirrors the C API one to one (graphs, engines,
programs) and adds only what Python callers expect:

* Errors: every C call returning a non-zero ``stitch_status_t`` raises :class:`StitchError`,
  carrying the status (number and name) and the thread's ``stitch_last_error()`` message, read
  right after the failing call (the message is per thread and valid until the next failure).
  A bad STITCH_* value is the caller's configuration, not a failed call: :func:`check_environment`
  raises ``ValueError`` for it, as Python does for a bad argument.
* Tensors: ``stitch_program_run`` takes DLPack ``DLTensor`` structs. They are built here in ctypes
  straight from the array's own description (PyTorch: ``data_ptr()``, ``shape``, ``stride()``,
  ``dtype``, ``device``; NumPy: ``__array_interface__``; CuPy and friends:
  ``__cuda_array_interface__``), so data is never copied. The structs and their shape/stride
  arrays are kept alive by Python objects for the duration of the call only: Stitch does not
  retain tensors after a run returns.
* PyTorch's fast path is stitch/_torch_run.py, with its own design note: :meth:`Program.run_torch`
  (DLTensor arrays kept per input signature, written with data pointers and passed to the C run
  as addresses) and the host memory of its outputs (a pool of mappings, huge pages;
  :func:`host_empty`, :func:`host_allocator`). That module builds on the declarations here and
  is imported last, at the bottom of this file; ``run_torch`` is the module's function assigned
  as the method, so a call pays no wrapper. torch is imported on first use only, there as here:
  ``import stitch`` works without it.
* Ownership: each handle is owned by one Python object whose ``close()`` (also ``__del__`` and
  the context-manager exit) calls the matching ``_destroy``. Graphs borrowed from a parsed module
  keep the module alive and are never destroyed on their own, as stitch.h requires.

The library is found, in order, at ``$STITCH_LIBRARY``, inside this package (``stitch/lib``,
where the wheel puts it, or ``stitch/libstitch.so``), or in the source tree's build directories
(``build/*/src/libstitch.so``, newest first).

Versions: an installed package (the wheel) carries ``stitch/_wheel_version.py``, written by its
build from the one version in CMakeLists.txt; ``import stitch`` checks that the library it loaded is
that version (the ctypes declarations below are those of that version's stitch.h) and raises
ImportError naming both otherwise, e.g. when ``$STITCH_LIBRARY`` points at another build.
``stitch.__version__`` is the package's version, or the library's in a source tree.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import threading
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _env

__all__ = [
    "StitchError",
    "Status",
    "DTYPES",
    "Graph",
    "Engine",
    "Program",
    "parse",
    "parse_module",
    "compile",
    "library_path",
    "version",
    "__version__",
    "cache_dir",
    "backends",
    "check_environment",
    "host_empty",
    "host_allocator",
]

# ---------------------------------------------------------------------------------------------
# Loading the library
# ---------------------------------------------------------------------------------------------

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidate_paths() -> List[str]:
    env = os.environ.get("STITCH_LIBRARY")
    if env:
        # An explicit path is a promise: do not silently load some other build instead.
        return [env]
    paths = [os.path.join(_HERE, "lib", "libstitch.so"), os.path.join(_HERE, "libstitch.so")]
    repo = os.path.dirname(os.path.dirname(_HERE))
    built = glob.glob(os.path.join(repo, "build", "*", "src", "libstitch.so"))
    paths += sorted(built, key=os.path.getmtime, reverse=True)
    return paths


def _load() -> Tuple[ctypes.CDLL, str]:
    tried = []
    for path in _candidate_paths():
        if os.path.exists(path):
            return ctypes.CDLL(path), path
        tried.append(path)
    raise OSError(
        "stitch: libstitch.so not found; set STITCH_LIBRARY to its path (tried: %s)"
        % ", ".join(tried))


_lib, _lib_path = _load()


def library_path() -> str:
    """The path of the libstitch.so this process loaded."""
    return _lib_path


# ---------------------------------------------------------------------------------------------
# C declarations
# ---------------------------------------------------------------------------------------------


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _Dim(ctypes.Structure):
    _fields_ = [("size", ctypes.c_int64), ("symbol", ctypes.c_char_p)]


class _Attr(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("kind", ctypes.c_int),
        ("i", ctypes.c_int64),
        ("f", ctypes.c_double),
        ("ints", ctypes.POINTER(ctypes.c_int64)),
        ("dims", ctypes.POINTER(_Dim)),
        ("count", ctypes.c_size_t),
        ("s", ctypes.c_char_p),
    ]


class _ProgramStats(ctypes.Structure):
    _fields_ = [
        ("signatures", ctypes.c_uint64),
        ("plan_searches", ctypes.c_uint64),
        ("plan_reuses", ctypes.c_uint64),
        ("plan_classes", ctypes.c_uint64),
        ("warm_starts", ctypes.c_uint64),
    ]


class _CacheStats(ctypes.Structure):
    _fields_ = [
        ("memory_hits", ctypes.c_uint64),
        ("memory_misses", ctypes.c_uint64),
        ("disk_hits", ctypes.c_uint64),
        ("disk_misses", ctypes.c_uint64),
        ("disk_writes", ctypes.c_uint64),
        ("corrupt_entries", ctypes.c_uint64),
        ("compiles", ctypes.c_uint64),
        ("compile_seconds", ctypes.c_double),
        ("shape_classes", ctypes.c_uint64),
        ("class_sizes", ctypes.c_uint64),
        ("remote_hits", ctypes.c_uint64),
        ("remote_misses", ctypes.c_uint64),
        ("remote_writes", ctypes.c_uint64),
        ("remote_errors", ctypes.c_uint64),
    ]


_p = ctypes.c_void_p
_sz = ctypes.c_size_t
_cstr = ctypes.c_char_p
_strs = ctypes.POINTER(ctypes.c_char_p)
_i64p = ctypes.POINTER(ctypes.c_int64)


def _decl(name, restype, *argtypes):
    fn = getattr(_lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


_st = ctypes.c_int  # stitch_status_t
_version = _decl("stitch_version", _cstr)
_status_string = _decl("stitch_status_string", _cstr, ctypes.c_int)
_last_error = _decl("stitch_last_error", _cstr)
_environment_check = _decl("stitch_environment_check", _st)
_graph_create = _decl("stitch_graph_create", _st, _cstr, ctypes.POINTER(_p))
_graph_destroy = _decl("stitch_graph_destroy", None, _p)
_graph_add_input = _decl("stitch_graph_add_input", _st, _p, _cstr, ctypes.c_int,
                         ctypes.POINTER(_Dim), _sz, ctypes.POINTER(ctypes.c_int32))
_graph_add_constant = _decl("stitch_graph_add_constant", _st, _p, ctypes.c_double, ctypes.c_int,
                            ctypes.POINTER(ctypes.c_int32))
_graph_add_op = _decl("stitch_graph_add_op", _st, _p, _cstr, ctypes.POINTER(ctypes.c_int32), _sz,
                      ctypes.POINTER(_Attr), _sz, _cstr, ctypes.POINTER(ctypes.c_int32))
_graph_set_outputs = _decl("stitch_graph_set_outputs", _st, _p, ctypes.POINTER(ctypes.c_int32),
                           _sz)
_graph_verify = _decl("stitch_graph_verify", _st, _p)
_graph_parse = _decl("stitch_graph_parse", _st, _cstr, _cstr, ctypes.POINTER(_p))
_graph_print = _decl("stitch_graph_print", _st, _p, ctypes.c_char_p, _sz, ctypes.POINTER(_sz))
_graph_name = _decl("stitch_graph_name", _cstr, _p)
_graph_num_inputs = _decl("stitch_graph_num_inputs", _sz, _p)
_graph_num_outputs = _decl("stitch_graph_num_outputs", _sz, _p)
_graph_num_ops = _decl("stitch_graph_num_ops", _sz, _p)
_graph_value_info = _decl("stitch_graph_value_info", _st, _p, ctypes.c_int, _sz,
                          ctypes.POINTER(_cstr), ctypes.POINTER(ctypes.c_int),
                          ctypes.POINTER(_sz), ctypes.POINTER(_Dim), _sz)
_module_parse = _decl("stitch_module_parse", _st, _cstr, _cstr, ctypes.POINTER(_p))
_module_destroy = _decl("stitch_module_destroy", None, _p)
_module_num_graphs = _decl("stitch_module_num_graphs", _sz, _p)
_module_graph = _decl("stitch_module_graph", _p, _p, _sz)
_explain_plan = _decl("stitch_graph_explain_plan", _st, _p, _strs, _strs, _sz, _strs, _i64p, _sz,
                      ctypes.c_char_p, _sz, ctypes.POINTER(_sz))
_cache_dir_path = _decl("stitch_cache_dir_path", _st, ctypes.c_char_p, _sz, ctypes.POINTER(_sz))
_engine_create = _decl("stitch_engine_create", _st, _strs, _strs, _sz, ctypes.POINTER(_p))
_engine_destroy = _decl("stitch_engine_destroy", None, _p)
_engine_backend = _decl("stitch_engine_backend", _cstr, _p)
_engine_device = _decl("stitch_engine_device", _st, _p, ctypes.POINTER(_DLDevice))
_engine_cache_stats = _decl("stitch_engine_cache_stats", _st, _p, ctypes.POINTER(_CacheStats))
_program_stats = _decl("stitch_program_stats", _st, _p, ctypes.POINTER(_ProgramStats))
_program_compile = _decl("stitch_program_compile", _st, _p, _p, ctypes.POINTER(_p))
_program_destroy = _decl("stitch_program_destroy", None, _p)
_program_num_inputs = _decl("stitch_program_num_inputs", _sz, _p)
_program_num_outputs = _decl("stitch_program_num_outputs", _sz, _p)
_program_output_shape = _decl("stitch_program_output_shape", _st, _p, ctypes.POINTER(_DLTensor),
                              _sz, _sz, _i64p, _sz, ctypes.POINTER(_sz))
_program_run = _decl("stitch_program_run", _st, _p, ctypes.POINTER(_DLTensor), _sz,
                     ctypes.POINTER(_DLTensor), _sz, _p)
# The same function taking the DLTensor arrays as addresses (run_torch's buffers): converting a
# Python int is the cheapest argument ctypes has. A second function object, since _decl's is
# shared by attribute access and its argtypes must stay. run_torch (stitch/_torch_run.py) looks
# it up here on every call, so that a profiler may wrap it (bench/torch/models.py).
_program_run_at = _lib["stitch_program_run"]
_program_run_at.restype = _st
_program_run_at.argtypes = [_p, _p, _sz, _p, _sz, _p]


def version() -> str:
    """The version of the loaded library, "MAJOR.MINOR.PATCH"."""
    return _version().decode()


def _package_version() -> str:
    """The installed package's version (stitch/_wheel_version.py, written by the wheel's build),
    checked against the library's; the library's in a source tree, which has no such file."""
    try:
        from ._wheel_version import version as package
    except ImportError:
        return version()
    if package != version():
        raise ImportError(
            "stitch: the package is version %s but the library it loaded, %s, is version %s; "
            "unset STITCH_LIBRARY or point it at a libstitch.so of version %s"
            % (package, _lib_path, version(), package))
    return package


__version__ = _package_version()


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


class Status:
    """stitch_status_t values."""
    OK = 0
    INVALID_ARGUMENT = 1
    PARSE = 2
    INVALID_GRAPH = 3
    SHAPE_MISMATCH = 4
    BACKEND_UNAVAILABLE = 5
    COMPILE = 6
    UNSUPPORTED = 7
    OUT_OF_MEMORY = 8
    IO = 9
    INTERNAL = 10
    INDEX_OUT_OF_RANGE = 11


class StitchError(RuntimeError):
    """A failed Stitch call: ``status`` (int), ``status_name`` ("STITCH_ERROR_PARSE", ...) and
    ``message`` (the C API's stitch_last_error())."""

    def __init__(self, status: int, message: str):
        self.status = status
        self.status_name = _status_string(status).decode()
        self.message = message
        super().__init__("%s: %s" % (self.status_name, message))


def _check(status: int) -> None:
    if status != 0:
        # Read the message at once: it lives only until the next failing call on this thread.
        raise StitchError(status, _last_error().decode(errors="replace"))


def check_environment() -> None:
    """Checks every STITCH_* variable that is set (README, "Environment variables"): the
    library's ``stitch_environment_check``, which reads each with the code that uses it, then the
    package's own readers (STITCH_DISABLE, STITCH_HUGE_PAGES). Raises ``ValueError`` naming each
    bad variable, its value and the valid values (one line each). The PyTorch hook calls it when
    it is entered; a variable read only when it takes effect would otherwise fail a piece (which
    then runs eagerly) or go unnoticed."""
    status = _environment_check()
    if status == Status.INVALID_ARGUMENT:
        raise ValueError(_last_error().decode(errors="replace"))
    _check(status)
    _env.check()


def _enc(s: Optional[str]) -> Optional[bytes]:
    return None if s is None else s.encode()


def _read_buffer(fill) -> str:
    """Calls fill(buf, capacity, needed) twice if needed: once to size, once to write."""
    needed = _sz(0)
    buf = ctypes.create_string_buffer(4096)
    _check(fill(buf, len(buf), ctypes.byref(needed)))
    if needed.value >= len(buf):
        buf = ctypes.create_string_buffer(needed.value + 1)
        _check(fill(buf, len(buf), ctypes.byref(needed)))
    return buf.value.decode()


def _options(options: Mapping[str, Any]):
    keys = [str(k).encode() for k in options]
    values = [str(v).encode() for v in options.values()]
    n = len(keys)
    return (_cstr * n)(*keys), (_cstr * n)(*values), n


# ---------------------------------------------------------------------------------------------
# Data types
# ---------------------------------------------------------------------------------------------

# Stitch dtype name -> (stitch_dtype_t, DLPack code, bits).
DTYPES: Dict[str, Tuple[int, int, int]] = {
    "f16": (0, 2, 16),
    "bf16": (1, 4, 16),
    "f32": (2, 2, 32),
    "f64": (3, 2, 64),
    "i32": (4, 0, 32),
    "i64": (5, 0, 64),
    "bool": (6, 6, 8),
}
_DTYPE_BY_ENUM = {v[0]: k for k, v in DTYPES.items()}
# DLPack (code, bits) -> name; bool may also arrive as an 8-bit unsigned int (NumPy's view).
_DTYPE_BY_DL = {(v[1], v[2]): k for k, v in DTYPES.items()}
_NUMPY_TYPESTR = {"f2": "f16", "f4": "f32", "f8": "f64", "i4": "i32", "i8": "i64", "b1": "bool"}

_DL_CPU, _DL_CUDA, _DL_ROCM = 1, 2, 10


def _dtype_enum(dtype: str) -> int:
    try:
        return DTYPES[dtype][0]
    except KeyError:
        raise ValueError("unknown dtype %r (expected one of %s)" % (dtype, ", ".join(DTYPES)))


class dtype(str):
    """A dtype name marked as such, for attributes whose kind cannot be guessed from a string
    (``dtype("f16")``); attributes named ``to`` and ``dtype`` take plain names too."""


# ---------------------------------------------------------------------------------------------
# Graphs
# ---------------------------------------------------------------------------------------------

Dim = Union[int, str]


def _dims(shape: Sequence[Dim]):
    arr = (_Dim * len(shape))()
    keep = []
    for i, d in enumerate(shape):
        if isinstance(d, str):
            b = d.encode()
            keep.append(b)
            arr[i].size = 0
            arr[i].symbol = b
        else:
            arr[i].size = int(d)
            arr[i].symbol = None
    return arr, keep


def _attr(name: str, value: Any, keep: list) -> _Attr:
    a = _Attr()
    bname = name.encode()
    keep.append(bname)
    a.name = bname
    if isinstance(value, bool):
        a.kind, a.i = 2, int(value)
    elif isinstance(value, dtype) or (name in ("to", "dtype") and isinstance(value, str)):
        a.kind, a.i = 5, _dtype_enum(str(value))
    elif isinstance(value, int):
        a.kind, a.i = 0, value
    elif isinstance(value, float):
        a.kind, a.f = 1, value
    elif isinstance(value, str):
        b = value.encode()
        keep.append(b)
        a.kind, a.s = 6, b
    elif isinstance(value, (list, tuple)):
        # shape= lists (and any list holding a symbol) are dims; the rest plain int lists.
        if name == "shape" or any(isinstance(v, str) for v in value):
            arr, syms = _dims(value)
            keep += [arr, syms]
            a.kind, a.dims, a.count = 4, arr, len(value)
        else:
            arr = (ctypes.c_int64 * len(value))(*[int(v) for v in value])
            keep.append(arr)
            a.kind, a.ints, a.count = 3, arr, len(value)
    else:
        raise TypeError("attribute %s=%r: unsupported value type %s"
                        % (name, value, type(value).__name__))
    return a


class Graph:
    """A Stitch graph under construction (or parsed). Values are ints (stitch_value_t)."""

    def __init__(self, name: str = "graph", _handle: Optional[int] = None, _owner: Any = None):
        if _handle is None:
            h = _p()
            _check(_graph_create(_enc(name), ctypes.byref(h)))
            _handle = h.value
            _owner = None
        self._h = _handle
        # A borrowed graph keeps its module alive and is never destroyed by us.
        self._owner = _owner
        self._owned = _owner is None

    @property
    def handle(self) -> int:
        if not self._h:
            raise ValueError("stitch: graph is closed")
        return self._h

    def close(self) -> None:
        if self._h and self._owned:
            _graph_destroy(self._h)
        self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def add_input(self, name: str, dtype: str, shape: Sequence[Dim]) -> int:
        arr, _keep = _dims(shape)
        out = ctypes.c_int32()
        _check(_graph_add_input(self.handle, _enc(name), _dtype_enum(dtype), arr, len(shape),
                                ctypes.byref(out)))
        return out.value

    def add_constant(self, value: float, dtype: str) -> int:
        out = ctypes.c_int32()
        _check(_graph_add_constant(self.handle, float(value), _dtype_enum(dtype),
                                   ctypes.byref(out)))
        return out.value

    def add_op(self, op: str, *operands: int, name: Optional[str] = None, **attrs: Any) -> int:
        """Adds ``op(operands..., key=value...)``. Attribute kinds follow the Python value: bool,
        int, float, list of ints (a list with a symbol, or ``shape=``: dims), a dtype name for
        ``to=``/``dtype=`` (or a :class:`dtype`), any other string an identifier."""
        keep: list = []
        attr_arr = (_Attr * len(attrs))(*[_attr(k, v, keep) for k, v in attrs.items()])
        ops = (ctypes.c_int32 * len(operands))(*operands)
        out = ctypes.c_int32()
        _check(_graph_add_op(self.handle, op.encode(), ops, len(operands), attr_arr, len(attrs),
                             _enc(name), ctypes.byref(out)))
        return out.value

    def set_outputs(self, values: Iterable[int]) -> None:
        vals = list(values)
        arr = (ctypes.c_int32 * len(vals))(*vals)
        _check(_graph_set_outputs(self.handle, arr, len(vals)))

    def verify(self) -> None:
        _check(_graph_verify(self.handle))

    @property
    def name(self) -> str:
        return _graph_name(self.handle).decode()

    @property
    def num_inputs(self) -> int:
        return _graph_num_inputs(self.handle)

    @property
    def num_outputs(self) -> int:
        return _graph_num_outputs(self.handle)

    @property
    def num_ops(self) -> int:
        return _graph_num_ops(self.handle)

    def value_info(self, index: int, output: bool = False) -> Tuple[str, str, List[Dim]]:
        """(name, dtype, shape) of input (or output) `index`; symbolic dims are strings."""
        name = _cstr()
        dt = ctypes.c_int()
        rank = _sz()
        dims = (_Dim * 16)()
        _check(_graph_value_info(self.handle, int(output), index, ctypes.byref(name),
                                 ctypes.byref(dt), ctypes.byref(rank), dims, 16))
        if rank.value > 16:
            dims = (_Dim * rank.value)()
            _check(_graph_value_info(self.handle, int(output), index, ctypes.byref(name),
                                     ctypes.byref(dt), ctypes.byref(rank), dims, rank.value))
        shape: List[Dim] = [d.symbol.decode() if d.symbol else d.size
                            for d in dims[:rank.value]]
        return (name.value.decode() if name.value else "", _DTYPE_BY_ENUM[dt.value], shape)

    def text(self) -> str:
        """The graph in the .stitch text format."""
        return _read_buffer(lambda b, c, n: _graph_print(self.handle, b, c, n))

    __str__ = text

    def explain_plan(self, sizes: Optional[Mapping[str, int]] = None, format: str = "text",
                     target: Optional[str] = None, fusion: Optional[str] = None) -> Union[str, dict]:
        """stitch_graph_explain_plan; with format="json" the parsed JSON object."""
        opts = {"format": format}
        if target:
            opts["target"] = target
        if fusion:
            opts["fusion"] = fusion
        k, v, n = _options(opts)
        sizes = dict(sizes or {})
        syms = (_cstr * len(sizes))(*[s.encode() for s in sizes])
        vals = (ctypes.c_int64 * len(sizes))(*[int(x) for x in sizes.values()])
        text = _read_buffer(lambda b, c, nd: _explain_plan(self.handle, k, v, n, syms, vals,
                                                           len(sizes), b, c, nd))
        return json.loads(text) if format == "json" else text


def parse(text: str, filename: Optional[str] = None) -> Graph:
    """Parses text holding exactly one graph."""
    h = _p()
    _check(_graph_parse(text.encode(), _enc(filename), ctypes.byref(h)))
    return Graph(_handle=h.value)


class _Module:
    def __init__(self, handle: int):
        self._h = handle

    def __del__(self):
        if self._h:
            _module_destroy(self._h)
            self._h = None


def parse_module(text: str, filename: Optional[str] = None) -> Dict[str, Graph]:
    """Parses text holding one or more graphs: {name: Graph}, in file order. The graphs are
    borrowed from one parsed module, which lives as long as any of them."""
    h = _p()
    _check(_module_parse(text.encode(), _enc(filename), ctypes.byref(h)))
    module = _Module(h.value)
    graphs = {}
    for i in range(_module_num_graphs(module._h)):
        g = Graph(_handle=_module_graph(module._h, i), _owner=module)
        graphs[g.name] = g
    return graphs


# ---------------------------------------------------------------------------------------------
# Tensors as DLTensor
# ---------------------------------------------------------------------------------------------

_TORCH_DTYPES: Dict[Any, str] = {}


def _torch_dtypes() -> Dict[Any, str]:
    """torch dtype -> Stitch dtype name (torch is imported on first use only)."""
    if not _TORCH_DTYPES:
        import torch
        _TORCH_DTYPES.update({torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32",
                              torch.float64: "f64", torch.int32: "i32", torch.int64: "i64",
                              torch.bool: "bool"})
    return _TORCH_DTYPES


def _torch_dtype_name(t) -> str:
    try:
        return _torch_dtypes()[t]
    except KeyError:
        raise StitchError(Status.UNSUPPORTED, "tensor dtype %s is not supported by Stitch" % t)


def _torch_dtype(name: str):
    """The torch dtype of a Stitch dtype name (every Stitch dtype has one)."""
    return next(t for t, n in _torch_dtypes().items() if n == name)


class _TensorView:
    """A DLTensor describing someone else's memory, with the arrays it points at kept alive."""

    __slots__ = ("dl", "shape", "strides", "dtype", "device_type", "owner")

    def __init__(self, data: int, device_type: int, device_id: int, dtype: str,
                 shape: Sequence[int], strides: Optional[Sequence[int]], owner: Any):
        ndim = len(shape)
        self.shape = (ctypes.c_int64 * max(ndim, 1))(*shape)
        self.strides = (ctypes.c_int64 * max(ndim, 1))(*strides) if strides is not None else None
        self.dtype = dtype
        self.device_type = device_type
        self.owner = owner  # the array itself: its memory must outlive the call
        _, code, bits = DTYPES[dtype]
        dl = _DLTensor()
        dl.data = data or None
        dl.device = _DLDevice(device_type, device_id)
        dl.ndim = ndim
        dl.dtype = _DLDataType(code, bits, 1)
        dl.shape = ctypes.cast(self.shape, _i64p)
        dl.strides = ctypes.cast(self.strides, _i64p) if self.strides is not None else None
        dl.byte_offset = 0
        self.dl = dl


def as_dltensor(x: Any) -> _TensorView:
    """Describes x (a PyTorch tensor, a NumPy array, or anything with __array_interface__ or
    __cuda_array_interface__) as a DLTensor without copying."""
    mod = type(x).__module__
    if mod.startswith("torch"):
        dev = x.device
        if dev.type == "cpu":
            dt, di = _DL_CPU, 0
        elif dev.type == "cuda":
            # PyTorch reports ROCm devices as "cuda" too; torch.version.hip tells them apart.
            import torch
            dt = _DL_ROCM if getattr(torch.version, "hip", None) else _DL_CUDA
            di = dev.index or 0
        else:
            raise StitchError(Status.UNSUPPORTED, "tensors on %s are not supported" % dev)
        return _TensorView(x.data_ptr(), dt, di, _torch_dtype_name(x.dtype), tuple(x.shape),
                           tuple(x.stride()), x)
    cai = getattr(x, "__cuda_array_interface__", None)
    ai = cai if cai is not None else getattr(x, "__array_interface__", None)
    if ai is None:
        raise TypeError("stitch: cannot describe %s as a DLTensor" % type(x).__name__)
    typestr = ai["typestr"]
    name = _NUMPY_TYPESTR.get(typestr[1:])
    if name is None or typestr[0] == ">":
        raise StitchError(Status.UNSUPPORTED, "array typestr %r is not supported" % typestr)
    shape = tuple(ai["shape"])
    itemsize = DTYPES[name][2] // 8
    strides = None
    if ai.get("strides") is not None:
        # The array interfaces give strides in bytes; DLPack in elements.
        strides = tuple(s // itemsize for s in ai["strides"])
    return _TensorView(ai["data"][0], _DL_CUDA if cai is not None else _DL_CPU, 0, name, shape,
                       strides, x)


def _dl_array(views: Sequence[_TensorView]):
    arr = (_DLTensor * max(len(views), 1))()
    for i, v in enumerate(views):
        arr[i] = v.dl
    return arr


# ---------------------------------------------------------------------------------------------
# Engines and programs
# ---------------------------------------------------------------------------------------------


class Engine:
    """A configured backend: ``Engine(backend="cpu", fusion="stitch")``."""

    def __init__(self, **options: str):
        k, v, n = _options(options)
        h = _p()
        _check(_engine_create(k, v, n, ctypes.byref(h)))
        self._h = h.value

    @property
    def handle(self) -> int:
        return self._h

    @property
    def backend(self) -> str:
        return _engine_backend(self._h).decode()

    def device(self) -> Tuple[int, int]:
        d = _DLDevice()
        _check(_engine_device(self._h, ctypes.byref(d)))
        return d.device_type, d.device_id

    def cache_stats(self) -> Dict[str, float]:
        s = _CacheStats()
        _check(_engine_cache_stats(self._h, ctypes.byref(s)))
        return {name: getattr(s, name) for name, _ in _CacheStats._fields_}

    def compile(self, graph: Graph) -> "Program":
        return Program(self, graph)

    def close(self) -> None:
        if self._h:
            _engine_destroy(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Program:
    """A graph compiled by an engine; shape-polymorphic (kernels are made per input signature)."""

    def __init__(self, engine: Engine, graph: Graph):
        h = _p()
        _check(_program_compile(engine.handle, graph.handle, ctypes.byref(h)))
        self._h = h.value
        self.engine = engine  # programs stay valid without it, but keep its options readable
        self.output_dtypes = [graph.value_info(i, output=True)[1]
                              for i in range(graph.num_outputs)]
        # run_torch's (stitch/_torch_run.py) _TorchSignature per input signature, by key.
        self._torch_signatures: Dict[tuple, Any] = {}
        # Wall seconds of run_torch's calls on input signatures it had not seen: each signature's
        # set-up (the C API's plan, its kernels compiled or loaded from the cache) with its first
        # run. What the PyTorch hook reports as Stitch's own time beside its partitioning.
        self.first_call_seconds = 0.0

    @property
    def num_inputs(self) -> int:
        return _program_num_inputs(self._h)

    @property
    def num_outputs(self) -> int:
        return _program_num_outputs(self._h)

    def stats(self) -> Dict[str, int]:
        """Input signatures planned so far, and how: plan_searches ran the plan search,
        plan_reuses re-priced a plan kept for their shape class (README, "Shape classes")."""
        s = _ProgramStats()
        _check(_program_stats(self._h, ctypes.byref(s)))
        return {name: getattr(s, name) for name, _ in _ProgramStats._fields_}

    def output_shapes(self, inputs: Sequence[Any]) -> List[Tuple[int, ...]]:
        """The output shapes for these inputs (arrays or _TensorView)."""
        views = [i if isinstance(i, _TensorView) else as_dltensor(i) for i in inputs]
        arr = _dl_array(views)
        shapes = []
        for o in range(self.num_outputs):
            buf = (ctypes.c_int64 * 16)()
            rank = _sz()
            _check(_program_output_shape(self._h, arr, len(views), o, buf, 16,
                                         ctypes.byref(rank)))
            if rank.value > 16:
                buf = (ctypes.c_int64 * rank.value)()
                _check(_program_output_shape(self._h, arr, len(views), o, buf, rank.value,
                                             ctypes.byref(rank)))
            shapes.append(tuple(buf[:rank.value]))
        return shapes

    def run(self, inputs: Sequence[Any], outputs: Optional[Sequence[Any]] = None,
            stream: Optional[int] = None) -> List[Any]:
        """Runs on caller-owned arrays (zero-copy) and returns the outputs. Without `outputs`
        they are allocated like the first input: torch.empty on its device, or numpy.empty."""
        views = [as_dltensor(x) for x in inputs]
        if outputs is None:
            outputs = self._allocate(inputs, views)
        out_views = [as_dltensor(y) for y in outputs]
        _check(_program_run(self._h, _dl_array(views), len(views), _dl_array(out_views),
                            len(out_views), stream))
        return list(outputs)

    __call__ = lambda self, *inputs: _single(self.run(inputs))  # noqa: E731

    def _allocate(self, inputs, views):
        shapes = self.output_shapes(views)
        like = inputs[0] if inputs else None
        if like is not None and type(like).__module__.startswith("torch"):
            import torch
            tdt = {v: k for k, v in _TORCH_DTYPES.items()}
            return [torch.empty(s, dtype=tdt[d], device=like.device)
                    for s, d in zip(shapes, self.output_dtypes)]
        import numpy as np
        ndt = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i32": np.int32,
               "i64": np.int64, "bool": np.bool_}
        for d in self.output_dtypes:
            if d not in ndt:
                raise StitchError(Status.UNSUPPORTED, "NumPy has no %s; pass outputs" % d)
        return [np.empty(s, dtype=ndt[d]) for s, d in zip(shapes, self.output_dtypes)]

    # run_torch(inputs, stream=None): the PyTorch fast path, stitch/_torch_run.py (assigned at
    # the bottom of this file).

    def close(self) -> None:
        if self._h:
            _program_destroy(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _single(outs: List[Any]):
    return outs[0] if len(outs) == 1 else tuple(outs)


_engines: Dict[Tuple[Tuple[str, str], ...], Engine] = {}
_engines_lock = threading.Lock()


def engine(**options: str) -> Engine:
    """A process-wide engine per option set (engines are thread-safe and share the kernel
    cache, so one per configuration is enough)."""
    key = tuple(sorted(options.items()))
    with _engines_lock:
        e = _engines.get(key)
        if e is None:
            e = _engines[key] = Engine(**options)
        return e


def cache_dir() -> str:
    """The kernel cache's directory in effect ($STITCH_CACHE_DIR, else $XDG_CACHE_HOME/stitch,
    else ~/.cache/stitch); it need not exist yet. StitchError when the disk layer is off
    (STITCH_CACHE=0)."""
    return _read_buffer(_cache_dir_path)


BACKENDS = ("cpu", "cuda", "hip", "reference")


def backends() -> Dict[str, Optional[str]]:
    """Each backend of this build, mapped to None where it runs on this machine, else to the
    reason it does not (the library's message: no driver, no device, built without LLVM). Found
    by making an engine of each, as a caller would."""
    found: Dict[str, Optional[str]] = {}
    for name in BACKENDS:
        try:
            Engine(backend=name).close()
            found[name] = None
        except StitchError as e:
            if e.status != Status.BACKEND_UNAVAILABLE:
                raise
            found[name] = e.message
    return found


def compile(graph: Union[Graph, str], backend: str = "auto", **options: str) -> Program:
    """Compiles a Graph, or .stitch text holding one graph, on a shared engine."""
    if isinstance(graph, str):
        graph = parse(graph)
    return Program(engine(backend=backend, **options), graph)


# ---------------------------------------------------------------------------------------------
# PyTorch's fast path (stitch/_torch_run.py)
# ---------------------------------------------------------------------------------------------
# Imported last: it builds on the declarations above. The function itself becomes the method, so
# a call on the hook's hot path goes through no wrapper.
from . import _torch_run  # noqa: E402
from ._torch_run import host_allocator, host_empty  # noqa: E402
# Used by the PyTorch hook (stitch/torch/_compile.py) and the tests under their old names.
from ._torch_run import _POOLED_OUTPUT_BYTES, _HostPool, _host_pool  # noqa: E402,F401

Program.run_torch = _torch_run.run_torch
