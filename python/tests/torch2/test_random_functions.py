"""Seeded random functions of the ops the backend maps (elementwise, broadcasting, reductions with
keepdim, softmax, layer norm, views, transposes, cat and slices, casts), with an unmapped op
(cumsum) here and there so that pieces are cut around it, through
torch.compile(backend="stitch"), forward and backward, against eager. A failing seed prints the
function's source, a reproducer to paste into a test. STITCH_TEST_RANDOM_SEEDS=N runs N seeds
(default 24); a third of them with dynamic=True and a second call at other sizes."""
import os
import random

import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch, "compile"):
    pytest.skip("torch.compile needs PyTorch 2.x", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402,F401  (used by the generated code)

import stitch.torch as st  # noqa: E402

SEEDS = int(os.environ.get("STITCH_TEST_RANDOM_SEEDS", "24"))
H = 8  # the last dim of every value, so that any two broadcast


def _function(rng: random.Random) -> str:
    """Source of `def f(x0, x1, w)`: x0, x1 of [B, S, H], w of [H]; values are [B, S, H] or
    [B, S, 1] (reductions with keepdim), so that any two broadcast."""
    full = ["x0", "x1"]
    narrow = []
    lines = []

    def pick():
        pool = full + narrow if narrow and rng.random() < 0.3 else full
        return rng.choice(pool)

    for i in range(rng.randint(4, 10)):
        a, b = pick(), rng.choice(full)
        kind = rng.randrange(13)
        name = "v%d" % i
        if kind == 0:
            fn = rng.choice(["torch.tanh", "torch.sigmoid", "torch.relu", "F.gelu", "F.silu",
                             "torch.sin", "torch.neg", "torch.abs", "torch.exp"])
            expr = "%s(%s)" % (fn, a) if fn != "torch.exp" else "torch.exp(%s.clamp(-4, 4))" % a
        elif kind == 1:
            expr = "%s %s %s" % (a, rng.choice(["+", "-", "*"]), b)
        elif kind == 2:
            expr = "%s / (%s.abs() + 1)" % (a, b)
        elif kind == 3:
            expr = "torch.where(%s > %s, %s, %s * 0.5)" % (a, b, a, b)
        elif kind == 4:
            fn = rng.choice(["sum", "mean", "amax"])
            narrow.append(name)
            lines.append("    %s = %s.%s(-1, keepdim=True)" % (name, rng.choice(full), fn))
            continue
        elif kind == 5:
            fn = rng.choice(["torch.softmax", "torch.log_softmax"])
            expr = "%s(%s, -1)" % (fn, rng.choice(full))
        elif kind == 6:
            expr = "F.layer_norm(%s, (%d,), w, w * 0.5)" % (rng.choice(full), H)
        elif kind == 7:
            expr = "(%s.transpose(0, 1) * 2).transpose(0, 1)" % rng.choice(full)
        elif kind == 8:
            src = rng.choice(full)
            expr = "torch.cat([%s[..., :%d], %s[..., %d:] * 3], -1)" % (src, H // 2, src, H // 2)
        elif kind == 9:
            expr = "%s.clamp(-1, 1) ** %d" % (a, rng.choice([2, 3]))
        elif kind == 11:
            # An op Stitch does not map: the function is cut into pieces around it.
            expr = "torch.cumsum(%s, -1) * 0.1" % a
        elif kind == 10:
            expr = "(%s.to(torch.float64) * 1.5).to(torch.float32)" % a
        else:
            src = rng.choice(full)
            expr = "%s.reshape(%s.shape[0], -1).reshape(%s.shape) + %s" % (src, src, src, b)
        full.append(name)
        lines.append("    %s = %s" % (name, expr))
    outs = [full[-1]] + ([narrow[-1]] if narrow else [])
    return "def f(x0, x1, w):\n" + "\n".join(lines) + "\n    return %s\n" % ", ".join(outs)


def _run(seed: int) -> None:
    rng = random.Random(seed)
    src = _function(rng)
    scope = {"torch": torch, "F": F}
    exec(src, scope)
    f = scope["f"]
    dynamic = seed % 3 == 0
    g = torch.Generator().manual_seed(seed)
    sizes = [(2, 3), (3, 5)] if dynamic else [(2, 3)]
    torch._dynamo.reset()
    st.clear_reports()
    compiled = torch.compile(f, backend="stitch", dynamic=dynamic or None)
    w = torch.rand(H, generator=g) + 0.5
    for b, s in sizes:
        inputs = [torch.randn(b, s, H, generator=g) for _ in range(2)] + [w]
        mine = [x.clone().requires_grad_() for x in inputs]
        ref = [x.clone().requires_grad_() for x in inputs]
        got, want = compiled(*mine), f(*ref)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        weights = [torch.randn(x.shape, generator=g) for x in want]
        sum((x * c).sum() for x, c in zip(got, weights)).backward()
        sum((x * c).sum() for x, c in zip(want, weights)).backward()
        what = "seed %d (sizes %s, dynamic=%s); reproducer:\n%s\n%s" % (
            seed, (b, s), dynamic, src, st.last_report())
        for x, y in zip(got, want):
            torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-4, msg=lambda m: m + "\n" + what)
        for x, y in zip(mine, ref):
            torch.testing.assert_close(x.grad, y.grad, rtol=1e-3, atol=1e-4,
                                       msg=lambda m: "gradient: " + m + "\n" + what)
    for r in st.all_reports():
        assert not r.runtime_fallbacks, what
    assert any(g.pieces for r in st.all_reports() for g in r.graphs), \
        "nothing ran in Stitch: " + what


@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_function(seed):
    _run(seed)
