"""One OpInfo case through torch.compile against eager, sample by sample.

For each sample (the first N of the entry's ``sample_inputs``, made under the case's seed):

1. Eager: the entry's function variant (``op.get_op()``) on a copy of the inputs; then, where the
   entry supports autograd in this dtype, ``torch.autograd.grad`` of its differentiable outputs
   (after the sample's ``output_process_fn_grad``, as PyTorch's gradient tests do) against seeded
   random cotangents, with respect to every floating input that requires grad.
2. Compiled: the same through ``torch.compile(fn, backend=..., dynamic=False|True)`` on a fresh
   Dynamo (reset before each sample, so a sample reproduces alone and no sample rides on another's
   compiled graphs or hits Dynamo's recompile limit, where it would silently run eagerly).
3. Compared, outputs and then gradients (a gradient eager leaves None is compared as zeros):

   * with ``torch.testing.assert_close`` against eager: dtype and shape exact, values within
     PyTorch's tolerance for the dtype (f32: rtol 1.3e-6, atol 1e-5; bf16: rtol 1.6e-2, atol
     1e-5), widened only where op_db itself declares a tolerance for Inductor's OpInfo test (a
     compiler against eager, the same comparison), NaN equal to NaN;
   * where that fails, against a float64 reference (eager on the inputs upcast to f64, with the
     same cotangents), element by element: the compiled value must be within the dtype's
     tolerance of the reference or no farther from it than M times eager's value is (M = 3 for
     f16/bf16, 2 otherwise: the multipliers of torch._dynamo's accuracy check, which compares
     RMSEs; here each element must pass). A compiler that rounds where PyTorch's kernels do not
     (or the reverse) differs from eager by an ulp of the result, which bf16's atol cannot absorb
     where the result cancels to near 0; one that loses precision is caught all the same.

   Where eager raises in the forward, the compiled function must raise too (any exception);
   where only eager's backward raises (a derivative PyTorch does not implement), the compiled
   forward is compared and its backward may raise.

A Stitch piece that ran eagerly at run time (the report's ``runtime_fallbacks``: a program Stitch
accepted when partitioning and then could not compile or run) fails the sample: it is a Stitch
bug that no value comparison would show. What ran in Stitch is read from the reports
(stitch.torch.all_reports()) after each sample.
"""

from __future__ import annotations

import itertools
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

import torch
import torch.utils._pytree as pytree

from opinfo_cases import Case

FAIL_RAISES = "raises"
FAIL_WRONG = "wrong"
FAIL_FALLBACK = "fallback"


@dataclass
class SampleFailure:
    index: int
    kind: str     # FAIL_RAISES, FAIL_WRONG or FAIL_FALLBACK
    phase: str    # "forward", "backward", "run" (a piece fell back to eager at run time)
    message: str


@dataclass
class CaseResult:
    samples: int = 0                       # samples run
    failures: List[SampleFailure] = field(default_factory=list)
    in_stitch: Set[str] = field(default_factory=set)     # "fw:aten.x", "bw:aten.y"
    fallbacks: Dict[str, Set[str]] = field(default_factory=dict)  # "fw:aten.x" -> reasons
    eager_raised: int = 0                  # samples eager cannot run (the compiled raised too)
    random: Optional[str] = None           # eager output depends on the RNG: why


def _tolerance(case: Case) -> Dict[str, float]:
    """op_db's own tolerance for Inductor's OpInfo test on the CPU in this dtype, if any."""
    from torch.testing._internal.common_device_type import toleranceOverride
    for dec in case.op.get_decorators("TestInductorOpInfo", "test_comprehensive", "cpu",
                                      case.torch_dtype, {}):
        if isinstance(dec, toleranceOverride) and case.torch_dtype in dec.d:
            t = dec.d[case.torch_dtype]
            return {"rtol": t.rtol, "atol": t.atol}
    return {}


def samples_of(case: Case, count: Optional[int], index: Optional[int]) -> List[Tuple[int, Any]]:
    """(index, SampleInput) of the samples to run."""
    torch.manual_seed(case.seed)
    gen = case.op.sample_inputs("cpu", case.torch_dtype, requires_grad=_wants_grad(case))
    if index is not None:
        picked = list(itertools.islice(gen, index + 1))
        return [(index, picked[index])] if len(picked) > index else []
    return list(enumerate(gen if count is None else itertools.islice(gen, count)))


def _wants_grad(case: Case) -> bool:
    return case.op.supports_autograd and \
        case.torch_dtype in case.op.supported_backward_dtypes("cpu")


def _inputs(sample, upcast: bool) -> Any:
    """(input, args, kwargs) of the sample, copied: tensors detached (new leaves, requires_grad
    kept; dense layouts kept, a transposed sample stays transposed); with `upcast`, floating
    tensors in float64 and complex ones in complex128 (the reference)."""
    def c(t):
        if not isinstance(t, torch.Tensor):
            return t
        r = t.detach().clone()
        if upcast and r.is_floating_point():
            r = r.to(torch.float64)
        elif upcast and r.is_complex():
            r = r.to(torch.complex128)
        return r.requires_grad_(t.requires_grad)
    return pytree.tree_map(c, (sample.input, sample.args, sample.kwargs))


@dataclass
class _Run:
    out: Any = None
    grads: Optional[List[Optional[torch.Tensor]]] = None
    error: Optional[BaseException] = None
    phase: str = ""


def _run(fn, sample, seed: int, want_grad: bool, cot_dtype: torch.dtype,
         upcast: bool = False) -> _Run:
    """fn on a copy of the sample, then the gradients of its differentiable outputs against
    cotangents drawn from `seed`, rounded to `cot_dtype` (the case's dtype: so the float64
    reference gets the very cotangents the low-precision runs get)."""
    r = _Run()
    inp, args, kwargs = _inputs(sample, upcast)
    leaves = [t for t in pytree.tree_leaves((inp, args, kwargs))
              if isinstance(t, torch.Tensor) and t.requires_grad]
    torch.manual_seed(seed)
    try:
        r.phase = "forward"
        r.out = fn(inp, *args, **kwargs)
        if not (want_grad and leaves):
            return r
        r.phase = "backward"
        outs = [o for o in pytree.tree_leaves(sample.output_process_fn_grad(r.out))
                if isinstance(o, torch.Tensor) and o.requires_grad]
        if not outs:
            return r
        g = torch.Generator().manual_seed(seed)
        cot = [torch.randn(o.shape, generator=g, dtype=torch.float32).to(cot_dtype).to(o.dtype)
               if o.is_floating_point() else torch.ones_like(o) for o in outs]
        r.grads = list(torch.autograd.grad(outs, leaves, cot, allow_unused=True))
    except Exception as e:  # noqa: BLE001 - compared below: which side raised, and where
        r.error = e
    return r


def _close(actual: Any, expected: Any, tol: Dict[str, float]) -> Optional[str]:
    try:
        torch.testing.assert_close(actual, expected, equal_nan=True, **tol)
        return None
    except AssertionError as e:
        return str(e)


def _no_worse(actual: torch.Tensor, expected: torch.Tensor, reference: torch.Tensor,
              tol: Dict[str, float]) -> Optional[str]:
    """The float64-reference criterion of the module note, for one floating tensor."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype or \
            reference.shape != actual.shape:
        return "shape or dtype differs"
    from torch.testing._comparison import default_tolerances
    rtol, atol = (tol["rtol"], tol["atol"]) if tol else default_tolerances(actual)
    m = 3.0 if actual.dtype in (torch.float16, torch.bfloat16) else 2.0
    a, e, r = (t.detach().to(torch.float64) for t in (actual, expected, reference))
    err = (a - r).abs()
    bound = m * (e - r).abs() + atol + rtol * r.abs()
    ok = (err <= bound) | (a == e) | (a.isnan() & e.isnan())
    if bool(ok.all()):
        return None
    bad = (~ok).nonzero()
    i = tuple(int(k) for k in bad[0]) if bad.numel() and a.dim() else ()
    return ("%d of %d element(s) farther from the float64 reference than %g x eager's error + "
            "atol %g + rtol %g x |reference|; at index %s: compiled %r, eager %r, reference %r"
            % (bad.shape[0] if a.dim() else 1, max(a.numel(), 1), m, atol, rtol, list(i),
               a[i].item(), e[i].item(), r[i].item()))


def _agree(actual: Any, expected: Any, reference: Any, tol: Dict[str, float]) -> Optional[str]:
    """None when `actual` (the compiled run's outputs or gradients) agrees with eager's by
    assert_close, or failing that, by the float64-reference criterion; else what differs."""
    msg = _close(actual, expected, tol)
    if msg is None or reference is None:
        return msg
    a_leaves, e_leaves, r_leaves = (pytree.tree_leaves(x) for x in (actual, expected, reference))
    if not len(a_leaves) == len(e_leaves) == len(r_leaves):
        return msg
    for a, e, r in zip(a_leaves, e_leaves, r_leaves):
        if isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor) and \
                isinstance(r, torch.Tensor) and a.is_floating_point() and r.is_floating_point():
            why = _no_worse(a, e, r, tol)
            if why is not None:
                return "%s\nAgainst the float64 reference: %s" % (msg, why)
        elif _close(a, e, tol) is not None:
            return msg
    return None


def _grads_agree(mine: _Run, eager: _Run, ref: Optional[_Run], tol) -> Optional[str]:
    if mine.grads is None:
        return "the compiled function's outputs do not require grad"
    for i, (a, e) in enumerate(zip(mine.grads, eager.grads)):
        if a is None and e is None:
            continue
        like = e if e is not None else a
        a = a if a is not None else torch.zeros_like(like)
        e = e if e is not None else torch.zeros_like(like)
        r = None
        if ref is not None and ref.grads is not None:
            r = ref.grads[i] if ref.grads[i] is not None else \
                torch.zeros_like(like, dtype=torch.float64)
        msg = _agree(a, e, r, tol)
        if msg:
            return "gradient of input %d: %s" % (i, msg)
    return None


def _first_line(e: BaseException) -> str:
    text = "%s: %s" % (type(e).__name__, e)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[0][:400] if lines else type(e).__name__


def _stitch_reports(result: CaseResult) -> Optional[str]:
    """Adds what ran in Stitch (and what fell back, with reasons) to result; returns the
    reason of a runtime fallback, if a piece ran eagerly."""
    import stitch.torch
    runtime = []
    for r in stitch.torch.all_reports():
        for g in r.graphs:
            side = "bw:" if g.kind == "backward" else "fw:"
            result.in_stitch |= {side + o for o in g.origins()}
            for f in g.fallbacks:
                result.fallbacks.setdefault(side + f["op"], set()).add(f["reason"])
            runtime += ["%s (x%d)" % (k, v) for k, v in g.runtime_fallbacks.items()]
    return "; ".join(runtime) if runtime else None


def _compare(index: int, fn, sample, seed: int, want_grad: bool, dtype: torch.dtype,
             eager: _Run, mine: _Run, tol) -> Optional[SampleFailure]:
    if eager.error is not None and eager.phase == "forward":
        # Eager cannot run this sample: the compiled function must not return a value.
        if mine.error is None:
            return SampleFailure(index, FAIL_WRONG, "forward",
                                 "eager raises (%s), the compiled function returns"
                                 % _first_line(eager.error))
        return None
    if mine.error is not None and not (eager.error is not None and mine.phase == "backward"):
        # Raised where eager did not (eager's backward raising excuses only the backward).
        detail = "".join(traceback.format_exception(mine.error)[-12:])
        return SampleFailure(index, FAIL_RAISES, mine.phase,
                             "%s\n%s" % (_first_line(mine.error), detail))
    ref: Optional[_Run] = None

    def reference() -> Optional[_Run]:
        nonlocal ref
        if ref is None:
            ref = _run(fn, sample, seed, want_grad, dtype, upcast=True)
        return ref if ref.error is None else None

    msg = _close(mine.out, eager.out, tol)
    if msg is not None:
        r = reference()
        msg = _agree(mine.out, eager.out, r.out if r else None, tol)
        if msg is not None:
            return SampleFailure(index, FAIL_WRONG, "forward", msg)
    if eager.grads is not None and eager.error is None:
        msg = _grads_agree(mine, eager, None, tol)
        if msg is not None:
            msg = _grads_agree(mine, eager, reference(), tol)
            if msg is not None:
                return SampleFailure(index, FAIL_WRONG, "backward", msg)
    return None


def run_case(case: Case, samples: List[Tuple[int, Any]], backend: str) -> CaseResult:
    import stitch.torch
    result = CaseResult()
    tol = _tolerance(case)
    func = case.op.get_op()
    want_grad = _wants_grad(case)
    dt = case.torch_dtype

    def fn(*args, **kwargs):
        return func(*args, **kwargs)

    for index, sample in samples:
        seed = case.seed + index
        result.samples += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eager = _run(fn, sample, seed, want_grad, dt)
            if eager.error is None:
                again = _run(fn, sample, seed + 1, False, dt)
                if again.error is None and _close(again.out, eager.out,
                                                  {"rtol": 0, "atol": 0}) is not None:
                    result.random = "eager gives other values under another seed"
                    return result
            torch._dynamo.reset()
            if backend == "stitch":
                stitch.torch.clear_reports()
            compiled = torch.compile(fn, backend=backend, dynamic=case.dynamic)
            mine = _run(compiled, sample, seed, want_grad, dt)
            fail = _compare(index, fn, sample, seed, want_grad, dt, eager, mine, tol)
        if eager.error is not None and eager.phase == "forward":
            result.eager_raised += 1
        if backend == "stitch":
            runtime = _stitch_reports(result)
            if fail is None and runtime:
                fail = SampleFailure(index, FAIL_FALLBACK, "run",
                                     "a Stitch piece ran eagerly at run time: " + runtime)
        if fail is not None:
            result.failures.append(fail)
    return result
