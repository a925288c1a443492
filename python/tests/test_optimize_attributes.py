"""stitch.torch.optimize reads every attribute its traced graph reads, at every call and every
shape: the tensor constants symbolic_trace makes (a causal mask built in forward: issue 33, item
5), plain tensor attributes of the module and of its children, and buffers replaced after tracing
(before the first call too), while the module keeps sharing the original's state. Run on PyTorch
1.13 here and on 2.x by torch2/test_optimize_attributes_torch2.py."""
import copy

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import stitch.torch as st  # noqa: E402


class CausalBlock(nn.Module):
    """A GPT-style block whose causal mask is built in forward from sizes held in attributes:
    symbolic_trace evaluates ``torch.ones(n, n).tril()`` once and keeps the result as the
    attribute ``_tensor_constant0``, which the traced graph reads."""

    def __init__(self, d=32, heads=4, block=8):
        super().__init__()
        self.d, self.heads, self.block = d, heads, block
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, c, h = x.size(0), self.block, self.d, self.heads
        qkv = self.qkv(self.ln(x))
        q = qkv[:, :, :c].reshape(b, t, h, c // h).transpose(1, 2)
        k = qkv[:, :, c:2 * c].reshape(b, t, h, c // h).transpose(1, 2)
        v = qkv[:, :, 2 * c:].reshape(b, t, h, c // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (c // h) ** 0.5)
        mask = torch.ones(self.block, self.block).tril()
        att = F.softmax(att.masked_fill(mask == 0, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        return x + self.proj(y)


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.arange(8.0)  # a plain tensor attribute of a child (not a buffer)


class Attributes(nn.Module):
    """Every kind of attribute a traced graph reads."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.scale = torch.tensor(0.5)  # a plain tensor attribute of the module itself
        self.register_buffer("shift", torch.full((8,), 0.25))
        self.inner = Inner()

    def forward(self, x):
        ramp = torch.ones(8).cumsum(0)  # a constant of the trace
        return torch.relu(self.norm(x) * self.scale + self.shift + self.inner.table - ramp)


def check(fast, model, x):
    with torch.no_grad():
        torch.testing.assert_close(fast(x), model(x), rtol=1e-4, atol=1e-4)


def test_a_causal_mask_built_in_forward_runs_at_every_shape():
    torch.manual_seed(0)
    m = CausalBlock().eval()
    fast = st.optimize(m)
    for batch in (2, 3, 5, 2):
        check(fast, m, torch.randn(batch, 8, 32))
    r = fast.stitch_report
    assert "Tensor.masked_fill" in r.replaced() and not r.runtime_fallbacks, str(r)


def test_the_trace_constants_belong_to_the_optimized_module():
    torch.manual_seed(1)
    m = CausalBlock().eval()
    fast = st.optimize(m)
    # symbolic_trace put _tensor_constant0 on the module it traced; optimize took it back.
    assert not hasattr(m, "_tensor_constant0")
    assert isinstance(fast._tensor_constant0, torch.Tensor)
    assert fast.state_dict().keys() == m.state_dict().keys()
    x = torch.randn(2, 8, 32)
    check(fast, m, x)
    # Constants follow the module's conversions as buffers do (the trace may fold the mask into
    # a bool tensor, which .double() leaves alone), and a deep copy has its own.
    before = fast._tensor_constant0.dtype
    fast.double()
    assert fast._tensor_constant0.dtype == (torch.float64 if before.is_floating_point else before)
    check(fast, m, x.double())
    fast.float()
    clone = copy.deepcopy(fast)
    assert clone._tensor_constant0 is not fast._tensor_constant0
    check(clone, clone.original, torch.randn(3, 8, 32))
    check(fast, m, torch.randn(4, 8, 32))


def test_every_attribute_the_graph_reads_is_read_at_every_call():
    torch.manual_seed(2)
    m = Attributes().eval()
    fast = st.optimize(m)
    for batch in (2, 3):
        check(fast, m, torch.randn(batch, 8))
    assert not hasattr(m, "_tensor_constant0")  # the ramp: the optimized module's
    fast.double()
    assert fast._tensor_constant0.dtype == torch.float64
    check(fast, m.double(), torch.randn(2, 8, dtype=torch.float64))
    fast.float()
    # Each kind of attribute replaced after the first call: the next call reads the new one.
    m.scale = torch.tensor(2.0)
    check(fast, m, torch.randn(4, 8))
    m.shift = torch.full((8,), -1.0)  # a registered buffer's name: replaces the buffer
    check(fast, m, torch.randn(2, 8))
    m.inner.table = torch.linspace(0, 3, 8)
    check(fast, m, torch.randn(3, 8))
    assert fast.stitch_report.programs >= 1


def test_state_replaced_between_optimize_and_the_first_call_is_read():
    torch.manual_seed(3)
    m = Attributes().eval()
    fast = st.optimize(m)
    # The first call records by running the traced graph: it must read the module as it is now,
    # not the copies symbolic_trace took.
    m.shift = torch.full((8,), 3.0)
    m.scale = torch.tensor(-1.5)
    check(fast, m, torch.randn(2, 8))
    check(fast, m, torch.randn(3, 8))
