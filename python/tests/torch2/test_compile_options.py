"""torch.compile(model, backend="stitch", options={...}): each option mirrors a STITCH_* variable,
which is its default; an option given wins over the variable. Every option must take effect (the
kernels of a plan, files written, a report printed, the backend that ran, the graph left alone),
and every mistake (an unknown name, a bad value, a mode, a backend that cannot run the graph's
device) is a ValueError when the compiled function is first called, through Dynamo, naming the
option, the value and what is valid."""
import pytest
import torch
import torch.nn as nn

import harness
import stitch
import stitch.torch as st
from environment_cases import readme_variables
from stitch.torch._options import OPTIONS, PROCESS_WIDE

pytestmark = harness.needs_stitch

VALID = ("autotune, autotune_budget_ms, autotune_candidates, backend, disable, dump, dump_dir, "
         "fusion, plan_candidate, remote_cache, report")


def softmax_plus(x):
    return torch.softmax(x * 2, dim=-1) + 1


def run(options, f=softmax_plus, x=None):
    """Compiles `f` with `options`, calls it once and checks the result against eager."""
    x = torch.randn(4, 8) if x is None else x
    harness.close(harness.compile_model(f, options=options)(x), f(x), "compiled with %r" % options)


def inference():
    """The inference graph of the last Dynamo graph compiled."""
    return st.last_report().graph("inference")


def kernels_with(options, tmp_path) -> int:
    """The kernels of the piece's plan, run with `options`: those the report counts, which must
    be those of the plan the engine made (dumped)."""
    harness.reset()
    out = tmp_path / ("plans%d" % len(list(tmp_path.iterdir())))
    out.mkdir()
    run(dict(options, dump="plan", dump_dir=str(out)), x=harness.on_device(torch.randn(4, 8)))
    (plan,) = out.glob("*.plan.txt")
    ran = sum(1 for line in plan.read_text().splitlines() if line.startswith("# kernel "))
    assert inference().kernels == ran, (options, inference().kernels, ran)
    return ran


def auto_cpu_backend() -> str:
    try:
        return stitch.engine(backend="cpu").backend
    except stitch.StitchError:
        return "reference"  # a build without LLVM


# --- each option takes effect -------------------------------------------------------------------

def test_fusion_off_makes_more_kernels_than_stitch(tmp_path):
    fused = kernels_with({"fusion": "stitch"}, tmp_path)
    unfused = kernels_with({"fusion": "off"}, tmp_path)
    assert fused >= 1 and unfused > fused, (fused, unfused)
    assert kernels_with({"fusion": "basic"}, tmp_path) >= fused


def test_the_variable_is_the_default_and_the_option_wins(tmp_path, monkeypatch):
    fused, unfused = kernels_with({}, tmp_path), kernels_with({"fusion": "off"}, tmp_path)
    assert unfused > fused
    # Set after this process made its engines: read at each compile all the same.
    monkeypatch.setenv("STITCH_FUSION", "off")
    assert kernels_with({}, tmp_path) == unfused
    assert kernels_with({"fusion": "stitch"}, tmp_path) == fused
    assert kernels_with({"fusion": None}, tmp_path) == unfused  # None: as if absent


def test_dump_writes_the_plans_into_dump_dir(tmp_path):
    out = tmp_path / "plans"
    out.mkdir()
    run({"dump": ["plan"], "dump_dir": out})  # a list, and an os.PathLike
    plans = sorted(out.glob("stitch_inference_0.*.plan.txt"))
    assert len(plans) == 1, sorted(p.name for p in out.iterdir())
    assert "# signature f32[4,8];" in plans[0].read_text()


def test_dump_defaults_to_its_variables_and_each_option_wins(tmp_path, monkeypatch):
    by_env, by_option = tmp_path / "env", tmp_path / "option"
    by_env.mkdir()
    by_option.mkdir()
    monkeypatch.setenv("STITCH_DUMP", "plan")
    monkeypatch.setenv("STITCH_DUMP_DIR", str(by_env))
    run({"dump": ""})  # empty: nothing
    assert not list(by_env.iterdir())
    harness.reset()
    run({"dump_dir": str(by_option)})
    assert not list(by_env.iterdir())
    assert len(list(by_option.glob("*.plan.txt"))) == 1
    harness.reset()
    run({})
    assert len(list(by_env.glob("*.plan.txt"))) == 1


def test_report_stdout_prints_each_graph_when_it_is_compiled(capsys):
    model = nn.Sequential(nn.LayerNorm(16), nn.GELU())
    compiled = harness.compile_model(model, options={"report": "stdout"})
    x = torch.randn(4, 16, requires_grad=True)
    y = compiled(x)
    out = capsys.readouterr().out
    report = st.last_report()
    assert out.startswith("Stitch report for %s\nforward graph: " % report.name), out
    assert str(report.graph("forward")).splitlines()[0] in out
    assert "stitch_forward_0" in out and "backward graph" not in out, out
    y.sum().backward()
    out = capsys.readouterr().out
    assert out.startswith("Stitch report for %s\nbackward graph: " % report.name), out
    assert "stitch_backward_0" in out, out
    # Printing changes no report: one for the one Dynamo graph, with its two graphs.
    assert st.all_reports() == [report]
    assert [g.kind for g in report.graphs] == ["forward", "backward"]


def test_report_true_is_stderr_and_false_is_off(capsys, monkeypatch):
    run({"report": True})
    captured = capsys.readouterr()
    assert "inference graph: 3 of 3 ops in Stitch" in captured.err and not captured.out
    monkeypatch.setenv("STITCH_REPORT", "stdout")
    harness.reset()
    run({})
    assert "inference graph: 3 of 3 ops in Stitch" in capsys.readouterr().out
    harness.reset()
    run({"report": False})
    captured = capsys.readouterr()
    assert not captured.out and not captured.err, captured
    assert inference().replaced_ops == 3  # the report is there to read all the same


def test_backend_reference_runs_on_the_interpreter(monkeypatch):
    run({"backend": "reference"})
    assert inference().backend == "reference"
    assert inference().replaced_ops == 3 and not inference().runtime_fallbacks
    # STITCH_BACKEND is the default (the hook used to ignore it); the option wins.
    monkeypatch.setenv("STITCH_BACKEND", "reference")
    harness.reset()
    run({})
    assert inference().backend == "reference"
    harness.reset()
    run({"backend": "auto"})
    assert inference().backend == auto_cpu_backend()


def test_disable_returns_the_graph_unchanged(monkeypatch):
    run({"disable": True})
    assert st.all_reports() == []  # no Stitch graph, no piece
    monkeypatch.setenv("STITCH_DISABLE", "1")
    harness.reset()
    run({})
    assert st.all_reports() == []
    harness.reset()
    run({"disable": "off"})
    assert inference().replaced_ops == 3


def test_plan_candidate_reaches_the_engine():
    run({"plan_candidate": 0})
    assert inference().programs == 1 and inference().pieces[0]["failed"] is None
    harness.reset()
    # No small graph has 65 plans: the piece's run fails, and it runs eagerly from then on.
    run({"plan_candidate": 64})
    failed = inference().pieces[0]["failed"]
    assert failed is not None and "no candidate 64" in failed, failed


def test_autotune_reaches_the_engine(tmp_path):
    # The plan dump says the plan was measured (or that the search made one plan).
    harness.reset()
    run({"autotune": True, "autotune_budget_ms": 20, "autotune_candidates": 2, "dump": "plan",
         "dump_dir": str(tmp_path)}, x=harness.on_device(torch.randn(64, 256)))
    assert inference().pieces[0]["failed"] is None
    texts = [p.read_text() for p in tmp_path.glob("*.plan.txt")]
    assert texts and all("# plan: autotuned" in t or "# plan: the cost model's pick, the only "
                         "candidate" in t or "tuning entry" in t for t in texts), texts


def test_remote_cache_off_is_accepted():
    run({"remote_cache": "off"})
    assert inference().replaced_ops == 3


def test_mode_default_is_accepted():
    harness.close(harness.compile_model(softmax_plus, mode="default")(torch.ones(2, 8)),
                  softmax_plus(torch.ones(2, 8)), "mode='default'")


# --- mistakes -----------------------------------------------------------------------------------

def expect_error(options=None, x=None, **compile_kwargs) -> str:
    """The ValueError's message from the first call (a ValueError, not Dynamo's
    BackendCompilerFailed), with no work done: no Stitch report made."""
    kwargs = dict(compile_kwargs)
    if options is not None:
        kwargs["options"] = options
    compiled = harness.compile_model(softmax_plus, **kwargs)
    with pytest.raises(ValueError) as e:
        compiled(torch.randn(4, 8) if x is None else x)
    return str(e.value)


def test_an_unknown_option_lists_the_valid_ones():
    assert OPTIONS == tuple(VALID.split(", "))
    msg = expect_error({"fusoin": "off"})
    assert msg.startswith("stitch: unknown torch.compile option 'fusoin'; valid options: " + VALID)
    assert st.all_reports() == []


@pytest.mark.parametrize("name", ["num_threads", "cache_dir", "log_level"])
def test_a_process_wide_variable_is_no_option(name):
    msg = expect_error({name: "1"})
    assert "unknown torch.compile option %r; valid options: %s" % (name, VALID) in msg, msg
    assert "environment variable only, STITCH_%s" % name.upper() in msg, msg


def test_every_variable_is_an_option_or_process_wide():
    mirrored = {"STITCH_BACKEND", "STITCH_FUSION", "STITCH_DUMP", "STITCH_DUMP_DIR",
                "STITCH_REMOTE_CACHE", "STITCH_REPORT", "STITCH_DISABLE", "STITCH_AUTOTUNE",
                "STITCH_AUTOTUNE_CANDIDATES", "STITCH_AUTOTUNE_BUDGET_MS"}
    process_wide = {"STITCH_" + name.upper() for name in PROCESS_WIDE}
    assert not mirrored & process_wide
    assert mirrored | process_wide == set(readme_variables())


@pytest.mark.parametrize("name,value,expected", [
    ("backend", "tpu", "option backend='tpu' is not valid; valid values: auto, cpu, reference, "
                       "cuda, hip"),
    ("fusion", "bogus", "option fusion='bogus' is not valid: unknown fusion mode 'bogus'; valid "
                        "modes: stitch, basic, off"),
    ("fusion", 3, "option fusion=3 is not valid; valid values: stitch, basic, off"),
    ("dump", "plan,ptx", "option dump=plan,ptx is not valid; valid values: a comma list of plan, "
                         "source, llvm (ptx dumps are not built"),
    ("dump", ["plan", "asm"], "option dump=plan,asm is not valid; valid values: a comma list of "
                              "plan, source, llvm ('asm' is none of them)"),
    ("dump", ["plan", 1], "option dump=['plan', 1] is not valid; valid values: a comma list, or "
                          "a list, of plan, source, llvm"),
    ("dump_dir", 5, "option dump_dir=5 is not valid; valid values: a directory"),
    ("plan_candidate", 65, "option plan_candidate '65' is not valid: an integer from 0 (the "
                           "planner's pick) to 64"),
    ("plan_candidate", 1.5, "option plan_candidate=1.5 is not valid; valid values: an integer "
                            "from 0 (the planner's pick) to 64"),
    ("plan_candidate", True, "option plan_candidate=True is not valid"),
    ("autotune", "maybe", "option autotune 'maybe' is not valid: a boolean"),
    ("autotune_candidates", 0, "option autotune_candidates '0' is not valid: an integer from 1 "
                               "to 16"),
    ("autotune_budget_ms", True, "option autotune_budget_ms=True is not valid"),
    ("remote_cache", "garbage", "option remote_cache=garbage is not valid: the scheme must be "
                                "redis://"),
    ("report", "loud", "option report='loud' is not valid; valid values: off, stdout, stderr, "
                       "True (stderr), False (off)"),
    ("disable", "maybe", "option disable='maybe' is not valid; valid values: True, False"),
])
def test_a_bad_value_names_the_option_the_value_and_the_valid_values(name, value, expected):
    msg = expect_error({name: value})
    assert msg.startswith("stitch: torch.compile " + expected), msg
    assert st.all_reports() == []


def test_every_bad_option_has_its_line():
    msg = expect_error({"report": "loud", "fusoin": "off", "disable": "maybe"})
    lines = [line for line in msg.splitlines() if line.startswith("stitch: ")]
    assert len(lines) == 3, msg
    for line, named in zip(lines, ["'fusoin'", "report='loud'", "disable='maybe'"]):
        assert named in line, msg


def test_a_bad_engine_option_fails_even_when_disabled():
    msg = expect_error({"disable": True, "fusion": "bogus"})
    assert "option fusion='bogus' is not valid" in msg, msg


@pytest.mark.parametrize("mode", ["max-autotune", "reduce-overhead"])
def test_a_mode_is_refused(mode):
    msg = expect_error(mode=mode)
    assert msg.startswith("stitch: torch.compile mode=%r is not supported: Stitch has no modes; "
                          "pass settings with options={...}" % mode), msg


@pytest.mark.parametrize("backend", ["cuda", "hip"])
def test_a_gpu_backend_cannot_run_cpu_tensors(backend, monkeypatch):
    msg = expect_error({"backend": backend})
    assert msg.startswith("stitch: torch.compile option backend=%r cannot run the graph's cpu "
                          "tensors; valid values for them: auto, cpu, reference" % backend), msg
    monkeypatch.setenv("STITCH_BACKEND", backend)
    harness.reset()
    msg = expect_error()
    assert msg.startswith("stitch: STITCH_BACKEND=%s cannot run the graph's cpu tensors"
                          % backend), msg
    harness.reset()
    run({"backend": "cpu" if auto_cpu_backend() == "cpu" else "reference"})  # the option wins


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_a_host_backend_cannot_run_cuda_tensors(backend):
    msg = expect_error({"backend": backend}, x=torch.randn(4, 8, device="cuda"))
    assert msg.startswith("stitch: torch.compile option backend=%r cannot run the graph's cuda "
                          "tensors; valid values for them: auto, cuda, hip" % backend), msg


# --- stitch.torch.optimize: no options, the variables' settings -----------------------------------

def test_optimize_takes_the_variables_settings(monkeypatch, capsys):
    monkeypatch.setenv("STITCH_BACKEND", "reference")
    monkeypatch.setenv("STITCH_REPORT", "stdout")
    m = nn.LayerNorm(8).eval()
    fast = st.optimize(m)
    x = torch.randn(3, 8)
    with torch.no_grad():
        harness.close(fast(x), m(x), "first call")
        harness.close(fast(x), m(x), "second call")
    assert fast.stitch_report.backend == "reference"
    out = capsys.readouterr().out
    assert out.startswith("Stitch report for stitch.torch.optimize(LayerNorm)\nmodule graph: "), out
    monkeypatch.setenv("STITCH_BACKEND", "cuda")
    fast = st.optimize(m)
    with pytest.raises(ValueError, match="STITCH_BACKEND=cuda cannot run the graph's cpu tensors"):
        with torch.no_grad():
            fast(x)
