"""What the torch.compile tests share: the backend under test, eager-against-compiled inference
and training, and the checks on Stitch's reports.

STITCH_TEST_BACKEND names another torch.compile backend (`aot_eager`, `inductor`) to run the same
tests through, which checks the tests themselves; only the report checks are then skipped, since
only Stitch writes reports. Unset, the backend is "stitch" and every check runs.

STITCH_TEST_DEVICE=cuda runs the models and batches of check_inference/check_training on the GPU
(Stitch's cuda backend, on PyTorch's current stream; scripts/gpu-check.sh's `torch` stage), with
TF32 off so that eager computes in f32 as Stitch does.
"""
from __future__ import annotations

import copy
import os
from typing import Callable, Iterable, Sequence

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing

import stitch.torch  # registers the "stitch" backend

BACKEND = os.environ.get("STITCH_TEST_BACKEND", "stitch")
STITCH = BACKEND == "stitch"
DEVICE = torch.device(os.environ.get("STITCH_TEST_DEVICE", "cpu"))
if DEVICE.type == "cuda":
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def on_device(x):
    """x (a tensor, or tuples, lists and dicts of them) on DEVICE."""
    if isinstance(x, torch.Tensor):
        return x.to(DEVICE)
    if isinstance(x, (list, tuple)):
        return type(x)(on_device(v) for v in x)
    if isinstance(x, dict):
        return {k: on_device(v) for k, v in x.items()}
    return x


def seeded_randn(shape, seed: int) -> torch.Tensor:
    """torch.randn(shape) from a generator seeded with `seed`, on DEVICE: drawn on the CPU, so the
    numbers are the same on every device (an upstream gradient for a loss, say)."""
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(DEVICE)


# f32 on the CPU: Stitch's kernels sum in other orders than PyTorch's, so results differ in the
# last bits, and more after a backward and three optimizer steps.
RTOL, ATOL = 1e-4, 1e-4
TRAIN_RTOL, TRAIN_ATOL = 1e-3, 1e-4


def reset() -> None:
    torch._dynamo.reset()
    if STITCH:
        stitch.torch.clear_reports()


def compile_model(model, **kwargs):
    return torch.compile(model, backend=BACKEND, **kwargs)


def counting(**kwargs):
    """(compile function, counter): the counter's frame_count is the number of times Dynamo
    handed a graph to the backend (a restarted analysis counts too, so tests compare counts before
    and after a call rather than expecting exact values)."""
    counter = torch._dynamo.testing.CompileCounterWithBackend(BACKEND)
    return (lambda model: torch.compile(model, backend=counter, **kwargs)), counter


def close(actual, expected, what: str, rtol=RTOL, atol=ATOL) -> None:
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol,
                               msg=lambda m: f"{what}: {m}")


def check_inference(model: torch.nn.Module, batches: Iterable, run: Callable, compiler=None,
                    **compile_kwargs):
    """`run(model, batch)` -> a tensor, under torch.no_grad(), eager against compiled, for each
    batch in turn (one compiled module: later batches reuse or recompile its graphs).
    `compiler(model)` compiles instead of torch.compile(model, backend=BACKEND, **compile_kwargs)."""
    model = model.to(DEVICE).eval()
    compiled = (compiler or (lambda m: compile_model(m, **compile_kwargs)))(model)
    with torch.no_grad():
        for i, batch in enumerate(batches):
            batch = on_device(batch)
            close(run(compiled, batch), run(model, batch), f"inference call {i}")


def check_training(model: torch.nn.Module, batches: Sequence, loss_of: Callable, lr: float = 0.05,
                   optimizer=torch.optim.SGD, compiler=None, after_step=None,
                   **compile_kwargs) -> tuple:
    """One optimizer step per batch on a compiled copy of `model` and on an eager copy, from the
    same weights: the losses, every gradient, every updated parameter and every buffer (BatchNorm's
    running statistics) must agree after each step. `loss_of(model, batch)` -> a scalar tensor;
    `compiler` as for check_inference; `after_step(step)` runs after each step's checks.
    Returns (eager model, compiled model)."""
    model = model.to(DEVICE).train()
    eager, mine = copy.deepcopy(model), copy.deepcopy(model)
    compiled = (compiler or (lambda m: compile_model(m, **compile_kwargs)))(mine)
    opt_e, opt_c = optimizer(eager.parameters(), lr=lr), optimizer(mine.parameters(), lr=lr)
    tol = dict(rtol=TRAIN_RTOL, atol=TRAIN_ATOL)
    for step, batch in enumerate(batches):
        batch = on_device(batch)
        loss_e, loss_c = loss_of(eager, batch), loss_of(compiled, batch)
        close(loss_c, loss_e, f"step {step}: loss", **tol)
        loss_e.backward()
        loss_c.backward()
        named_c = dict(mine.named_parameters())
        for name, p in eager.named_parameters():
            q = named_c[name]
            if p.grad is None:
                assert q.grad is None or not q.grad.any(), f"step {step}: {name} got a gradient"
            else:
                assert q.grad is not None, f"step {step}: {name} has no gradient"
                close(q.grad, p.grad, f"step {step}: grad of {name}", **tol)
        opt_e.step()
        opt_c.step()
        opt_e.zero_grad()
        opt_c.zero_grad()
        for name, p in eager.named_parameters():
            close(named_c[name].detach(), p.detach(), f"step {step}: updated {name}", **tol)
        for (name, b), (_, c) in zip(eager.named_buffers(), mine.named_buffers()):
            close(c, b, f"step {step}: buffer {name}", **tol)
        if after_step:
            after_step(step)
    return eager, mine


# --- reports ---------------------------------------------------------------------------------

needs_stitch = pytest.mark.skipif(not STITCH, reason=f"STITCH_TEST_BACKEND={BACKEND}: only the "
                                  "stitch backend writes reports")


def reports() -> list:
    """Every CompileReport since the test began (a model may be cut into several Dynamo graphs,
    and a recompile adds one); none under another backend."""
    return stitch.torch.all_reports() if STITCH else []


def describe() -> str:
    return "\n".join(str(r) for r in reports())


def origins(kind: str) -> set:
    """The aten ops run in Stitch in the `kind` graphs ("forward", "backward", "inference") of
    every report."""
    return {o for r in reports() for g in r.graphs if g.kind == kind for o in g.origins()}


def expect_in_stitch(**wanted: Iterable[str]) -> None:
    """expect_in_stitch(forward=[...], backward=[...], inference=[...]): each named aten op (the
    op before PyTorch's decompositions, e.g. "aten.native_layer_norm_backward") ran in some Stitch
    piece of a graph of that kind. Nothing to check under another backend."""
    if not STITCH:
        return
    assert reports(), "backend=\"stitch\" made no report"
    for kind, ops in wanted.items():
        missing = set(ops) - origins(kind)
        assert not missing, f"not in any Stitch piece of a {kind} graph: {sorted(missing)}\n{describe()}"


def expect_no_runtime_fallbacks() -> None:
    """No piece ran eagerly at run time: calls that change only sizes must reuse the programs."""
    if not STITCH:
        return
    ran = [(i, g.kind, g.runtime_fallbacks) for i, r in enumerate(reports()) for g in r.graphs
           if g.runtime_fallbacks]
    assert not ran, f"pieces ran eagerly: {ran}\n{describe()}"
