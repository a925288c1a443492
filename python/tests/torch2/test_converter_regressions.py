"""Converter bugs the OpInfo test (python/tests/torch2/opinfo) found, each pinned by a small case
that gave a wrong answer before its fix:

* `div(rounding_mode="floor")` was floor(a / b): one too high where a / b rounds up to an
  integer (1.0 // 0.1 is 9 in PyTorch, floor(1.0 / 0.1) is 10). It stays in PyTorch now.
* `expm1` was exp(x) - 1, which loses every digit near 0 (f32 expm1(1e-7) came out 1.19e-7; in
  bf16 every |x| < 2^-9 gave 0).
* aten ops a converter builds from several Stitch ops rounded each step to bf16 where PyTorch's
  kernel computes in f32 and rounds once: softmax's backward lost 4 bits near cancellation, a
  variance around a large mean most of them; `x * 0.6931` rounded the number to bf16 first.
"""
import pytest
import torch
import torch.nn.functional as F

import harness
import stitch.torch

pytestmark = harness.needs_stitch


def _compiled(fn, *args):
    torch._dynamo.reset()
    stitch.torch.clear_reports()
    return torch.compile(fn, backend="stitch")(*args)


def _ran_in_stitch(op: str) -> bool:
    r = stitch.torch.last_report()
    return op in set(r.replaced()) | r.origins()


def test_floor_division_of_floats_matches_pytorch():
    a = torch.tensor([1.0, -1.0, 7.0, 0.3, 5.0, -0.0])
    b = torch.tensor([0.1, 0.1, 0.7, 0.1, -2.0, 3.0])

    def fn(a, b):
        return torch.div(a * 1.0, b, rounding_mode="floor")

    got = _compiled(fn, a, b)
    torch.testing.assert_close(got, fn(a, b), rtol=0, atol=0)
    assert not _ran_in_stitch("aten.div"), str(stitch.torch.last_report())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_expm1_is_accurate_near_zero_and_at_the_edges(dtype):
    x = torch.tensor([1e-7, -1e-7, 3e-5, 1e-3, -2e-3, 0.5, -0.5, 0.0, -0.0, 2.0, 20.0, 80.0,
                      -20.0, -100.0, 100.0, 1000.0, float("inf"), float("-inf"), float("nan")],
                     dtype=dtype)

    def fn(x):
        return torch.expm1(x * 1.0)

    got, want = _compiled(fn, x), fn(x)
    assert _ran_in_stitch("aten.expm1"), str(stitch.torch.last_report())
    # Within 2 ulps of the dtype (PyTorch's own expm1 is not correctly rounded either).
    rtol = {torch.float32: 2.5e-7, torch.bfloat16: 2 ** -7, torch.float64: 5e-16}[dtype]
    torch.testing.assert_close(got, want, rtol=rtol, atol=0, equal_nan=True)
    assert torch.equal(torch.signbit(got[7:9]), torch.signbit(want[7:9]))  # expm1(-0) is -0


# Converters that compute an aten op as several Stitch ops, each a function of bf16 tensors and
# the dtype to compute in (bf16 under test, float64 for the reference). PyTorch's kernels compute
# these in f32 and round once; rounding every step to bf16 loses bits wherever the result cancels
# (softmax's backward near its row sum, a variance around a large mean). The check is the OpInfo
# test's: on every element the compiled value is within bf16's tolerance (rtol 1.6e-2, atol 1e-5)
# of the float64 reference or no farther from it than 3 times eager's value is.
NO_LESS_ACCURATE = {
    "softmax_backward": (lambda g, y, dt: torch.ops.aten._softmax_backward_data(g, y, -1, dt),
                         "aten._softmax_backward_data"),
    "log_softmax_backward": (lambda g, y, dt: torch.ops.aten._log_softmax_backward_data(
        g, y, -1, dt), "aten._log_softmax_backward_data"),
    "layer_norm": (lambda g, y, dt: F.layer_norm(y, y.shape[-1:], g[0], g[1]),
                   "aten.native_layer_norm"),
    "var": (lambda g, y, dt: torch.var(y, dim=-1), "aten.var"),
}


def _operands(name):
    """g: a gradient; y: a softmax output (what the backward ops read), or for var and layer
    norm rows of spread ~1 around 100 (in bf16: ulp 1/2)."""
    gen = torch.Generator().manual_seed(7)
    g = torch.randn(64, 96, generator=gen)
    y = torch.randn(64, 96, generator=gen)
    y = y + 100 if name in ("var", "layer_norm") else y.softmax(-1)
    return g.bfloat16(), y.bfloat16()


@pytest.mark.parametrize("name", sorted(NO_LESS_ACCURATE))
def test_bf16_ops_are_no_less_accurate_than_eager(name):
    fn, op = NO_LESS_ACCURATE[name]
    g, y = _operands(name)
    got = _compiled(lambda g, y: fn(g, y, torch.bfloat16), g, y)
    assert _ran_in_stitch(op), str(stitch.torch.last_report())
    want = fn(g, y, torch.bfloat16).double()
    ref = fn(g.double(), y.double(), torch.float64)
    err = (got.double() - ref).abs()
    bound = 3 * (want - ref).abs() + 1e-5 + 1.6e-2 * ref.abs()
    worst = int((err - bound).argmax())
    assert bool((err <= bound).all()), (
        "%d of %d elements: at %d compiled %r, eager %r, float64 %r"
        % (int((err > bound).sum()), err.numel(), worst, got.flatten()[worst].item(),
           want.flatten()[worst].item(), ref.flatten()[worst].item()))


# Elementwise ops whose converters now round where PyTorch's CPU kernel rounds, so the compiled
# result is eager's bit for bit: tanh's and sigmoid's backward once, in f32 (rounding each of
# their three steps differed in 40% of the elements); add with alpha once, after rounding alpha
# to bf16 as the CPU kernel does; mul and div by a Python number with the number unrounded (it
# was rounded to bf16: half the elements differed), add with it rounded; pow(x, 3) after x*x too,
# as the CPU kernel does.
ROUNDS_AS_PYTORCH = {
    "tanh_backward": (lambda g, x: torch.ops.aten.tanh_backward(g, (x * 3).tanh()),
                      "aten.tanh_backward"),
    "sigmoid_backward": (lambda g, x: torch.ops.aten.sigmoid_backward(g, x.sigmoid()),
                         "aten.sigmoid_backward"),
    "add_alpha": (lambda g, x: torch.add(x, g, alpha=0.3), "aten.add"),
    "pow3": (lambda g, x: x.pow(3), "aten.pow"),
    "mul_number": (lambda g, x: x * 0.6931471805599453, "aten.mul"),
    "div_number": (lambda g, x: x / 0.6931471805599453, "aten.div"),
    "add_number": (lambda g, x: x + 0.6931471805599453, "aten.add"),
}


@pytest.mark.parametrize("name", sorted(ROUNDS_AS_PYTORCH))
def test_bf16_ops_round_where_pytorch_rounds(name):
    fn, op = ROUNDS_AS_PYTORCH[name]
    gen = torch.Generator().manual_seed(7)
    g, x = (torch.randn(64, 96, generator=gen).bfloat16() for _ in range(2))
    got, want = _compiled(fn, g, x), fn(g, x)
    assert _ran_in_stitch(op), str(stitch.torch.last_report())
    differ = int((got != want).sum())
    assert differ == 0, "%d of %d elements differ from eager's" % (differ, got.numel())
