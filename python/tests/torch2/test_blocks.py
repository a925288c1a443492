"""Hand-written blocks of CNN and transformer models through torch.compile, in inference and in
training (three SGD steps, each call at new sizes), against eager: GroupNorm + SiLU after a
convolution, BatchNorm in training (its running statistics too), SwiGLU with `chunk`, RMSNorm;
and dropout in training, whose masks may come from another random stream than eager's, so it is
checked by what any dropout must satisfy."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import harness


class GroupNormSiLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.norm = nn.GroupNorm(4, 8)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.norm(self.conv(x)))


class ConvBatchNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)

    def forward(self, x):
        return F.relu(self.norm(self.conv(x)))


class SwiGLU(nn.Module):
    def __init__(self, dim=32, hidden=48):
        super().__init__()
        self.up = nn.Linear(dim, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        gate, value = self.up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * value)


class RMSNorm(nn.Module):
    """A projection, then RMSNorm: the projection's gradient goes through the norm's backward
    (with the block's input as the only thing before it, the backward would compute the norm
    weight's gradient alone)."""

    def __init__(self, dim=32, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.proj = nn.Linear(dim, dim)
        self.weight = nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, x):
        x = self.proj(x)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


IMAGES = [(2, 4, 8, 8), (3, 4, 6, 10), (2, 4, 12, 12)]
TOKENS = [(2, 8, 32), (3, 12, 32), (2, 16, 32)]
# Per block: its class, the input shapes of successive calls, and the aten ops that must run in
# Stitch in the forward, backward and inference graphs.
BLOCKS = {
    "groupnorm_silu": (GroupNormSiLU, IMAGES, {
        "forward": ["aten.native_group_norm", "aten.silu"],
        "backward": ["aten.native_group_norm_backward", "aten.silu_backward"],
        "inference": ["aten.native_group_norm", "aten.silu"]}),
    # AOTAutograd's functional form of batch norm in training (it returns the new running
    # statistics instead of writing them), the eval form without statistics in inference.
    "batchnorm": (ConvBatchNorm, IMAGES, {
        "forward": ["aten._native_batch_norm_legit_functional"],
        "backward": ["aten.native_batch_norm_backward"],
        "inference": ["aten._native_batch_norm_legit_no_training"]}),
    "swiglu": (SwiGLU, TOKENS, {
        "forward": ["aten.silu", "aten.mul"],
        "backward": ["aten.silu_backward"],
        "inference": ["aten.silu", "aten.mul"]}),
    "rmsnorm": (RMSNorm, TOKENS, {
        "forward": ["aten.pow", "aten.mean", "aten.rsqrt"],
        "backward": ["aten.pow"],
        "inference": ["aten.pow", "aten.mean", "aten.rsqrt"]}),
}


def data(shapes):
    """(input, seed of the upstream gradient) per call."""
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(s, generator=g), seed) for seed, s in enumerate(shapes)]


def build(name):
    torch.manual_seed(0)
    return BLOCKS[name][0]()


def loss_of(model, batch):
    """sum(out * g) / numel with a fixed random g: every output element gets its own gradient (a
    loss such as mean(out^2) is near constant after a norm)."""
    x, seed = batch
    out = model(x)
    return (out * harness.seeded_randn(out.shape, seed)).sum() / out.numel()


@pytest.mark.parametrize("name", BLOCKS)
def test_block_inference(name):
    model = build(name)
    if name == "batchnorm":
        # Running statistics other than the initial 0 and 1.
        model.norm.running_mean.uniform_(-0.5, 0.5)
        model.norm.running_var.uniform_(0.5, 2.0)
    harness.check_inference(model, [x for x, _ in data(BLOCKS[name][1])], lambda m, x: m(x))
    harness.expect_in_stitch(inference=BLOCKS[name][2]["inference"])
    harness.expect_no_runtime_fallbacks()


@pytest.mark.parametrize("name", BLOCKS)
def test_block_training(name):
    eager, compiled = harness.check_training(build(name), data(BLOCKS[name][1]), loss_of)
    if name == "batchnorm":
        # check_training compared the buffers after each step; make sure there was something to
        # compare: three batches moved the running statistics and counted.
        assert int(compiled.norm.num_batches_tracked) == 3
        assert not torch.allclose(compiled.norm.running_mean, torch.zeros(8))
    wanted = BLOCKS[name][2]
    harness.expect_in_stitch(forward=wanted["forward"], backward=wanted["backward"])
    harness.expect_no_runtime_fallbacks()


class DropoutBlock(nn.Module):
    def __init__(self, dim, p):
        super().__init__()
        self.w = nn.Parameter(torch.rand(dim) + 0.5)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        return self.drop(torch.tanh(x) * self.w)


def test_dropout_training():
    """Whatever random stream the compiled dropout draws from, for each call: the kept elements
    are exactly the eager values scaled by 1/(1-p); about p of them are dropped; the gradients are
    those of the mask the output shows; and every call draws a new mask."""
    p, dim = 0.3, 256
    torch.manual_seed(0)
    block = DropoutBlock(dim, p).train()
    compiled = harness.compile_model(block)
    gen = torch.Generator().manual_seed(2)
    masks = []
    for rows in (64, 48, 64):
        x = torch.randn(rows, dim, generator=gen).requires_grad_()
        g = torch.randn(rows, dim, generator=gen)
        y = compiled(x)
        (y * g).sum().backward()
        h = (torch.tanh(x) * block.w).detach()
        assert (h != 0).all()  # so a zero in y is a dropped element
        kept = y.detach() != 0
        harness.close(y.detach()[kept], h[kept] / (1 - p), "kept elements")
        n = kept.numel()
        dropped = 1 - kept.float().mean().item()
        assert abs(dropped - p) < 5 * math.sqrt(p * (1 - p) / n), f"dropped {dropped:.3f}, p={p}"
        scale = kept.float() / (1 - p)
        t = torch.tanh(x.detach())
        harness.close(x.grad, g * scale * block.w.detach() * (1 - t * t), "input gradient")
        harness.close(block.w.grad, (g * scale * t).sum(0), "weight gradient")
        block.w.grad = None
        masks.append(kept)
    assert not torch.equal(masks[0], masks[2]), "two calls drew the same dropout mask"


def test_dropout_eval_is_identity():
    torch.manual_seed(0)
    block = DropoutBlock(64, 0.5).eval()
    x = torch.randn(8, 64)
    with torch.no_grad():
        harness.close(harness.compile_model(block)(x), torch.tanh(x) * block.w, "eval dropout")


class ShiftedLM(nn.Module):
    """A causal LM's head and loss as Hugging Face writes them: the logits are an output, and the
    loss reads them shifted (logits[..., :-1, :] against labels[..., 1:]); their gradient comes
    back through slice_backward (zeros beside it) and is added to the logits' own."""

    def __init__(self, d=16, vocab=24):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids, shift):
        logits = self.head(torch.tanh(self.emb(ids)))
        lo, hi = shift
        loss = F.cross_entropy(logits[:, lo:logits.shape[1] + hi].flatten(0, 1),
                               ids[:, 1 + lo:ids.shape[1] + 1 + hi].flatten())
        return logits, loss


@pytest.mark.parametrize("dynamic", [True, None], ids=["dynamic", "automatic"])
@pytest.mark.parametrize("shift", [(0, -1), (2, -1), (0, -3)], ids=["head", "start", "end"])
def test_shifted_logits_gradient_runs_in_stitch(shift, dynamic):
    torch.manual_seed(0)
    batches = [torch.randint(0, 24, (b, s)) for b, s in [(2, 9), (3, 12), (2, 16)]]

    def loss_of(model, ids):
        logits, loss = model(ids, shift)
        return loss + logits.square().mean()

    harness.check_training(ShiftedLM(), batches, loss_of, dynamic=dynamic)
    harness.expect_in_stitch(backward=["aten.slice_backward"])
    harness.expect_no_runtime_fallbacks()


class ClassToken(nn.Module):
    """ViT's head: the class token, x[:, 0], of a sequence of tokens (here any token: `index`);
    its gradient comes back through select_backward (zeros beside it)."""

    def __init__(self, index, d=16, classes=5):
        super().__init__()
        self.index = index
        self.proj = nn.Linear(d, d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        h = torch.tanh(self.proj(x))
        return self.head(h[:, self.index]) + h.mean()


@pytest.mark.parametrize("index", [0, -1, 2])
def test_class_token_gradient_runs_in_stitch(index):
    """select_backward runs in Stitch (a concat of zeros and the gradient), at the first, the last
    and a middle token; calls that change the batch only (the token axis stays static)."""
    torch.manual_seed(0)
    batches = [torch.randn(b, 7, 16) for b in (2, 3, 4)]

    def loss_of(m, x):
        return m(x).square().mean()

    harness.check_training(ClassToken(index), batches, loss_of)
    harness.expect_in_stitch(backward=["aten.select_backward"])
    harness.expect_no_runtime_fallbacks()


def test_matmul_outputs_come_from_the_host_pool(monkeypatch):
    """The matmuls of a host graph write into outputs from the package's pool of mappings
    (_compile._library_outputs_from_pool): the second call's output reuses the first's pages once
    that tensor has died; results match eager, in inference and training (mm, addmm and bmm, in
    the forward and the backward); STITCH_HOST_POOL_MB=0 gives torch.empty's outputs."""
    torch.manual_seed(0)
    monkeypatch.delenv("STITCH_HOST_POOL_MB", raising=False)
    lin = nn.Linear(64, 1024)  # [256, 1024] f32 outputs: 1 MiB
    w = torch.randn(1024, 1024)
    v = torch.randn(4, 64, 256)

    def f(x):
        h = lin(x)
        return h @ w, torch.bmm(x.view(4, 64, 64), v)

    x = torch.randn(256, 64)
    compiled = harness.compile_model(f)
    seen = set()
    with torch.no_grad():
        for _ in range(5):
            a, b = compiled(x)
            seen.add(a.data_ptr())
            del a, b
        a, b = compiled(x)
        ref = f(x)
    torch.testing.assert_close(a, ref[0])
    torch.testing.assert_close(b, ref[1])
    if harness.STITCH:
        # Two 1 MiB+ results a call (h, then the returned one): two blocks serve them all.
        assert len(seen) <= 2, seen
        assert not a.untyped_storage().resizable()
    harness.check_training(nn.Sequential(nn.Linear(64, 512), nn.Tanh(), nn.Linear(512, 64)),
                           [torch.randn(256, 64), torch.randn(300, 64)],
                           lambda m, x: m(x).square().mean())
    monkeypatch.setenv("STITCH_HOST_POOL_MB", "0")
    torch._dynamo.reset()
    with torch.no_grad():
        a, _ = harness.compile_model(f)(x)
    torch.testing.assert_close(a, ref[0])
    assert a.untyped_storage().resizable()


def test_permuted_inputs_with_contiguous_rows_are_read_in_place(monkeypatch):
    """A piece input whose layout permutes only outer dims (a [batch, seq, heads, dim] tensor
    read as [batch, heads, seq, dim], as attention's gradients arrive) reaches the program as a
    contiguous view of its memory, which the program transposes back
    (Partitioner._read_in_place), where run_torch copied it before; one whose last dim is strided
    in memory is still copied. Results match eager, with static and dynamic sizes, and in
    training."""
    import stitch
    calls = []
    run_torch = stitch.Program.run_torch

    def spy(self, inputs, stream=None):
        calls.append(all(t.is_contiguous() for t in inputs))
        return run_torch(self, inputs, stream)

    monkeypatch.setattr(stitch.Program, "run_torch", spy)

    def f(x):
        return torch.softmax(x * 0.5, dim=-1) + 1

    rows = lambda b: torch.randn(b, 24, 4, 16).transpose(1, 2)  # noqa: E731 - last dim innermost
    strided = lambda b: torch.randn(b, 24, 16, 4).permute(0, 3, 1, 2)  # noqa: E731 - 4 apart
    for make, in_place in ((rows, True), (strided, False)):
        for dynamic in (False, True):
            harness.reset()
            calls.clear()
            compiled = harness.compile_model(f, dynamic=dynamic)
            for batch in (3, 5):
                x = harness.on_device(make(batch))
                assert not x.is_contiguous()
                harness.close(compiled(x), f(x), "in place %s, batch %d" % (in_place, batch))
            if harness.STITCH:
                assert calls and all(calls) == in_place, (in_place, dynamic, calls)
    harness.reset()
    harness.check_training(nn.Linear(16, 16), [rows(3), rows(5)],
                           lambda m, x: torch.softmax(m(x * 2), -1).square().mean())
    harness.expect_no_runtime_fallbacks()


def test_copies_for_a_matmul_read_their_source_in_rows(monkeypatch):
    """q @ k.transpose(-1, -2) on [batch, heads, seq, dim] tensors: the copy matmul makes of the
    transposed keys is made of the keys in rows and handed to bmm as a transposed view
    (_matmul_copies); results match eager. A copy that also leaves the graph keeps PyTorch's
    row-major layout, and training is unchanged."""
    from stitch.torch import _compile
    rewritten = []
    rewrite = _compile.copy_matmul_operands_in_rows

    def spy(gm):
        rewritten.append(rewrite(gm))
        return rewritten[-1]

    monkeypatch.setattr(_compile, "copy_matmul_operands_in_rows", spy)
    lin = harness.on_device(nn.Linear(32, 96, bias=False))

    def attention(x):
        q, k, v = (t.view(x.shape[0], x.shape[1], 4, 8).transpose(1, 2)
                   for t in lin(x).chunk(3, -1))
        return torch.softmax(q @ k.transpose(-1, -2), -1) @ v

    def returned(k):
        kt = k.transpose(-1, -2).contiguous()
        return k @ kt, kt

    x = harness.on_device(torch.randn(2, 16, 32))
    k = harness.on_device(torch.randn(2, 4, 16, 8))
    with torch.no_grad():
        harness.close(harness.compile_model(attention)(x), attention(x), "attention")
        got, want = harness.compile_model(returned)(k), returned(k)
    for g, w, what in zip(got, want, ("product", "returned copy")):
        harness.close(g, w, what)
        assert g.stride() == w.stride(), (what, g.stride(), w.stride())
    if harness.STITCH:
        assert rewritten[0] >= 1 and rewritten[1] == 0, rewritten
    harness.reset()
    harness.check_training(nn.Sequential(nn.Linear(32, 32), nn.Tanh()), [x, x * 2],
                           lambda m, x: attention(m(x)).square().mean())


class AutocastProjections(nn.Module):
    """Three Linear layers on one normalized input, as attention's q, k and v: under bf16
    autocast each f32 weight is cast to bf16 on every call, a piece reading only a graph input."""

    def __init__(self, d=32):
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(d, d, bias=False) for _ in range(3))

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6)
            return (torch.sigmoid(self.q(h)) * self.k(h) + self.v(h)).float()


@harness.needs_stitch
@pytest.mark.skipif(harness.DEVICE.type != "cpu", reason="bf16 autocast of the CPU")
def test_casts_of_graph_inputs_join_the_nearest_piece():
    """Autocast's weight casts read graph inputs only and would each be a program of their own;
    they join the norm's piece before them (Partitioner._merge_input_only): one program for the
    norm and the three casts, one for the gate, in inference; training matches eager too."""
    torch.manual_seed(0)
    model = AutocastProjections()
    batches = [torch.randn(2, 8, 32), torch.randn(3, 5, 32)]
    harness.check_inference(model, batches, lambda m, x: m(x))
    graphs = [g for r in harness.reports() for g in r.graphs if g.kind == "inference"]
    assert graphs and all(g.programs == 2 for g in graphs), harness.describe()
    casts = [p for g in graphs for p in g.pieces if "aten._to_copy" in p["ops"]
             and "aten.rsqrt" in p["ops"]]
    assert casts and all(p["ops"].count("aten._to_copy") >= 3 for p in casts), harness.describe()
    harness.reset()
    harness.check_training(AutocastProjections(), batches, lambda m, x: m(x).square().mean())
    harness.expect_no_runtime_fallbacks()


@harness.needs_stitch
def test_a_copy_of_a_piece_result_stays_in_the_piece():
    """clone and contiguous copy (not free in PyTorch, unlike a view): at a piece's end, and as a
    result of the graph, they stay in the piece, which writes the copy's layout (clone keeps the
    transposed strides, as PyTorch's preserve_format does) as a tensor of its own, never the
    result it copies."""
    def f(x):
        y = x * 2 + 1
        return y, y.transpose(1, 2).clone(), y.clone(), torch.tanh(y).transpose(0, 1).contiguous()

    x = harness.on_device(torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0)))
    got, want = harness.compile_model(f)(x), f(x)
    for g, w, what in zip(got, want, ("y", "transposed clone", "clone", "contiguous")):
        harness.close(g, w, what)
        assert g.stride() == w.stride(), (what, g.stride(), w.stride())
    assert len({t.data_ptr() for t in got}) == 4
    got[2].add_(1)
    harness.close(got[0], want[0], "y after its clone changed")
    harness.expect_in_stitch(inference=["aten.clone", "aten.transpose"])
    graphs = [g for r in harness.reports() for g in r.graphs]
    assert graphs and all(g.programs == 1 for g in graphs), harness.describe()
