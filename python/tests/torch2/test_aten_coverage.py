"""Every aten op the torch.compile backend maps, forward and backward: a small function per op
compiled with backend="stitch" must match eager (values and gradients), and the report must show
the op (or the op PyTorch decomposed it from) running in Stitch, so a converter that silently
falls back fails here instead of passing."""
import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch, "compile"):
    pytest.skip("torch.compile needs PyTorch 2.x", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import stitch.torch as st  # noqa: E402


def _check(fn, inputs, expected, grad=True, dynamic=False, rtol=1e-4, atol=1e-5):
    """Runs fn compiled and eager on the same inputs (and their gradients); returns the report.
    `expected`: aten op names that must be among the replaced ops or their origins (a tuple:
    any one of them, where PyTorch versions name a decomposed op differently)."""
    torch._dynamo.reset()
    st.clear_reports()
    compiled = torch.compile(fn, backend="stitch", dynamic=dynamic)
    a = [x.detach().clone().requires_grad_(grad and x.is_floating_point()) for x in inputs]
    b = [x.detach().clone().requires_grad_(grad and x.is_floating_point()) for x in inputs]
    out_c, out_e = compiled(*a), fn(*b)
    outs_c = out_c if isinstance(out_c, tuple) else (out_c,)
    outs_e = out_e if isinstance(out_e, tuple) else (out_e,)
    for c, e in zip(outs_c, outs_e):
        torch.testing.assert_close(c, e, rtol=rtol, atol=atol)
    if grad:
        weights = [torch.randn_like(e) for e in outs_e if e.is_floating_point()]
        sum(((c * w).sum() for c, w in zip(outs_c, weights)), torch.zeros(())).backward()
        sum(((e * w).sum() for e, w in zip(outs_e, weights)), torch.zeros(())).backward()
        for x, y in zip(a, b):
            if y.grad is not None:
                torch.testing.assert_close(x.grad, y.grad, rtol=rtol * 10, atol=atol * 10)
    report = st.last_report()
    seen = set(report.replaced()) | report.origins()
    missing = [op for op in expected
               if not any(o in seen for o in (op if isinstance(op, tuple) else (op,)))]
    assert not missing, "%s not run in Stitch:\n%s" % (missing, report)
    assert not report.runtime_fallbacks, str(report)
    return report


torch.manual_seed(0)
X = torch.randn(4, 6, 8)
Y = torch.randn(4, 6, 8)
W = torch.rand(8) + 0.5
LOGITS = torch.randn(12, 10)
LABELS = torch.randint(0, 10, (12,))
LABELS[[2, 7]] = -100
LABELS[5] = 3
CLASS_W = torch.rand(10) + 0.1  # a constant of the function: nll_loss has no weight gradient
PICK = torch.randint(0, 8, (4, 6, 1))
PICK3 = torch.randint(0, 6, (4, 6, 8))
NLL = ["aten._log_softmax", "aten.nll_loss_forward", "aten.nll_loss_backward",
       "aten._log_softmax_backward_data"]

CASES = {
    "binary": (lambda x, y: (x + y * 2 - x / (y.abs() + 1)) * 0.5, [X, Y],
               ["aten.add", "aten.mul", "aten.sub", "aten.div", "aten.abs"]),
    "rsub_pow": (lambda x: 1 - x.pow(2) + x.pow(3), [X], ["aten.rsub", "aten.pow"]),
    "max_min_clamp": (lambda x, y: torch.maximum(x, y) + torch.minimum(x, y).clamp(-0.5, 0.5),
                      [X, Y], ["aten.maximum", "aten.minimum", "aten.clamp"]),
    "unary": (lambda x: x.exp() + (x.abs() + 1).log() + x.sin() * x.cos() + x.erf() + x.neg()
              + (x.abs() + 1).sqrt() + (x.abs() + 1).rsqrt() + x.log1p().nan_to_num(0.0),
              [X.abs()], ["aten.exp", "aten.log", "aten.sin", "aten.cos", "aten.erf",
                          "aten.sqrt", "aten.rsqrt"]),
    "activations": (lambda x: torch.tanh(x) + torch.sigmoid(x) + F.silu(x) + F.gelu(x)
                    + F.gelu(x, approximate="tanh") + torch.relu(x), [X],
                    ["aten.tanh", "aten.sigmoid", "aten.silu", "aten.gelu", "aten.relu",
                     "aten.tanh_backward", "aten.sigmoid_backward", "aten.silu_backward",
                     "aten.gelu_backward", "aten.threshold_backward"]),
    "compare_where": (lambda x, y: torch.where((x > y) & (x <= 0.5) | (x == y), x, y * 3)
                      + (x != y).float() + (x >= 0).to(torch.float32) * (x < 1).float(),
                      [X, Y], ["aten.gt", "aten.le", "aten.eq", "aten.ne", "aten.ge", "aten.lt",
                               "aten.where", "aten._to_copy"]),
    "masked_fill": (lambda x, y: x.masked_fill(y > 0, -1e4).softmax(-1), [X, Y],
                    ["aten.masked_fill", "aten._softmax", "aten._softmax_backward_data"]),
    "reductions": (lambda x: (x.sum(-1, keepdim=True) + x.mean(1, keepdim=True)
                              + x.amax(-1, keepdim=True) - x.amin(-1, keepdim=True)).sum(0)
                   + x.mean(), [X], ["aten.sum", "aten.mean", "aten.amax", "aten.amin"]),
    "log_softmax": (lambda x: F.log_softmax(x, -1) * 2, [X],
                    ["aten._log_softmax", "aten._log_softmax_backward_data"]),
    "layer_norm": (lambda x, w: F.layer_norm(x, (8,), w, w * 0.1), [X, W],
                   ["aten.native_layer_norm", "aten.native_layer_norm_backward"]),
    "rms_norm": (lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
                 [X, W], ["aten.rsqrt", "aten.mean", "aten.pow"]),
    "group_norm": (lambda x, w: F.silu(F.group_norm(x, 2, w, w)), [torch.randn(2, 8, 3, 3), W],
                   ["aten.native_group_norm", "aten.native_group_norm_backward"]),
    "batch_norm_train": (lambda x, w: F.batch_norm(x, None, None, w, w, training=True),
                         [torch.randn(4, 8, 3, 3), W],
                         [("aten._native_batch_norm_legit_functional",
                           "aten._native_batch_norm_legit", "aten.native_batch_norm"),
                          "aten.native_batch_norm_backward"]),
    "views": (lambda x: (x.view(4, 48).reshape(4, 6, 8).permute(2, 0, 1).transpose(0, 1)
                         .unsqueeze(0).squeeze(0) * 2).sum(), [X],
              ["aten.view", "aten.permute", "aten.transpose", "aten.unsqueeze",
               "aten.squeeze"]),
    "expand_slice": (lambda x: (x[:, 1:5, ::2] + x[:, :1, :4].expand(4, 4, 4)).exp(), [X],
                     ["aten.slice", "aten.expand"]),
    "split_cat_chunk": (lambda x: torch.cat([a * (i + 1) for i, a in enumerate(x.chunk(2, -1))]
                                            + [x.split([2, 6], -1)[0]], -1) + 1, [X],
                        ["aten.split", "aten.cat"]),
    "select": (lambda x: (x[:, 2] + x[:, 3]).exp(), [X], ["aten.select"]),
    "casts": (lambda x: (x.to(torch.float64) * 3).to(torch.float32)
              + x.half().float() + x.bfloat16().float(), [X], ["aten._to_copy"]),
    # Cross-entropy: log_softmax and nll_loss in one piece, their backward in another; labels
    # include ignored ones (the default -100, or a class index as ignore_index).
    "cross_entropy": (lambda x, t: F.cross_entropy(x, t), [LOGITS, LABELS], NLL),
    "cross_entropy_weighted_sum": (
        lambda x, t: F.cross_entropy(x, t, weight=CLASS_W, ignore_index=3, reduction="sum"),
        [LOGITS, LABELS.clamp(min=0)], NLL),
    "cross_entropy_weighted_mean": (
        lambda x, t: F.cross_entropy(x, t, weight=CLASS_W, ignore_index=3),
        [LOGITS, LABELS.clamp(min=0)], NLL),
    "nll_loss_none": (lambda x, t: F.nll_loss(F.log_softmax(x * 2, -1), t, weight=CLASS_W,
                                              reduction="none"), [LOGITS, LABELS], NLL),
    "nll_loss_1d": (lambda x, t: F.nll_loss(F.log_softmax(x, 0), t), [LOGITS[0], LABELS[1]],
                    NLL),
    "cross_entropy_2d": (lambda x, t: F.cross_entropy(x, t, ignore_index=1),
                         [torch.randn(2, 10, 3, 4), torch.randint(0, 10, (2, 3, 4))],
                         ["aten.nll_loss2d_forward", "aten.nll_loss2d_backward"]),
    # gather picking one value per row: its backward is a scatter_add Stitch maps too.
    "gather_one": (lambda x, i: torch.gather(x.exp(), -1, i) * 2, [X, PICK],
                   ["aten.gather", "aten.scatter_add", "aten.new_zeros"]),
    "gather_many": (lambda x, i: torch.gather(x.exp(), 1, i).sin(), [X, PICK3],
                    ["aten.gather"]),
    "gather_smaller_index": (lambda x, i: torch.gather(x * 3, 2, i), [X, PICK3[:3, :4]],
                             ["aten.gather"]),
    "cross_entropy_2d_none": (lambda x, t: F.cross_entropy(x, t, weight=CLASS_W,
                                                           reduction="none"),
                              [torch.randn(2, 10, 3, 4), torch.randint(0, 10, (2, 3, 4))],
                              ["aten.nll_loss2d_forward", "aten.nll_loss2d_backward"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_runs_in_stitch(name):
    fn, inputs, expected = CASES[name]
    _check(fn, inputs, expected, rtol=1e-2 if name == "casts" else 1e-4,
           atol=1e-2 if name == "casts" else 1e-5)


@pytest.mark.parametrize("name", ["binary", "masked_fill", "layer_norm", "reductions",
                                  "activations", "split_cat_chunk"])
def test_op_with_symbolic_sizes(name):
    """The same functions with dynamic=True: sizes are symbols, the program is reused for a
    second size, and nothing runs eagerly."""
    fn, inputs, expected = CASES[name]
    _check(fn, inputs, expected, dynamic=True)
    compiled = torch.compile(fn, backend="stitch", dynamic=True)
    bigger = [torch.randn(6, 5, 8) if x.dim() == 3 else x for x in inputs]
    with torch.no_grad():
        got, want = compiled(*bigger), fn(*bigger)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    assert not st.last_report().runtime_fallbacks


def test_integer_and_bool_ops():
    def f(i, m):
        return (i * 2 + 3 - i.abs()).sum(-1), (m & (i > 0)) | ~m
    i = torch.randint(-5, 5, (4, 6))
    m = torch.rand(4, 6) > 0.5
    _check(f, [i, m], ["aten.mul", "aten.add", "aten.sum", "aten.bitwise_and",
                       "aten.bitwise_or", "aten.bitwise_not"], grad=False)


def test_unmapped_op_falls_back_with_a_reason():
    def f(x):
        return torch.cumsum(x * 2, -1).sin()
    r = _check(f, [X], ["aten.mul", "aten.sin"])
    reasons = [fb for fb in r.fallbacks if fb["op"] == "aten.cumsum"]
    assert reasons and reasons[0]["reason"] == "no Stitch mapping"
    assert "aten.cumsum" in str(r) and "no Stitch mapping" in str(r)


def test_the_forward_saves_inputs_and_the_backward_recomputes_elementwise_values():
    """The min-cut partition: a chain of elementwise ops saves only its input and its output
    (which the forward writes anyway) for the backward; the intermediates are recomputed there,
    inside the backward's Stitch piece, where saving them would cost a write and a read of each
    (before the joint graph's detach nodes were dropped, tanh's and exp's results were saved)."""
    def f(x):
        return torch.sin(torch.exp(torch.tanh(x) * 2)).sigmoid()
    r = _check(f, [X], ["aten.tanh", "aten.exp", "aten.sin", "aten.sigmoid"])
    bw = r.graph("backward")
    assert bw.saved_tensors == 2, str(r)
    assert "aten.tanh" in bw.replaced() and "aten.exp" in bw.replaced(), str(r)


def test_cross_entropy_with_symbolic_sizes_and_every_label_ignored():
    """dynamic=True: the number of rows is a symbol, a second size reuses the program; a batch
    whose labels are all ignored gives PyTorch's mean, 0/0 = NaN (and the sum 0)."""
    _check(lambda x, t: F.cross_entropy(x, t, ignore_index=3), [LOGITS, LABELS.clamp(min=0)],
           NLL, dynamic=True)
    for reduction in ("mean", "sum"):
        def f(x, t):
            return F.cross_entropy(x, t, ignore_index=3, reduction=reduction)
        compiled = torch.compile(f, backend="stitch", dynamic=True)
        with torch.no_grad():
            for rows in (5, 17):
                x, t = torch.randn(rows, 10), torch.randint(0, 10, (rows,))
                torch.testing.assert_close(compiled(x, t), f(x, t), rtol=1e-4, atol=1e-5)
            ignored = torch.full((7,), 3)
            got, want = compiled(LOGITS[:7], ignored), f(LOGITS[:7], ignored)
        torch.testing.assert_close(got, want, equal_nan=True)
        assert want.isnan().item() == (reduction == "mean")
        assert not st.last_report().runtime_fallbacks


def test_argmax_argmin():
    """dim, keepdim, dim=None (the flattened index, keepdim giving all-ones dims); ties give the
    first index and a NaN in a row its first NaN's index, as in PyTorch."""
    def f(x):
        return (x.argmax(-1), x.argmin(1, keepdim=True), x.argmax(), x.argmin(keepdim=True),
                torch.argmax(x * 2, 0))
    ties = torch.randint(0, 3, (4, 6, 8)).float()
    ties[1, 2, 5] = ties[2, 0, 0] = ties[2, 0, 7] = float("nan")
    for x in (X, ties):
        _check(f, [x], ["aten.argmax", "aten.argmin"], grad=False)
