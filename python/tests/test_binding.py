"""The ctypes binding: parse and run, graphs built in Python, NumPy and PyTorch zero-copy,
errors as StitchError with the C API's status and message."""
import os
import time

import numpy as np
import pytest

import stitch

SOFTMAX = """
graph sm(x: f32[N, 8]) {
  y = softmax(x, axis=-1)
  return y
}
"""


def _engine():
    try:
        return stitch.engine(backend="cpu")
    except stitch.StitchError:
        return stitch.engine(backend="reference")


def test_version():
    assert stitch.version().count(".") == 2


def test_parse_and_run_numpy_zero_copy():
    g = stitch.parse(SOFTMAX)
    assert g.name == "sm" and g.num_inputs == 1
    p = _engine().compile(g)
    x = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    out = np.full((5, 8), np.nan, dtype=np.float32)
    res = p.run([x], [out])
    assert res[0] is out  # written in place: no copy on the way out
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert p.output_shapes([np.zeros((3, 8), np.float32)]) == [(3, 8)]


def test_program_stats_count_signatures_and_kept_plans():
    # Rows 40, 33 and 47 are one plan class (2^5), 5 another: two searches, two kept plans.
    # A graph name no earlier process used: planned here, not warm-started from a program entry
    # an earlier run left in the disk cache.
    fresh = SOFTMAX.replace("graph sm(", "graph sm_%d_%d(" % (os.getpid(), time.time_ns()))
    assert fresh != SOFTMAX
    p = _engine().compile(stitch.parse(fresh))
    for n in (40, 33, 47, 5, 40):
        x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        e = np.exp(x - x.max(-1, keepdims=True))
        np.testing.assert_allclose(p.run([x])[0], e / e.sum(-1, keepdims=True), rtol=1e-5,
                                   atol=1e-6)
    assert p.stats() == {"signatures": 4, "plan_searches": 2, "plan_reuses": 2,
                         "plan_classes": 2, "warm_starts": 0}


def test_build_graph_in_python_and_run_torch():
    torch = pytest.importorskip("torch")
    g = stitch.Graph("bias_gelu")
    x = g.add_input("x", "f32", ["B", 16])
    b = g.add_input("b", "f32", [16])
    y = g.add_op("add", x, b)
    z = g.add_op("gelu", y, approximate="tanh")
    s = g.add_op("reduce_sum", z, axes=[1], keepdims=True)
    half = g.add_op("mul", s, g.add_constant(0.5, "f32"))
    g.set_outputs([z, half])
    g.verify()
    assert "gelu" in g.text()
    p = _engine().compile(g)
    xt, bt = torch.randn(4, 16), torch.randn(16)
    z_out, h_out = p.run([xt, bt])
    ref = torch.nn.functional.gelu(xt + bt, approximate="tanh")
    torch.testing.assert_close(z_out, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(h_out, ref.sum(1, keepdim=True) * 0.5, rtol=1e-5, atol=1e-5)


def test_parse_module_and_plan():
    mod = stitch.parse_module(SOFTMAX + SOFTMAX.replace("sm(", "sm2("))
    assert list(mod) == ["sm", "sm2"]
    plan = mod["sm2"].explain_plan({"N": 64}, format="json", target="host")
    assert len(plan["kernels"]) >= 1


def test_parse_error_raises_with_status_and_message():
    with pytest.raises(stitch.StitchError) as info:
        stitch.parse("graph g(x: f32[2]) {\n  y = frobnicate(x)\n  return y\n}\n", "bad.stitch")
    e = info.value
    assert e.status in (stitch.Status.PARSE, stitch.Status.INVALID_GRAPH)
    assert e.status_name.startswith("STITCH_ERROR_")
    assert "bad.stitch:2" in e.message and "frobnicate" in e.message


def test_bad_op_and_shape_mismatch_raise():
    g = stitch.Graph("g")
    x = g.add_input("x", "f32", [4])
    i = g.add_input("i", "i32", [4])
    with pytest.raises(stitch.StitchError) as info:
        g.add_op("add", x, i)  # no implicit promotion
    assert info.value.status == stitch.Status.INVALID_GRAPH
    g.set_outputs([g.add_op("exp", x)])
    p = _engine().compile(g)
    with pytest.raises(stitch.StitchError) as info:
        p.run([np.zeros(5, np.float32), np.zeros(4, np.int32)])
    assert info.value.status == stitch.Status.SHAPE_MISMATCH


def test_unknown_engine_option():
    with pytest.raises(stitch.StitchError) as info:
        stitch.Engine(backend="tpu")
    assert info.value.status == stitch.Status.INVALID_ARGUMENT
    assert "cpu" in info.value.message  # lists the valid ones


# ---------------------------------------------------------------------------------------------
# Program.run_torch: the PyTorch fast path (signatures kept, one C call per repeat)

MIXED = """
graph mixed(x: f32[N, 4], b: f32[4]) {
  y = add(x, b)
  m = lt(x, b)
  d = cast(y, to=f64)
  return y, m, d
}
"""


def _mixed_want(torch, x, b):
    y = x + b
    return [y, x < b, y.double()]


def _assert_outputs(torch, got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape and g.is_contiguous()
        torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_run_torch_repeats_and_changes_signatures():
    torch = pytest.importorskip("torch")
    p = _engine().compile(stitch.parse(MIXED))
    b = torch.randn(4)
    firsts = []
    for n in [3, 3, 5, 3, 5, 0, 1, 3]:  # repeats, a new size, alternation, empty
        x = torch.randn(n, 4)
        got = p.run_torch([x, b])
        _assert_outputs(torch, got, _mixed_want(torch, x, b))
        if n == 3:
            firsts.append((got, x))
    # Every call returned new outputs: the earlier ones still hold their own answers.
    for got, x in firsts:
        _assert_outputs(torch, got, _mixed_want(torch, x, b))
    assert len({g[0].data_ptr() for g, _ in firsts}) == len(firsts)


def test_run_torch_non_contiguous_inputs_are_copied():
    torch = pytest.importorskip("torch")
    p = _engine().compile(stitch.parse(MIXED))
    b = torch.randn(8)[::2]  # stride 2
    x = torch.randn(4, 6).t()[:, :4]  # [6, 4], transposed
    assert not x.is_contiguous() and not b.is_contiguous()
    _assert_outputs(torch, p.run_torch([x, b]), _mixed_want(torch, x, b))
    # The same shapes contiguous, then strided again: the kept signature serves both.
    xc, bc = x.contiguous() + 1, b.contiguous()
    _assert_outputs(torch, p.run_torch([xc, bc]), _mixed_want(torch, xc, bc))
    _assert_outputs(torch, p.run_torch([x, b]), _mixed_want(torch, x, b))


def test_run_torch_outputs_are_contiguous_whatever_the_inputs_memory_format():
    # An output shaped like an input is made with empty_like(memory_format=contiguous_format):
    # an input in channels_last (copied to a contiguous one first) or one that is both
    # contiguous and channels_last-contiguous (size-1 dims) must not lend its format.
    torch = pytest.importorskip("torch")
    p = _engine().compile(stitch.parse(
        "graph g(x: f32[N, C, H, W]) {\n y = mul(x, 2)\n return y\n}\n"))
    for shape in [(2, 3, 4, 5), (2, 1, 3, 3), (3, 4, 1, 1)]:
        x = torch.randn(*shape).to(memory_format=torch.channels_last)
        (y,) = p.run_torch([x])
        assert y.is_contiguous() and y.stride() == torch.empty(shape).stride()
        torch.testing.assert_close(y, x * 2, rtol=0, atol=0)


def test_run_torch_errors_after_a_good_call():
    torch = pytest.importorskip("torch")
    p = _engine().compile(stitch.parse(MIXED))
    x, b = torch.randn(3, 4), torch.randn(4)
    p.run_torch([x, b])
    with pytest.raises(stitch.StitchError) as info:
        p.run_torch([torch.randn(3, 5), b])  # x must be [N, 4]
    assert info.value.status == stitch.Status.SHAPE_MISMATCH
    with pytest.raises(stitch.StitchError) as info:
        p.run_torch([x.double(), b])
    assert info.value.status == stitch.Status.SHAPE_MISMATCH
    with pytest.raises(stitch.StitchError) as info:
        p.run_torch([x, b.to(torch.int8)])  # no Stitch dtype
    assert info.value.status == stitch.Status.UNSUPPORTED
    with pytest.raises(stitch.StitchError) as info:
        p.run_torch([x])
    assert info.value.status == stitch.Status.SHAPE_MISMATCH
    # Refused signatures are not kept, and the good one still runs.
    _assert_outputs(torch, p.run_torch([x, b]), _mixed_want(torch, x, b))
    with pytest.raises(stitch.StitchError):
        p.run_torch([torch.randn(3, 5), b])


def test_run_torch_without_inputs():
    torch = pytest.importorskip("torch")
    p = _engine().compile(stitch.parse(
        "graph g() {\n  f = full(shape=[2, 3], value=3, dtype=f32)\n  return f\n}\n"))
    for _ in range(2):
        (f,) = p.run_torch([])
        assert f.device.type == "cpu"
        torch.testing.assert_close(f, torch.full((2, 3), 3.0))


def test_run_torch_from_several_threads():
    """Threads share a program and its kept signatures; each call must compute on its own
    tensors (the C call releases the GIL, so calls overlap)."""
    torch = pytest.importorskip("torch")
    import threading
    p = _engine().compile(stitch.parse(MIXED))
    b = torch.randn(4)
    wrong = []

    def work(seed):
        g = torch.Generator().manual_seed(seed)
        for k in range(1000):
            x = torch.randn(2 + k % 2, 4, generator=g)
            got = p.run_torch([x, b])
            want = _mixed_want(torch, x, b)
            if not all(torch.equal(u, v) for u, v in zip(got, want)):
                wrong.append((seed, k))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


# ---------------------------------------------------------------------------------------------
# run_torch: large host outputs are advised into transparent huge pages (STITCH_HUGE_PAGES)

def _mapping(addr: int):
    """(start, end, THPeligible) of the mapping that holds `addr` (/proc/self/smaps), or None."""
    found = None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                lo, hi = (int(v, 16) for v in head.split("-"))
                found = (lo, hi) if lo <= addr < hi else None
            elif found and head == "THPeligible:":
                return found + (line.split()[1] == "1",)
    return None


def _thp_mode():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return None


def test_run_torch_maps_large_host_outputs_into_huge_pages(monkeypatch):
    torch = pytest.importorskip("torch")
    if _thp_mode() != "madvise":  # "always" makes every mapping eligible, "never" none
        pytest.skip("transparent huge pages are not in madvise mode here")
    text = "graph g(x: f32[N, M]) {\n y = mul(x, 2)\n m = reduce_max(x, axes=[1])\n return y, m\n}\n"
    x = torch.randn(2048, 4096)  # 32 MiB: the smallest output that gets a mapping
    monkeypatch.setenv("STITCH_HOST_POOL_MB", "0")  # a mapping of its own on every call
    for env, huge in [(None, True), ("1", True), ("0", False)]:
        if env is None:
            monkeypatch.delenv("STITCH_HUGE_PAGES", raising=False)
        else:
            monkeypatch.setenv("STITCH_HUGE_PAGES", env)
        p = _engine().compile(stitch.parse(text))  # signatures, and the setting, are per program
        for _ in range(2):  # the signature's first call and a repeat
            y, m = p.run_torch([x])
            torch.testing.assert_close(y, x * 2, rtol=0, atol=0)
            torch.testing.assert_close(m, x.amax(1), rtol=0, atol=0)
            lo, hi, eligible = _mapping(y.data_ptr())
            assert eligible is huge, env
            if huge:
                # A mapping of its own, exactly the output, released with the tensor.
                assert (lo, hi) == (y.data_ptr(), y.data_ptr() + y.numel() * 4)
                if hasattr(y, "untyped_storage"):  # PyTorch 2.x; 1.13 has no resizable()
                    assert not y.untyped_storage().resizable()
                del y
                assert _mapping(lo) is None
            # Smaller outputs (8 KiB of maxima, and 16 MiB below) come from torch.empty.
            assert not _mapping(m.data_ptr())[2]
            (half, _) = p.run_torch([x[:1024]])
            assert not _mapping(half.data_ptr())[2]
    monkeypatch.setenv("STITCH_HUGE_PAGES", "maybe")
    with pytest.raises(ValueError, match="STITCH_HUGE_PAGES=maybe"):
        _engine().compile(stitch.parse(text)).run_torch([x])


# ---------------------------------------------------------------------------------------------
# run_torch: host outputs of 1 MiB or more come from a pool of mappings (STITCH_HOST_POOL_MB)

def test_run_torch_reuses_a_host_output_only_after_its_storage_dies(monkeypatch):
    """A freed output's mapping serves the next output of its size, with its pages faulted
    already; one that a view still holds is not reused; blocks beyond the pool's size are
    unmapped; STITCH_HOST_POOL_MB=0 gives torch.empty's tensors."""
    torch = pytest.importorskip("torch")
    monkeypatch.delenv("STITCH_HOST_POOL_MB", raising=False)
    text = "graph g(x: f32[N, M]) {\n y = mul(x, 2)\n return y\n}\n"
    x = torch.randn(256, 1024)  # 1 MiB
    p = _engine().compile(stitch.parse(text))
    if hasattr(x, "untyped_storage"):  # PyTorch 2.x; 1.13 has no resizable()
        [small] = p.run_torch([x[:255]])  # just under 1 MiB: torch.empty's (resizable)
        assert small.untyped_storage().resizable()
    [y1] = p.run_torch([x])
    first = y1.data_ptr()
    tail = y1[3:]  # a view: the storage lives on
    del y1
    [y2] = p.run_torch([x + 1])
    assert y2.data_ptr() != first
    torch.testing.assert_close(tail, x[3:] * 2, rtol=0, atol=0)
    torch.testing.assert_close(y2, (x + 1) * 2, rtol=0, atol=0)
    if hasattr(y2, "untyped_storage"):
        assert not y2.untyped_storage().resizable()
    second = y2.data_ptr()
    del tail, y2
    [y3] = p.run_torch([x - 1])
    assert y3.data_ptr() in (first, second)
    torch.testing.assert_close(y3, (x - 1) * 2, rtol=0, atol=0)
    del y3
    # A pool of 1 MiB keeps no 4 MiB block: the mapping is gone with the tensor.
    monkeypatch.setenv("STITCH_HOST_POOL_MB", "1")
    big = torch.randn(1024, 1024)
    p = _engine().compile(stitch.parse(text))
    [y] = p.run_torch([big])
    lo = y.data_ptr()
    assert _mapping(lo)[:2] == (lo, lo + (4 << 20))
    del y
    assert _mapping(lo) is None
    monkeypatch.setenv("STITCH_HOST_POOL_MB", "0")
    p = _engine().compile(stitch.parse(text))
    [y] = p.run_torch([x])
    torch.testing.assert_close(y, x * 2, rtol=0, atol=0)
    if hasattr(y, "untyped_storage"):
        assert y.untyped_storage().resizable()  # torch.empty's
    monkeypatch.setenv("STITCH_HOST_POOL_MB", "-5")
    with pytest.raises(ValueError, match="STITCH_HOST_POOL_MB=-5"):
        _engine().compile(stitch.parse(text)).run_torch([x])


def test_host_pool_drops_the_least_recently_freed_blocks_beyond_its_size():
    """Sizes round up to 8 classes per power of two; blocks past the pool's size are dropped
    oldest first, so a size that stopped recurring does not keep a new one out."""
    torch = pytest.importorskip("torch")
    pool = stitch._HostPool(1 << 20)
    assert pool.size_class(600000) == 655360 and pool.size_class(1 << 19) == 1 << 19
    a = pool.empty(1 << 19, torch.uint8, 1 << 19, (1 << 19,), False)
    b = pool.empty(1 << 19, torch.uint8, 1 << 19, (1 << 19,), False)
    c = pool.empty(700000, torch.uint8, 700000, (700000,), False)
    a[:] = 1
    del a, b
    assert pool.kept == 1 << 20
    del c  # 720896 bytes more: both older blocks go
    assert pool.kept == pool.size_class(700000)
    assert not pool.free[1 << 19]
    d = pool.empty(690000, torch.uint8, 690000, (690000,), False)  # the same class: reused
    assert pool.kept == 0 and d.numel() == 690000
