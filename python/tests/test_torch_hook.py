"""stitch.torch.optimize on BERT- and Llama-style layers and an MLP: results match eager at
several batch sizes with one trace and one program per piece, memory-bound ops are replaced,
unsupported ops fall back, STITCH_DISABLE is honoured."""
import logging

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import stitch.torch as st  # noqa: E402
from models import MLP, BertLayer, LlamaPiece, rotary  # noqa: E402

BATCHES = (3, 5, 2)


def _ops(report):
    return set(report.replaced())


def test_bert_layer_matches_eager(caplog):
    torch.manual_seed(0)
    m = BertLayer().eval()
    opt = st.optimize(m)
    with caplog.at_level(logging.INFO, logger="stitch.torch"), torch.no_grad():
        for b in BATCHES:
            x = torch.randn(b, 8, 32)
            mask = torch.ones(b, 8)
            mask[:, -3:] = 0
            torch.testing.assert_close(opt(x, mask), m(x, mask), rtol=1e-4, atol=1e-4)
    r = opt.stitch_report
    ops = _ops(r)
    assert {"torch.nn.functional.softmax", "Tensor.masked_fill", "nn.LayerNorm", "nn.GELU",
            "torch.nn.functional.layer_norm", "nn.Dropout"} <= ops
    assert r.programs >= 3 and r.kernels >= r.programs
    fell_back = {f["op"] for f in r.fallbacks}
    assert "nn.Linear" in fell_back and "torch.matmul" in fell_back
    assert not r.runtime_fallbacks  # new batch sizes reused the programs
    assert "replaces" in caplog.text


def test_llama_piece_matches_eager():
    torch.manual_seed(1)
    m = LlamaPiece().eval()
    opt = st.optimize(m)
    cos, sin = rotary(6, 8)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    with torch.no_grad():
        for b in BATCHES:
            x = torch.randn(b, 6, 32)
            got, ref = opt(x, cos, sin, causal), m(x, cos, sin, causal)
            for g_, r_ in zip(got, ref):
                torch.testing.assert_close(g_, r_, rtol=1e-4, atol=1e-4)
    r = opt.stitch_report
    ops = _ops(r)
    assert {"Tensor.pow", "Tensor.mean", "torch.rsqrt", "torch.cat", "torch.softmax",
            "torch.nn.functional.silu", "torch.where", "Tensor.amax"} <= ops
    assert not r.runtime_fallbacks
    assert r.replaced_ops > 20


def test_mlp_matches_eager_and_counts():
    torch.manual_seed(2)
    m = MLP().eval()
    opt = st.optimize(m)
    with torch.no_grad():
        for b in BATCHES:
            x = torch.randn(b, 16)
            torch.testing.assert_close(opt(x), m(x), rtol=1e-4, atol=1e-4)
    r = opt.stitch_report
    assert {"torch.relu", "torch.clamp", "torch.sigmoid", "torch.nn.functional.gelu",
            "torch.tanh", "Tensor.abs", "Tensor.sqrt"} <= _ops(r)
    assert r.programs == 2  # fc1 -> [relu..gelu] -> fc2 -> [tanh + abs/sqrt of x]
    assert "module graph" in str(r) and "no Stitch mapping" in str(r)


def test_plain_function_and_signature():
    def f(x, y, scale=2.0):
        return torch.softmax(x * scale + y, dim=-1).sum(-1)

    opt = st.optimize(f)
    x, y = torch.randn(4, 7), torch.randn(4, 7)
    torch.testing.assert_close(opt(x, y=y), f(x, y), rtol=1e-5, atol=1e-5)
    assert list(opt.__signature__.parameters) == ["x", "y", "scale"]
    assert opt.stitch_report.programs == 1


class Odd(nn.Module):
    def forward(self, x):
        y = torch.cumsum(x, dim=-1)  # no Stitch op
        z = torch.exp(y) + 1
        w = torch.sort(z, dim=-1).values  # tuple result
        return torch.log(w) * 2


def test_unsupported_ops_fall_back():
    opt = st.optimize(Odd())
    x = torch.randn(3, 5)
    torch.testing.assert_close(opt(x), Odd()(x), rtol=1e-5, atol=1e-5)
    r = opt.stitch_report
    ops = {f["op"] for f in r.fallbacks}
    assert "torch.cumsum" in ops and "torch.sort" in ops
    assert r.programs == 2


def test_grad_mode_runs_eagerly():
    m = MLP()
    opt = st.optimize(m)
    x = torch.randn(2, 16)
    opt(x)  # the first call records (runs the module once, eagerly)
    out = opt(x)  # parameters require grad: the pieces run eagerly and autograd works
    out.sum().backward()
    assert m.fc1.weight.grad is not None
    assert opt.stitch_report.runtime_fallbacks


def test_stitch_disable(monkeypatch):
    for value in ("1", "true", "YES", "on"):
        monkeypatch.setenv("STITCH_DISABLE", value)
        m = MLP()
        assert st.optimize(m) is m, value


def test_stitch_disable_false_values_keep_the_hook(monkeypatch):
    # Regression: any value used to disable the hook, "0" excepted.
    for value in ("0", "false", "no", "off", "Off", ""):
        monkeypatch.setenv("STITCH_DISABLE", value)
        m = MLP()
        assert st.optimize(m) is not m, value


def test_stitch_disable_bad_value_is_an_error(monkeypatch):
    monkeypatch.setenv("STITCH_DISABLE", "maybe")
    with pytest.raises(ValueError, match="STITCH_DISABLE=maybe.*1, true, yes, on"):
        st.optimize(MLP())


def test_many_ops_mapped():
    assert len(st.supported_ops()) >= 40


class _Counting(nn.Module):
    """Counts its forward calls; a LayerNorm piece around a Linear."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.ln = nn.LayerNorm(16)
        self.scale = nn.Parameter(torch.ones(16))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return torch.relu(self.ln(self.fc(x))) * self.scale


def test_optimize_returns_a_module_sharing_the_originals_state():
    import copy
    torch.manual_seed(5)
    m = _Counting().eval()
    opt = st.optimize(m)
    assert isinstance(opt, nn.Module)
    x = torch.randn(3, 16)
    with torch.no_grad():
        first = opt(x)
    assert m.calls == 1, "the first call runs the module once (recording), not twice"
    torch.testing.assert_close(first, m(x))
    # Same state_dict keys and tensors as the original; assignable into a parent.
    assert opt.state_dict().keys() == m.state_dict().keys()
    parent = nn.Sequential(nn.Identity(), opt)
    assert "1.fc.weight" in parent.state_dict()
    # Parameters are read at every call: a replaced Parameter (top-level or in a child) and an
    # in-place update both take effect.
    with torch.no_grad():
        m.scale = nn.Parameter(torch.full((16,), 2.0))
        m.ln.weight = nn.Parameter(torch.rand(16) + 0.5)
        m.fc.bias.add_(1.0)
        torch.testing.assert_close(parent(x), m(x))
        assert opt.stitch_report.programs >= 1 and not opt.stitch_report.runtime_fallbacks
    # load_state_dict through the optimized module reaches the original's tensors.
    sd = {k: torch.randn_like(v) if v.is_floating_point() else v for k, v in m.state_dict().items()}
    opt.load_state_dict(sd)
    torch.testing.assert_close(m.fc.weight, sd["fc.weight"])
    with torch.no_grad():
        torch.testing.assert_close(opt(x), m(x))
    # to() converts the shared parameters; deepcopy gives an independent module.
    opt.to(torch.float64)
    assert m.fc.weight.dtype == torch.float64
    opt.to(torch.float32)
    clone = copy.deepcopy(opt)
    with torch.no_grad():
        clone.fc.weight.zero_()
        assert m.fc.weight.abs().sum() > 0
        torch.testing.assert_close(clone(x), clone.original(x))
        torch.testing.assert_close(opt(x), m(x))


def test_a_piece_that_fails_in_stitch_is_reported_and_logged(monkeypatch, caplog):
    """A piece whose program fails for good runs eagerly from then on: the results stay right, the
    report stops counting its ops as replaced and says why on its row and in its first line, and
    a warning says it once."""
    import stitch

    def broken(self, graph):
        raise stitch.StitchError(stitch.Status.COMPILE, "injected: the compiler crashed\nlog...")

    monkeypatch.setattr(stitch.Engine, "compile", broken)
    torch.manual_seed(6)
    m = MLP().eval()
    opt = st.optimize(m)
    with caplog.at_level(logging.INFO, logger="stitch.torch"), torch.no_grad():
        for b in BATCHES:
            x = torch.randn(b, 16)
            torch.testing.assert_close(opt(x), m(x), rtol=1e-5, atol=1e-5)
    r = opt.stitch_report
    assert len(r.pieces) == 2 and all(p["failed"] == "injected: the compiler crashed"
                                      for p in r.pieces), r.pieces
    assert r.replaced_ops == 0 and r.replaced() == [] and r.programs == 0 and r.kernels == 0
    assert r.eager_ops == sum(len(p["ops"]) for p in r.pieces) > 0
    text = str(r)
    assert "0 of %d ops in Stitch" % r.total_ops in text, text
    assert "%d op(s) of 2 failed piece(s) run eagerly" % r.eager_ops in text, text
    assert text.count("FAILED, runs eagerly: injected: the compiler crashed") == 2, text
    warnings = [rec for rec in caplog.records if rec.levelno == logging.WARNING]
    assert len(warnings) == 2, [rec.getMessage() for rec in warnings]  # once per piece
    assert all("run eagerly from now on: injected: the compiler crashed" in w.getMessage()
               for w in warnings), [w.getMessage() for w in warnings]
