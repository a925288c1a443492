"""PyTorch's OpInfo samples (op_db, from torch.testing._internal.common_methods_invocations of the
installed wheel) through torch.compile(backend="stitch") against eager, forward and backward, in
f32 and bf16, static and dynamic=True, on the CPU, as Inductor's test_torchinductor_opinfo runs
them through Inductor. One test per case (OP-DTYPE-MODE); opinfo_check says how a sample is run
and compared, opinfo_cases what is expected, conftest which cases a run takes.

A case passes when every sample matches eager and it still runs in Stitch every op in_stitch.txt
lists for it. A case in expected_failures.txt must fail as listed (it is an xfail then), and fails
the test when it passes ("unexpected success: remove it from the list") or fails otherwise.
"""
import time

import pytest

torch = pytest.importorskip("torch")

import opinfo_cases  # noqa: E402
from opinfo_check import run_case, samples_of  # noqa: E402
from opinfo_session import opinfo_run  # noqa: E402

try:
    import expecttest  # noqa: F401  (op_db's test utilities import it)
except ImportError:
    pytest.fail("op_db needs the expecttest package: scripts/install_torch.py --venv .venv-torch "
                "installs it", pytrace=False)

CASES = opinfo_run().cases


def _explain(case, result, run) -> str:
    lines = []
    for f in result.failures:
        what = {"raises": "raises", "wrong": "wrong answer", "fallback": "falls back"}[f.kind]
        lines.append("%s: sample %d: %s in the %s: %s" % (case.id, f.index, what, f.phase,
                                                          f.message))
        lines.append("rerun: " + run.rerun(case, f.index))
    return "\n".join(lines)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_opinfo(case, opinfo):
    s = opinfo.settings
    skip = opinfo.skipped.get(case.name)
    if skip is not None:
        opinfo.results[case.id] = (case, "skip", None, 0.0)
        pytest.skip("%s: %s" % (opinfo_cases.SKIPPED.name, skip))
    samples = samples_of(case, s.samples, s.sample_index)
    t0 = time.monotonic()
    result = run_case(case, samples, s.backend)
    seconds = time.monotonic() - t0
    listed = opinfo.expected.get(case.key) if s.stitch else None

    def record(outcome):
        opinfo.results[case.id] = (case, outcome, result, seconds)

    if result.random is not None:
        record("fail")
        pytest.fail("%s: %s: a random op; list it in %s with the reason"
                    % (case.id, result.random, opinfo_cases.SKIPPED.name), pytrace=False)
    if result.failures:
        kinds = {f.kind for f in result.failures}
        if listed is not None and kinds == {listed.kind}:
            record("xfail")
            pytest.xfail("%s: %s" % (listed.where(), listed.reason))
        record("fail")
        if listed is not None:
            pytest.fail("%s is listed at %s as '%s' but fails otherwise:\n%s"
                        % (case.id, listed.where(), listed.kind, _explain(case, result, opinfo)),
                        pytrace=False)
        pytest.fail(_explain(case, result, opinfo), pytrace=False)
    if not samples:
        record("skip")
        pytest.skip("no sample %s" % s.sample_index)
    if listed is not None and opinfo.full_samples:
        record("fail")
        pytest.fail("%s: unexpected success: remove it from the list (%s, '%s': %s)"
                    % (case.id, listed.where(), listed.kind, listed.reason), pytrace=False)
    if s.stitch and opinfo.full_samples:
        lost = opinfo.in_stitch.get(case.key, frozenset()) - result.in_stitch
        if lost:
            record("fail")
            why = ["  %s: %s" % (op, "; ".join(sorted(result.fallbacks.get(op, {"not in the "
                                                                                "graph"}))))
                   for op in sorted(lost)]
            pytest.fail("%s: ran in PyTorch what %s lists as running in Stitch (a silent "
                        "fallback; if it is meant, rerun with STITCH_OPINFO_RECORD=1):\n%s\n"
                        "rerun: %s" % (case.id, opinfo_cases.IN_STITCH.name, "\n".join(why),
                                       opinfo.rerun(case)), pytrace=False)
    record("pass")
