"""An index out of range under backend="stitch" raises what eager PyTorch raises (issue 33):
IndexError "Target T is out of bounds." for nll_loss / cross_entropy labels (weights, label
smoothing, a non-default ignore_index, nll_loss2d), RuntimeError "index I is out of bounds for
dimension D with size N" for gather and scatter_add, forward and backward; never a finite number.
Each case also checks that the op ran in Stitch, so a silent fallback to eager (which would raise
too) cannot pass for the check; and that ignore_index keeps its meaning, with PyTorch's divisors
for the means."""
import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch, "compile"):
    pytest.skip("torch.compile needs PyTorch 2.x", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import stitch.torch as st  # noqa: E402


def _compiled(fn, dynamic=False):
    torch._dynamo.reset()
    st.clear_reports()
    return torch.compile(fn, backend="stitch", dynamic=dynamic)


def _expect_same_error(fn, args, dynamic=False, backward=False, ran=()):
    """fn(*args) raises in eager; compiled it must raise the same type and message."""
    def call(f, xs):
        out = f(*xs)
        if backward:
            out.sum().backward()
        return out

    def fresh():
        return [a.detach().clone().requires_grad_(a.is_floating_point()) for a in args]

    with pytest.raises(Exception) as eager:
        call(fn, fresh())
    compiled = _compiled(fn, dynamic)
    with pytest.raises(type(eager.value)) as got:
        call(compiled, fresh())
    assert str(got.value) == str(eager.value)
    report = st.last_report()
    seen = set(report.replaced()) | report.origins()
    missing = [op for op in ran
               if not any(o in seen for o in (op if isinstance(op, tuple) else (op,)))]
    assert not missing, "%s did not run in Stitch:\n%s" % (missing, report)


torch.manual_seed(0)
LOGITS = torch.randn(6, 5)
NLL = ("aten.nll_loss_forward",)


@pytest.mark.parametrize("bad", [5, -1, -3, 1000])
@pytest.mark.parametrize("dynamic", [False, True])
def test_cross_entropy_label_out_of_range_raises_index_error(bad, dynamic):
    labels = torch.tensor([0, 1, bad, 2, 4, 3])
    _expect_same_error(lambda x, t: F.cross_entropy(x, t), (LOGITS, labels), dynamic, ran=NLL)


@pytest.mark.parametrize("kwargs", [
    {"weight": torch.rand(5) + 0.1},
    {"label_smoothing": 0.1},
    {"ignore_index": 2},
    {"reduction": "sum"},
    {"reduction": "none"},
], ids=["weight", "label_smoothing", "ignore_index", "sum", "none"])
def test_cross_entropy_variants_raise(kwargs):
    # One bad label (-100 is bad with another ignore_index): Stitch names one offending index,
    # not necessarily the first as PyTorch's CPU loop does.
    labels = torch.tensor([0, 1, 7, 2, 4, 3]) if "ignore_index" not in kwargs else \
        torch.tensor([0, 1, -100, 2, 4, 3])
    _expect_same_error(lambda x, t: F.cross_entropy(x, t, **kwargs), (LOGITS, labels), ran=NLL)


def test_cross_entropy_backward_raises():
    labels = torch.tensor([0, 1, 9, 2, 4, 3])
    _expect_same_error(lambda x, t: F.cross_entropy(x, t), (LOGITS, labels), backward=True,
                       ran=NLL)


def test_nll_loss_of_99_in_32_classes_raises():
    lp = torch.randn(4, 32).log_softmax(-1)
    _expect_same_error(lambda x, t: F.nll_loss(x, t), (lp, torch.tensor([3, 99, 0, 31])), ran=NLL)


def test_nll_loss2d_raises():
    lp = torch.randn(2, 5, 3, 3).log_softmax(1)
    t = torch.randint(0, 5, (2, 3, 3))
    t[1, 2, 0] = 6
    _expect_same_error(lambda x, t: F.nll_loss(x, t), (lp, t),
                       ran=(("aten.nll_loss2d_forward", "aten.nll_loss_forward"),))


@pytest.mark.parametrize("bad", [8, -1])
def test_gather_index_out_of_range_raises_runtime_error(bad):
    x = torch.randn(4, 6, 8)
    idx = torch.randint(0, 8, (4, 6, 1))
    idx[2, 3, 0] = bad
    _expect_same_error(lambda x, i: torch.gather(x.exp(), -1, i) * 2, (x, idx),
                       ran=("aten.gather",))
    _expect_same_error(lambda x, i: torch.gather(x * 3, 2, i), (x, idx), ran=("aten.gather",))


def test_gather_backward_raises():
    x = torch.randn(4, 6, 8)
    idx = torch.randint(0, 8, (4, 6, 1))
    idx[0, 0, 0] = 8
    _expect_same_error(lambda x, i: torch.gather(x.exp(), -1, i) * 2, (x, idx), backward=True,
                       ran=("aten.gather",))


def test_scatter_add_index_out_of_range_raises():
    base = torch.zeros(4, 5)
    src = torch.randn(4, 1)
    idx = torch.tensor([[0], [4], [5], [1]])
    _expect_same_error(lambda b, s, i: b.scatter_add(1, i, s) + 1, (base, src, idx),
                       ran=("aten.scatter_add",))


@pytest.mark.parametrize("kwargs,labels", [
    ({}, [0, -100, 1, 2, 4, 3]),
    ({"weight": torch.rand(5) + 0.1}, [0, -100, 1, 2, 4, 3]),
    ({"ignore_index": 4}, [0, 4, 1, 2, 4, 3]),
    ({"reduction": "sum"}, [0, -100, 1, 2, 4, 3]),
], ids=["plain", "weight", "ignore_index", "sum"])
def test_ignored_labels_keep_pytorch_meaning_and_divisors(kwargs, labels):
    t = torch.tensor(labels)

    def fn(x, t):
        return F.cross_entropy(x, t, **kwargs)

    a = LOGITS.clone().requires_grad_(True)
    b = LOGITS.clone().requires_grad_(True)
    got, want = _compiled(fn)(a, t), fn(b, t)
    torch.testing.assert_close(got, want)
    got.backward()
    want.backward()
    torch.testing.assert_close(a.grad, b.grad)
    report = st.last_report()
    assert "aten.nll_loss_forward" in set(report.replaced()) | report.origins(), str(report)


def test_all_labels_ignored_is_nan_as_in_pytorch():
    t = torch.full((6,), -100)
    fn = lambda x, t: F.cross_entropy(x, t)  # noqa: E731
    got = _compiled(fn)(LOGITS, t)
    assert torch.isnan(got) and torch.isnan(fn(LOGITS, t))
