"""Random numbers through torch.compile(backend="stitch"): dropout becomes a (seed, offset) drawn
from PyTorch's generator and Stitch's counter-based random_uniform (see stitch/torch/_random.py).

What must hold: the torch implementation of Philox gives the published test vectors and the
same bits as Stitch's random_uniform; compiled dropout keeps 1 - p of the values, scaled by
1/(1-p); the backward's mask is the forward's (it is regenerated from the saved seed, not saved);
successive calls draw fresh masks and torch.manual_seed repeats them; the dropout and its
backward run in Stitch pieces."""
import math

import pytest
import torch
import torch.nn.functional as F

import harness
import stitch
import stitch.torch
from stitch.torch import _random

WORDS = lambda *v: [torch.tensor([x], dtype=torch.int64) for x in v]  # noqa: E731


@pytest.mark.parametrize("counter,key,expected", [
    # Random123's kat_vectors for philox4x32, 10 rounds.
    ((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
    ((0xffffffff,) * 4, (0xffffffff,) * 2, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
    ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
     (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)),
])
def test_philox_gives_the_published_vectors(counter, key, expected):
    got = _random.philox4x32_10(WORDS(*counter), WORDS(*key))
    assert tuple(w.item() for w in got) == expected


@pytest.mark.parametrize("dtype,bits", [(torch.float32, 24), (torch.float16, 11),
                                        (torch.bfloat16, 8), (torch.float64, 32)])
def test_uniform_follows_the_counter_layout(dtype, bits):
    """Element i is word i & 3 of block i >> 2 at counter (i >> 2, offset), its top `bits`
    bits times 2^-bits (the random_uniform spec)."""
    seed, offset = 0x1234567890ABCDEF, (5 << 32) + 7
    u = _random.uniform(torch.tensor([seed, offset]), [3, 11], dtype)
    assert u.shape == (3, 11) and u.dtype == dtype
    flat = u.reshape(-1).double()
    for i in (0, 1, 3, 4, 17, 32):
        words = _random.philox4x32_10(
            WORDS(i >> 2, 0, offset & 0xFFFFFFFF, offset >> 32),
            WORDS(seed & 0xFFFFFFFF, seed >> 32))
        want = (words[i & 3].item() >> (32 - bits)) * 2.0 ** -bits
        assert flat[i].item() == want, i
    assert (flat >= 0).all() and (flat < 1).all()
    assert torch.equal(flat * 2 ** bits, (flat * 2 ** bits).round())
    other = _random.uniform(torch.tensor([seed, offset + 1]), [3, 11], dtype)
    assert not torch.equal(u, other)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "f64"])
def test_stitch_random_uniform_has_the_torch_bits(backend, dtype):
    """The eager implementation (a piece that falls back) and Stitch's op agree bit for bit."""
    program = stitch.compile(
        "graph r(seed: i64[], offset: i64[]) {\n"
        "  u = random_uniform(seed, offset, shape=[7, 9], dtype=%s)\n"
        "  return u\n}\n" % dtype, backend=backend)
    tdt = stitch.torch._common.TORCH_DTYPE[dtype]
    for seed, offset in [(0, 0), (42, 3), (2 ** 62 + 12345, 2 ** 40 + 9)]:
        got, = program.run_torch([torch.tensor(seed), torch.tensor(offset)])
        want = _random.uniform(torch.tensor([seed, offset]), [7, 9], tdt)
        assert torch.equal(got, want), (seed, offset)


P = 0.3


def dropped(x):
    return F.dropout(torch.tanh(x), p=P, training=True) * 3


def test_dropout_forward_and_backward_run_in_stitch_and_share_the_mask():
    compiled = harness.compile_model(dropped)
    x = torch.randn(256, 64, requires_grad=True)
    y = compiled(x)
    y.sum().backward()
    kept = y != 0
    # Statistics: 16384 Bernoulli(0.7) draws lie within 5 standard deviations of 0.7.
    n = kept.numel()
    assert abs(kept.float().mean().item() - (1 - P)) < 5 * math.sqrt(P * (1 - P) / n)
    t = torch.tanh(x.detach())
    torch.testing.assert_close(y[kept], (t * 3 / (1 - P))[kept])
    # The backward's mask is the forward's.
    torch.testing.assert_close(x.grad, 3 * (1 - t * t) * kept / (1 - P))
    if harness.STITCH:
        r = stitch.torch.last_report()
        harness.expect_in_stitch(forward=["aten.native_dropout"],
                                 backward=["aten.native_dropout", "aten.native_dropout_backward"])
        for g in r.graphs:
            assert "stitch.philox_uniform" in g.replaced(), str(r)
        # The backward reads x and the 16-byte seed, never a saved mask.
        assert r.graph("backward").saved_tensors == 2, str(r)
        assert not r.runtime_fallbacks, str(r)


def test_dropout_draws_fresh_masks_and_manual_seed_repeats_them():
    compiled = harness.compile_model(dropped)
    x = torch.randn(64, 32)
    torch.manual_seed(3)
    a, b = compiled(x), compiled(x)
    torch.manual_seed(3)
    c = compiled(x)
    assert not torch.equal(a != 0, b != 0)
    assert torch.equal(a, c)


def test_dropout_mask_is_the_torch_philox_of_the_drawn_seed():
    """The compiled mask is uniform(seed) >= p for the seed PyTorch's generator gives after
    manual_seed (the graph's only draw): Stitch's bits are the torch implementation's."""
    if not harness.STITCH:
        pytest.skip("the seed layout is Stitch's")
    compiled = harness.compile_model(dropped)
    x = torch.randn(33, 17) + 5  # tanh(x) > 0: a zero in y is a dropped value
    torch.manual_seed(11)
    y = compiled(x)
    torch.manual_seed(11)
    seed = torch.ops.stitch.philox_seed(x.device, 0)
    keep = _random.uniform(seed, [33, 17], torch.float32) >= P
    assert torch.equal(y != 0, keep)


def test_rewrite_leaves_eval_and_p_one_dropout_alone():
    def f(x):
        return F.dropout(x, p=1.0, training=True) + F.dropout(x * 2, p=0.5, training=False)
    compiled = harness.compile_model(f)
    x = torch.randn(8, 8)
    torch.testing.assert_close(compiled(x), x * 2)


def test_rand_rand_like_and_bernoulli_draw_from_philox():
    """rand_like's numbers in the backward are the forward's (regenerated: y = x * r gives
    dy/dx = r = y / x); rand lies in [0, 1); bernoulli(p) is 1 with probability p."""
    def f(x):
        r = torch.rand_like(x)
        col = torch.rand(x.shape[0], 1)
        flips = torch.bernoulli(torch.full_like(x, 0.25)) + torch.bernoulli(x.detach(), 0.75)
        return x * r, col, flips
    compiled = harness.compile_model(f)
    x = (torch.rand(128, 64) + 0.5).requires_grad_()
    torch.manual_seed(5)
    y, col, flips = compiled(x)
    y.sum().backward()
    torch.testing.assert_close(x.grad, (y / x).detach())
    r = (y / x).detach()
    assert ((r >= 0) & (r < 1)).all() and ((col >= 0) & (col < 1)).all()
    n = x.numel()
    assert abs(r.mean().item() - 0.5) < 5 * math.sqrt(1 / 12 / n)
    assert abs(flips.mean().item() - 1.0) < 5 * math.sqrt((0.25 * 0.75 * 2) / n)
    torch.manual_seed(5)
    again = compiled(x)
    assert all(torch.equal(a, b) for a, b in zip(again, (y, col, flips)))
    if harness.STITCH:
        harness.expect_in_stitch(forward=["aten.rand_like", "aten.bernoulli"],
                                 backward=["aten.rand_like"])
        r = stitch.torch.last_report()
        assert all(fb["op"] != "stitch.philox_uniform" for g in r.graphs for fb in g.fallbacks), \
            str(r)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_dropout_in_an_inference_graph(dtype):
    """A module in train mode called under no_grad: the inference graph's dropout is rewritten
    too (nothing to save), in the input's dtype."""
    compiled = harness.compile_model(dropped)
    x = (torch.rand(128, 64) + 1).to(dtype)
    with torch.no_grad():
        y = compiled(x)
    assert y.dtype == dtype
    kept = y != 0
    assert abs(kept.float().mean().item() - (1 - P)) < 5 * math.sqrt(P * (1 - P) / x.numel())
    want = (torch.tanh(x) * (1.0 / (1 - P))).to(dtype) * 3
    torch.testing.assert_close(y[kept], want[kept], rtol=1e-2, atol=1e-2)
    if harness.STITCH:
        g = stitch.torch.last_report().graph("inference")
        assert "stitch.philox_uniform" in g.replaced(), str(g.lines())
