"""Changing sizes: with `mark_dynamic`, `dynamic=True` or automatic dynamic (the default, after one
recompile), a new batch size or sequence length reuses the graph Dynamo already compiled (the
backend is not called again, no new report) and never runs a Stitch piece eagerly; sizes 1, which
PyTorch specializes, give right results too."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import harness


class Block(nn.Module):
    """LayerNorm, single-head attention softmax, GELU MLP and a residual: the memory-bound ops
    of a transformer layer over (batch, sequence, 32)."""

    def __init__(self, dim=32):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        att = F.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
        return x + F.gelu(self.fc(att @ v))


def block():
    torch.manual_seed(0)
    return Block()


def inputs(shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, s, 32, generator=g) for b, s in shapes]


class Compiles:
    """The number of Dynamo graphs handed to the backend, and of Stitch reports, must not grow
    once a dynamic graph exists."""

    def __init__(self, counter):
        self.counter = counter
        self.mark()

    def mark(self):
        self.frames, self.reports = self.counter.frame_count, len(harness.reports())

    def unchanged(self, what):
        assert self.counter.frame_count == self.frames, f"{what}: Dynamo compiled again"
        if harness.STITCH:
            assert len(harness.reports()) == self.reports, \
                f"{what}: a new CompileReport\n{harness.describe()}"


def run_inference(compiled, model, xs, compiles=None, first_dynamic=1):
    """Each input through `compiled` and eager; after the first `first_dynamic` calls (which may
    compile), no call compiles again."""
    with torch.no_grad():
        for i, x in enumerate(xs):
            harness.close(compiled(x), model(x), f"input {tuple(x.shape)}")
            if compiles and i + 1 == first_dynamic:
                compiles.mark()
            elif compiles and i + 1 > first_dynamic:
                compiles.unchanged(f"input {tuple(x.shape)}")


SIZES = [(4, 16), (6, 16), (4, 20), (7, 9), (3, 33)]


def test_mark_dynamic_reuses_the_graph():
    model = block().eval()
    compile_fn, counter = harness.counting()
    compiled = compile_fn(model)
    xs = inputs(SIZES)
    torch._dynamo.mark_dynamic(xs[0], 0)
    torch._dynamo.mark_dynamic(xs[0], 1)
    run_inference(compiled, model, xs, Compiles(counter))
    harness.expect_in_stitch(inference=["aten.native_layer_norm", "aten._softmax", "aten.gelu"])
    harness.expect_no_runtime_fallbacks()


def test_dynamic_true_reuses_the_graph():
    model = block().eval()
    compile_fn, counter = harness.counting(dynamic=True)
    run_inference(compile_fn(model), model, inputs(SIZES), Compiles(counter))
    harness.expect_no_runtime_fallbacks()


def test_automatic_dynamic_after_one_recompile():
    # The default: the first call compiles for its sizes, the second (batch and sequence both
    # new) compiles a graph dynamic in both, and the rest reuse it. (A size that changes only
    # later makes Dynamo recompile once more, whatever the backend.)
    model = block().eval()
    compile_fn, counter = harness.counting()
    run_inference(compile_fn(model), model, inputs([(4, 16), (6, 20)] + SIZES[2:]),
                  Compiles(counter), first_dynamic=2)
    harness.expect_no_runtime_fallbacks()


def test_training_with_changing_sizes_reuses_forward_and_backward():
    compile_fn, counter = harness.counting(dynamic=True)
    shapes = [(4, 16), (6, 16), (4, 20), (7, 9)]
    compiles = Compiles(counter)
    backwards = []

    def after_step(step):
        # The backward graph is compiled at the first backward; later sizes reuse both.
        if step == 0:
            compiles.mark()
        else:
            compiles.unchanged(f"training step {step}")
        if harness.STITCH:
            backwards.append(sum(g.kind == "backward" for r in harness.reports() for g in r.graphs))

    batches = [(x, i) for i, x in enumerate(inputs(shapes, seed=1))]
    harness.check_training(block(), batches,
                           lambda m, b: (m(b[0]) * harness.seeded_randn(b[0].shape, b[1])).mean(),
                           compiler=compile_fn, after_step=after_step)
    assert len(set(backwards)) <= 1, f"backward graphs compiled per step: {backwards}"
    harness.expect_in_stitch(forward=["aten.native_layer_norm", "aten._softmax", "aten.gelu"],
                             backward=["aten.native_layer_norm_backward",
                                       "aten._softmax_backward_data", "aten.gelu_backward"])
    harness.expect_no_runtime_fallbacks()


def test_size_one_first_then_larger():
    # PyTorch specializes sizes 0 and 1: a first call at batch 1 compiles for batch 1, the next
    # size compiles a dynamic graph, and every later batch reuses that one.
    model = block().eval()
    compile_fn, counter = harness.counting(dynamic=True)
    run_inference(compile_fn(model), model, inputs([(1, 16), (3, 16), (5, 16), (8, 16), (2, 16)]),
                  Compiles(counter), first_dynamic=2)
    harness.expect_no_runtime_fallbacks()


def test_sizes_one_anywhere():
    # Batch 1, sequence 1 and both, between other sizes: results as eager's (each may compile
    # a graph specialized to 1, as PyTorch does).
    model = block().eval()
    compiled = harness.compile_model(model, dynamic=True)
    run_inference(compiled, model, inputs([(3, 8), (1, 8), (3, 1), (1, 1), (4, 5)]))
    harness.expect_no_runtime_fallbacks()


def test_dynamic_true_compiles_few_kernels_over_100_shapes():
    """Shape classes: 100 (batch, sequence) pairs through one dynamic graph compile (or load from
    a warm disk cache) at most 3 kernels per kernel of the first shape's plan (batch 1, which PyTorch specializes, and each
    shape class once), and every result matches eager."""
    if not harness.STITCH or harness.DEVICE.type != "cpu":
        return  # the counts are the cpu backend's (GPU kernels take no size arguments yet)
    from stitch.torch._piece import engine_for
    engine = engine_for(torch.device("cpu"))
    # A width no other test uses (48): the kernels are new to this process, so the first shape
    # compiles its plan's kernels and later ones are counted against it.
    torch.manual_seed(0)
    model = Block(dim=48).eval()
    compile_fn, counter = harness.counting(dynamic=True)
    compiled = compile_fn(model)
    pairs = sorted({(1 + (i * 7) % 5, 2 + (i * 37) % 61) for i in range(400)})[:100]
    assert len(pairs) == 100
    def made(stats):  # kernels this process compiled or loaded: a warm disk cache loads them
        return stats["compiles"] + stats["disk_hits"] + stats["remote_hits"]

    before = engine.cache_stats()
    with torch.no_grad():
        first = torch.randn(*pairs[0], 48, generator=torch.Generator().manual_seed(0))
        harness.close(compiled(first), model(first), f"input {tuple(first.shape)}")
        per_shape = made(engine.cache_stats()) - made(before)
        for i, (b, n) in enumerate(pairs[1:]):
            x = torch.randn(b, n, 48, generator=torch.Generator().manual_seed(i))
            harness.close(compiled(x), model(x), f"input {tuple(x.shape)}")
    after = engine.cache_stats()
    compiles = made(after) - made(before)
    assert 0 < per_shape and compiles <= 3 * per_shape, (per_shape, compiles)
    assert after["class_sizes"] - before["class_sizes"] >= 90 * per_shape
    # Plans are kept per shape class too: most new signatures re-price a kept plan (on the
    # development VM: 30 searches and 270 kept plans over the pieces' 300 signatures).
    plans = [g.plan_stats() for r in harness.reports() for g in r.graphs]
    searches = sum(p["plan_searches"] for p in plans)
    reuses = sum(p["plan_reuses"] for p in plans)
    assert searches <= 2 * sum(p["plan_classes"] for p in plans), plans
    assert reuses >= 4 * searches, plans
    harness.expect_no_runtime_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_symbolic_sizes_as_numbers_run_in_stitch(dtype):
    """A size used as a number under dynamic shapes (x + x.shape[1]; the backward of a mean over
    two symbolic axes, which divides by their product, a size no tensor has) is read at every
    call: the add and the division run in Stitch and match eager at each size (the gradient bit
    for bit)."""
    def pool(x):
        return (x + x.shape[1]).mean(dim=(-2, -1))

    compiled = harness.compile_model(pool, dynamic=True)
    for i, shape in enumerate([(2, 3, 5, 7), (3, 4, 6, 5), (2, 5, 9, 4)]):
        x = harness.on_device(torch.randn(shape, generator=torch.Generator().manual_seed(i)))
        x = x.to(dtype).requires_grad_()
        g = harness.on_device(torch.randn(shape[:2], generator=torch.Generator().manual_seed(9)))
        y, ye = compiled(x), pool(x)
        (gx,), (gxe,) = (torch.autograd.grad(out, x, g.to(dtype)) for out in (y, ye))
        # The mean sums in Stitch's order; its gradient, g / (h * w) broadcast, is exact.
        harness.close(y, ye, f"call {i}")
        torch.testing.assert_close(gx, gxe, rtol=0, atol=0, msg=lambda m: f"call {i}: grad: {m}")
    if harness.STITCH:
        replaced = {kind: {op for r in harness.reports() for gr in r.graphs if gr.kind == kind
                           for op in gr.replaced()} for kind in ("forward", "backward")}
        assert "aten.add" in replaced["forward"], harness.describe()
        assert "aten.div" in replaced["backward"], harness.describe()
        symbolic = [f for r in harness.reports() for f in r.fallbacks
                    if "symbolic size" in f["reason"]]
        assert not symbolic, harness.describe()
    harness.expect_no_runtime_fallbacks()
