"""The ctypes binding: parse and run, graphs built in Python, NumPy and PyTorch zero-copy,
errors as StitchError with the C API's status and message."""
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
