"""The report a user reads: stitch.torch.last_report() / all_reports() give one CompileReport per
Dynamo graph, with its forward and backward (or inference) graphs, the Stitch pieces and the ops
left to PyTorch with the reason; str() of it is a table naming all of these. An op Stitch does not
map falls back to PyTorch and the results stay right. STITCH_DISABLE=1 makes the backend return
Dynamo's graph unchanged."""
import os
import subprocess
import sys
import textwrap

import torch
import torch.nn as nn
import torch.nn.functional as F

import harness
import package_under_test
import stitch.torch

pytestmark = harness.needs_stitch


class WithCumsum(nn.Module):
    """LayerNorm and softmax (mapped) around a cumulative sum (not mapped: a scan, which Stitch's
    IR has no op for)."""

    def __init__(self, dim=16):
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        h = self.norm(x)
        return F.softmax(torch.cumsum(h, dim=-1) * 0.1, dim=-1) * h


def check_counts(g):
    assert g.total_ops >= g.replaced_ops > 0
    assert g.replaced_ops == len(g.replaced())
    assert g.programs >= 1
    assert g.kernels == sum(p["kernels"] for p in g.pieces)
    assert set(g.origins()) == {o for p in g.pieces for o in p["origins"]}


def test_training_report_names_pieces_and_fallbacks():
    torch.manual_seed(0)
    model = WithCumsum()
    x = torch.randn(4, 8, 16)
    compiled = harness.compile_model(model)
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    ye, yc = model(xe), compiled(xc)
    harness.close(yc, ye, "output")
    g = torch.randn(ye.shape)
    (ye * g).sum().backward()
    grads_e = [xe.grad] + [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    (yc * g).sum().backward()
    for i, (c, e) in enumerate(zip([xc.grad] + [p.grad for p in model.parameters()], grads_e)):
        harness.close(c, e, f"gradient {i}")

    report = stitch.torch.last_report()
    assert report is stitch.torch.all_reports()[-1]
    fw, bw = report.graph("forward"), report.graph("backward")
    assert fw is not None and bw is not None, str(report)
    assert report.graph("inference") is None
    assert [g.kind for g in report.graphs] == ["forward", "backward"]
    for g in (fw, bw):
        check_counts(g)
    assert "aten.native_layer_norm" in fw.origins() and "aten._softmax" in fw.origins()
    assert "aten.native_layer_norm_backward" in bw.origins()
    cumsum = [f for f in fw.fallbacks if f["op"] == "aten.cumsum"]
    assert cumsum and all(f["reason"].strip() for f in cumsum), str(report)

    text = str(report)
    assert "forward" in text and "backward" in text
    for g in (fw, bw):
        for p in g.pieces:
            assert p["name"] in text, f"piece {p['name']} not in\n{text}"
        for f in g.fallbacks:
            assert f["op"] in text and f["reason"] in text, f"fallback {f} not in\n{text}"
    # A table: a line per piece and per op left to PyTorch, at least.
    assert len(text.splitlines()) >= len(fw.pieces) + len(bw.pieces) + 2


def test_inference_report():
    torch.manual_seed(0)
    model = WithCumsum().eval()
    x = torch.randn(3, 5, 16)
    with torch.no_grad():
        harness.close(harness.compile_model(model)(x), model(x), "output")
    report = stitch.torch.last_report()
    assert [g.kind for g in report.graphs] == ["inference"], str(report)
    check_counts(report.graph("inference"))
    assert any(f["op"] == "aten.cumsum" for f in report.graph("inference").fallbacks)


def test_a_piece_that_fails_in_stitch_is_reported_and_logged(monkeypatch, caplog):
    """A program that cannot be made (here a compile failure, injected) leaves its piece to run
    eagerly from then on: the results stay right, the report stops counting the piece's ops as
    in Stitch and marks it, and a warning says so once."""
    import logging

    import stitch

    def broken(self, graph):
        raise stitch.StitchError(stitch.Status.COMPILE, "injected: the compiler crashed")

    monkeypatch.setattr(stitch.Engine, "compile", broken)
    torch.manual_seed(0)
    model = WithCumsum().eval()
    compiled = harness.compile_model(model)
    with caplog.at_level(logging.INFO, logger="stitch.torch"), torch.no_grad():
        for _ in range(3):
            x = torch.randn(3, 5, 16)
            harness.close(compiled(x), model(x), "output")
    g = stitch.torch.last_report().graph("inference")
    assert g.pieces and all(p["failed"] == "injected: the compiler crashed" for p in g.pieces)
    assert g.replaced_ops == 0 and g.programs == 0 and g.kernels == 0 and not g.origins()
    assert g.eager_ops == sum(len(p["ops"]) for p in g.pieces)
    text = str(g)
    assert "inference graph: 0 of %d ops in Stitch" % g.total_ops in text, text
    assert "%d op(s) of %d failed piece(s) run eagerly" % (g.eager_ops, len(g.pieces)) in text
    assert text.count("FAILED, runs eagerly: injected") == len(g.pieces), text
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == len(g.pieces), warnings
    assert all("run eagerly from now on: injected" in w for w in warnings), warnings


def test_one_report_per_dynamo_graph():
    assert stitch.torch.last_report() is None and stitch.torch.all_reports() == []

    def f(x):
        y = F.gelu(x) * 2
        torch._dynamo.graph_break()
        return F.softmax(y, dim=-1)

    x = torch.randn(4, 16)
    with torch.no_grad():
        harness.close(torch.compile(f, backend="stitch")(x), f(x), "output")
    reports = stitch.torch.all_reports()
    assert len(reports) == 2, "\n".join(map(str, reports))
    assert stitch.torch.last_report() is reports[-1]
    assert "aten.gelu" in reports[0].graph("inference").origins()
    assert "aten._softmax" in reports[1].graph("inference").origins()
    stitch.torch.clear_reports()
    assert stitch.torch.last_report() is None and stitch.torch.all_reports() == []


def test_disable_returns_the_graph_unchanged():
    # In a process of its own, so that the variable is seen however early the package reads it.
    script = textwrap.dedent("""
        import torch, torch.fx
        import stitch.torch
        from torch._dynamo import lookup_backend

        def f(x):
            return torch.softmax(x * 2, dim=-1)

        gm = torch.fx.symbolic_trace(f)
        x = torch.randn(4, 8)
        out = lookup_backend("stitch")(gm, [x])
        assert out is gm or getattr(out, "__self__", None) is gm, out
        torch.testing.assert_close(torch.compile(f, backend="stitch")(x), f(x))
        assert stitch.torch.all_reports() == [], stitch.torch.all_reports()
        print("ok")
    """)
    env = package_under_test.subprocess_env(STITCH_DISABLE="1")
    p = subprocess.run([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout


def test_stitch_seconds_count_building_and_first_calls_only():
    """GraphReport.stitch_seconds: the graph's partitioning and its programs' compiles (build_s),
    plus each program's calls on an input signature it had not seen (first_call_seconds);
    further calls on a known signature add nothing."""
    stitch.torch.clear_reports()
    model = WithCumsum().eval()
    compiled = harness.compile_model(model)
    x = torch.randn(4, 16)
    with torch.no_grad():
        compiled(x)
    [g] = [g for r in stitch.torch.all_reports() for g in r.graphs]
    programs = [r() for r in g._programs]
    assert programs and all(p.first_call_seconds > 0 for p in programs)
    assert g.build_s > 0
    first = g.stitch_seconds()
    assert first >= g.build_s + sum(p.first_call_seconds for p in programs) - 1e-9
    with torch.no_grad():
        for _ in range(3):
            compiled(x)
    assert g.stitch_seconds() == first
