"""PyTorch's fast path: :meth:`stitch.Program.run_torch` and the host memory of its outputs.

Design note
-----------
What lives here is what the package needs only to run programs on PyTorch tensors call after
call, as the PyTorch hook (stitch/torch) does per piece; the ctypes binding itself (library,
C declarations, errors, graphs, engines, programs, DLTensors of any array) is stitch/__init__.py.
That module imports this one last, attaches :func:`run_torch` to ``Program`` as the function
itself (no wrapper: the hook's budget is a few microseconds per piece) and re-exports
``host_empty`` and ``host_allocator``. torch is imported inside the functions, so that
``import stitch`` works without it.

* The hot path, :func:`run_torch`: a piece of a compiled PyTorch graph is called with tensors
  of the same shapes call after call, so building DLTensors and asking for output shapes on
  every call (tens of microseconds) would cost more than a small piece computes. Per input
  signature (each tensor's shape, dtype and device, after non-contiguous inputs are made
  contiguous: a copy, as eager PyTorch would make for an op that needs one) it keeps the output
  shapes and dtypes and DLTensor arrays that are complete but for the data pointers
  (:class:`_TorchSignature`). A repeat call writes the pointers, allocates the outputs with
  ``torch.empty`` and makes one C call, whose repeat path compares the descriptions with the
  run it checked first (api_program.cpp). Contiguous inputs are passed with NULL strides, which
  is exact for them (``is_contiguous()`` is compact row-major but for dims of size 1).
  Correctness never rests on the cache: a signature not seen goes through
  ``stitch_program_output_shape``, and the C run checks every call. Concurrent calls each take
  their own array copy from a per-signature pool (:class:`_TorchCall`), so threads never write
  each other's pointers. The C function is looked up on the package per call
  (``stitch._program_run_at``), so that a profiler can wrap it there (bench/torch/models.py).
* Fresh host outputs and page faults: a CPU output of a megabyte or more from ``torch.empty`` is
  a block that glibc maps, or takes from a heap it has trimmed, and every 4 KiB page of it faults
  on first touch; on the machines we run on a fault costs about as much as writing the page, so the
  faults, not the kernel, set the time of such a piece (Llama's SwiGLU piece, [1024, 640]: 0.07 ms
  alone, 0.6-0.8 ms in the model). run_torch takes those outputs from a pool of private anonymous
  mappings instead (_HostPool): a tensor over a ctypes array exported from the mapping
  (``torch.frombuffer``; its storage holds the array, so the array dies with the storage, views
  included), whose finalizer gives the mapping back; the next output of that size reuses it, its
  pages faulted already. ``STITCH_HOST_POOL_MB`` (default 1024) bounds the freed bytes kept; 0
  turns the pool off. The PyTorch hook gives its graphs' matmuls their outputs from the same
  pool (stitch.host_empty; Inductor reuses buffers in its graphs to the same end). Such tensors
  are not resizable, as any from ``torch.frombuffer``. Outputs of 32 MiB or more are also advised
  into transparent huge pages (``madvise(MADV_HUGEPAGE)``, ``STITCH_HUGE_PAGES``, default on): a
  2 MiB page faults once, 4x less time per byte on the development VM; with the pool off they get
  a mapping of their own on every call, unmapped when the tensor dies (from 32 MiB because glibc
  maps, and faults, every block that large anyway: its adaptive mmap threshold rises to the size
  of the blocks a program frees, up to 32 MiB; taking 4 MiB blocks from fresh mappings of their
  own kept the threshold low, and a 1 MB layer norm after a large graph then faulted its output on
  every call: 10x slower, measured). With both off, ``torch.empty``; under an allocator that keeps
  freed memory (jemalloc, tcmalloc, glibc with ``MALLOC_MMAP_THRESHOLD_`` raised) it reuses pages
  already faulted too.
"""

from __future__ import annotations

import collections
import ctypes
import mmap
import sys
import threading
import time
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple

import stitch as _stitch  # the package, for _program_run_at per call (design note above)

# stitch/__init__.py imports this module after defining these.
from . import (DTYPES, _check, _DL_CPU, _DLDataType, _DLDevice, _DLTensor, _env, _i64p,
               _TensorView, _torch_dtype, as_dltensor)

# ---------------------------------------------------------------------------------------------
# run_torch
# ---------------------------------------------------------------------------------------------


def run_torch(self, inputs: Sequence[Any], stream: Optional[int] = None) -> List[Any]:
    """Runs on PyTorch tensors on one device and returns new output tensors: the fast path
    for calls that repeat input signatures (design note at the top of stitch/_torch_run.py).
    Non-contiguous inputs are copied to contiguous ones first. `stream`: the CUDA/HIP stream to
    run on, as an int (``torch.cuda.current_stream().cuda_stream``, on which the outputs are
    allocated); None: the default stream. (``Program.run_torch``; `self` is the Program.)"""
    ins = [t if t.is_contiguous() else t.contiguous() for t in inputs]
    key = tuple([d for t in ins for d in (t.shape, t.dtype, t.device)])
    sig = self._torch_signatures.get(key)
    t0 = None
    if sig is None:
        t0 = time.perf_counter()
        sig = _new_signature(self, ins, key)
    empty, empty_like, contiguous = sig.empty, sig.empty_like, sig.contiguous
    if sig.host:  # apart, so that the usual call pays nothing for host mappings
        outs = [sig.host_empty(*h) if h else
                empty_like(ins[i], memory_format=contiguous) if i >= 0 else
                empty(shape, dtype=dt, device=dev)
                for h, i, (shape, dt, dev) in zip(sig.host, sig.like, sig.outputs)]
    else:
        outs = [empty_like(ins[i], memory_format=contiguous) if i >= 0 else
                empty(shape, dtype=dt, device=dev) for i, (shape, dt, dev) in zip(sig.like, sig.outputs)]
    pool = sig.pool
    try:
        call = pool.pop()
    except IndexError:
        call = _TorchCall(sig)
    words = call.words
    for k, t in zip(sig.data_words, ins + outs):
        words[k] = t.data_ptr()
    status = _stitch._program_run_at(self._h, call.inputs, len(ins), call.outputs, len(outs),
                                     stream)
    pool.append(call)
    if t0 is not None:
        self.first_call_seconds += time.perf_counter() - t0
    if status:
        _check(status)
    return outs


def _new_signature(program: Any, ins: List[Any], key: tuple) -> "_TorchSignature":
    """Makes (and keeps, in program._torch_signatures) what run_torch needs for one input
    signature. The C API checks the inputs here (stitch_program_output_shape), so nothing is
    kept for a signature it refuses."""
    views = [as_dltensor(t) for t in ins]
    shapes = program.output_shapes(views)
    # Outputs go where the inputs are (the C run checks that this is the engine's device).
    if ins:
        device, dl_device = ins[0].device, views[0].dl.device
    else:
        import torch
        dl_type, dl_id = program.engine.device()
        dl_device = _DLDevice(dl_type, dl_id)
        device = torch.device("cpu") if dl_type == _DL_CPU else torch.device("cuda", dl_id)
    sig = _TorchSignature(ins, views, shapes, program.output_dtypes, device, dl_device)
    if len(program._torch_signatures) >= _TORCH_SIGNATURES_KEPT:
        program._torch_signatures.clear()  # shapes that never repeat: start over
    program._torch_signatures[key] = sig
    return sig


# Input signatures run_torch keeps per program. Beyond it the cache starts over: a model whose
# shapes change on every call gains nothing from it, and the entries are small (~1 KiB).
_TORCH_SIGNATURES_KEPT = 1024
# Words (uint64) per DLTensor; the data pointer is the first.
_DL_WORDS = ctypes.sizeof(_DLTensor) // 8


class _TorchSignature:
    """What run_torch keeps for one input signature: the outputs' (shape, torch dtype, device),
    for each output an input of the same shape and dtype or -1 (`like`: torch.empty_like of it,
    contiguous, costs ~0.5 us less than torch.empty with a shape, dtype and device to parse, a
    tenth of a small call's overhead), the DLTensors of the inputs then the outputs as words,
    complete but for the data pointers (strides NULL: the tensors are contiguous), the shape
    arrays they point at, a pool of _TorchCall buffers copied from them, and `host`: per output,
    the arguments of `host_empty` (the pool's, or _huge_page_empty with the pool off) for those
    run_torch gives a mapping (design note at the top) or None, or an empty list when there are
    none."""

    __slots__ = ("outputs", "like", "template", "shapes", "data_words", "pool", "empty", "empty_like",
                 "contiguous", "num_inputs", "host", "host_empty")

    def __init__(self, ins: Sequence[Any], views: Sequence[_TensorView],
                 shapes: Sequence[Tuple[int, ...]], dtypes: Sequence[str], device: Any,
                 dl_device: _DLDevice):
        import torch
        self.empty, self.empty_like = torch.empty, torch.empty_like
        self.contiguous = torch.contiguous_format
        self.outputs = [(tuple(s), _torch_dtype(d), device) for s, d in zip(shapes, dtypes)]
        self.like = [next((i for i, t in enumerate(ins) if tuple(t.shape) == shape and t.dtype == dt), -1)
                     for shape, dt, _ in self.outputs]
        self.num_inputs = len(views)
        n = len(views) + len(shapes)
        dl = (_DLTensor * max(n, 1))()
        self.shapes = []
        for i, v in enumerate(views):
            self.shapes.append(v.shape)
            dl[i] = v.dl
            dl[i].data = None
            dl[i].strides = None
        for j, (shape, dt) in enumerate(zip(shapes, dtypes)):
            arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
            self.shapes.append(arr)
            _, code, bits = DTYPES[dt]
            t = dl[len(views) + j]
            t.device = dl_device
            t.ndim = len(shape)
            t.dtype = _DLDataType(code, bits, 1)
            t.shape = ctypes.cast(arr, _i64p)
        self.template = (ctypes.c_uint64 * (len(dl) * _DL_WORDS)).from_buffer_copy(dl)
        self.data_words = [k * _DL_WORDS for k in range(n)]
        self.pool: List[_TorchCall] = []
        # Per output, the arguments of host_empty for those that get a mapping (design note at
        # the top: from the pool, or of its own for huge pages), else None; [] for none.
        self.host: List[Optional[tuple]] = []
        self.host_empty = None
        pool = _host_pool() if dl_device.device_type == _DL_CPU else None
        huge = dl_device.device_type == _DL_CPU and _huge_pages_wanted()
        if pool is not None or huge:
            self.host_empty = pool.empty if pool is not None else _huge_page_empty
            least = _POOLED_OUTPUT_BYTES if pool is not None else _HUGE_OUTPUT_BYTES
            for shape, torch_dtype, _ in self.outputs:
                count = 1
                for d in shape:
                    count *= d
                nbytes = count * _itemsize(torch_dtype)
                mapped = nbytes >= least
                self.host.append((nbytes, torch_dtype, count, shape,
                                  huge and nbytes >= _HUGE_OUTPUT_BYTES) if mapped else None)
            if not any(self.host):
                self.host = []


class _TorchCall:
    """One run_torch call's DLTensors (a copy of its signature's template) and their addresses.
    A call takes one from the pool and puts it back after the C call: concurrent calls never
    share one."""

    __slots__ = ("words", "inputs", "outputs")

    def __init__(self, sig: _TorchSignature):
        self.words = type(sig.template).from_buffer_copy(sig.template)
        self.inputs = ctypes.addressof(self.words)
        self.outputs = self.inputs + sig.num_inputs * ctypes.sizeof(_DLTensor)


# ---------------------------------------------------------------------------------------------
# Host outputs: huge pages and the pool of mappings
# ---------------------------------------------------------------------------------------------

# Host outputs from this size up get a huge-page mapping of their own (design note at the top):
# glibc's largest mmap threshold (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit), above which it maps
# every block; their faults cost milliseconds against the few microseconds of the mapping.
_HUGE_OUTPUT_BYTES = 32 << 20


def _huge_pages_wanted() -> bool:
    """STITCH_HUGE_PAGES (default on), on Linux, where Python's mmap can advise."""
    if not sys.platform.startswith("linux") or not _env.huge_pages():
        return False
    return hasattr(mmap, "MADV_HUGEPAGE") and hasattr(mmap, "MAP_PRIVATE")


def _new_mapping(nbytes: int, huge: bool) -> mmap.mmap:
    """A private anonymous mapping, advised into transparent huge pages if `huge`. The advice is
    a hint: refused (THP compiled out), the pages are the usual ones."""
    m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    if huge:
        try:
            m.madvise(mmap.MADV_HUGEPAGE)
        except OSError:
            pass
    return m


def _huge_page_empty(nbytes: int, dtype: Any, count: int, shape: Tuple[int, ...], huge: bool):
    """An uninitialized contiguous CPU tensor over a mapping of its own (unmapped when the tensor
    dies)."""
    import torch
    return torch.frombuffer(_new_mapping(nbytes, huge), dtype=dtype, count=count).view(shape)


# Host outputs from this size up come from the pool (design note at the top). Below it glibc's
# heap serves blocks without faults once its adaptive mmap threshold has risen past them (the
# first large block a program frees does that): Llama's steps (f32 and bf16 inference, GPT-2's f32
# training) faulted as often with 128 KiB here as with 1 MiB, and the pool's Python work per output
# (a finalizer, a ctypes array, a tensor over it: ~3.6 us against torch.empty's ~0.9) cost Llama's
# bf16 inference step ~0.5 ms over its ~100 outputs of 128 KiB-1 MiB (weights cast by autocast).
_POOLED_OUTPUT_BYTES = 1 << 20


class _HostPool:
    """Mappings for host outputs, reused once the tensor over one has died (design note at the
    top). A tensor is made over a ctypes array exported from the mapping; its storage holds the
    array, so the array dies with the storage, views included, and its finalizer puts the
    mapping back. Sizes are rounded up to one of 8 classes per power of two (at most 12.5% more),
    so that outputs whose sizes vary a little (dynamic shapes) share blocks. Freed blocks are
    kept by class up to `keep` bytes; beyond, the least recently freed are dropped (unmapped), so
    sizes that stopped recurring do not hold the pool. Thread-safe: a finalizer runs on whichever
    thread drops the last reference."""

    def __init__(self, keep: int):
        self.keep = keep
        self.kept = 0
        self.free: Dict[int, List[mmap.mmap]] = {}  # by class, most recently freed last
        self.order: "collections.OrderedDict[int, Tuple[int, mmap.mmap]]" = \
            collections.OrderedDict()  # id(mapping) -> (class, mapping), least recent first
        self.arrays: Dict[int, Any] = {}  # the ctypes array type of each class
        self.lock = threading.Lock()

    @staticmethod
    def size_class(nbytes: int) -> int:
        step = max(4096, (1 << (nbytes.bit_length() - 1)) >> 3)
        return (nbytes + step - 1) // step * step

    def empty(self, nbytes: int, dtype: Any, count: int, shape: Tuple[int, ...], huge: bool):
        import torch
        size = self.size_class(nbytes)
        m = None
        with self.lock:
            blocks = self.free.get(size)
            if blocks:
                m = blocks.pop()
                del self.order[id(m)]
                self.kept -= size
            array = self.arrays.get(size)
            if array is None:
                array = self.arrays[size] = ctypes.c_char * size
        if m is None:
            m = _new_mapping(size, huge)
        a = array.from_buffer(m)
        weakref.finalize(a, self._give_back, m, size).atexit = False
        return torch.frombuffer(a, dtype=dtype, count=count).view(shape)

    def _give_back(self, m: mmap.mmap, size: int) -> None:
        with self.lock:
            if size > self.keep:
                return
            self.free.setdefault(size, []).append(m)
            self.order[id(m)] = (size, m)
            self.kept += size
            while self.kept > self.keep:
                _, (old_size, old) = self.order.popitem(last=False)
                self.free[old_size].remove(old)
                self.kept -= old_size


_pool: Optional[_HostPool] = None
_pool_lock = threading.Lock()


_itemsizes: Dict[Any, int] = {}


def _itemsize(dtype: Any) -> int:
    """dtype.itemsize (PyTorch 2.1 and later; 1.13 has element_size only), cached."""
    n = _itemsizes.get(dtype)
    if n is None:
        import torch
        n = _itemsizes[dtype] = (dtype.itemsize if hasattr(dtype, "itemsize") else
                                 torch.empty((), dtype=dtype).element_size())
    return n


def host_empty(shape: Tuple[int, ...], dtype: Any) -> Any:
    """An uninitialized contiguous CPU tensor for a result of at least 1 MiB from run_torch's
    pool of host mappings (design note at the top of stitch/_torch_run.py), else (or with
    STITCH_HOST_POOL_MB=0) from torch.empty. Reads the environment on each call; a caller that
    allocates on every call takes host_allocator() once instead, as the PyTorch hook does for
    its graphs' matmuls."""
    return host_allocator()(shape, dtype)


def host_allocator() -> Any:
    """host_empty with the environment read now: a function (shape, dtype) -> tensor."""
    import torch
    pool, huge = _host_pool(), _huge_pages_wanted()
    empty = torch.empty

    def allocate(shape: Tuple[int, ...], dtype: Any) -> Any:
        count = 1
        for d in shape:
            count *= d
        nbytes = count * _itemsize(dtype)
        if pool is None or nbytes < _POOLED_OUTPUT_BYTES:
            return empty(shape, dtype=dtype)
        return pool.empty(nbytes, dtype, count, tuple(shape), huge and nbytes >= _HUGE_OUTPUT_BYTES)
    return allocate


def _host_pool() -> Optional[_HostPool]:
    """The process's pool (STITCH_HOST_POOL_MB, default 1024; 0: none), on Linux."""
    global _pool
    if not sys.platform.startswith("linux") or not hasattr(mmap, "MAP_PRIVATE"):
        return None
    keep = _env.host_pool_mb() << 20
    if keep == 0:
        return None
    with _pool_lock:
        if _pool is None or _pool.keep != keep:
            _pool = _HostPool(keep)
        return _pool
