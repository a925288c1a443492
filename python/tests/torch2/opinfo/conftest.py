"""pytest wiring of the OpInfo test: the seeded sample of cases a run takes, the summary it prints
(figures, what ran in Stitch and what fell back, how to rerun each failure), and recording
in_stitch.txt (STITCH_OPINFO_RECORD=1).

The sample: the cases pytest selected (every case, or those named by node ids or -k) are cut to
STITCH_OPINFO_CASES of them (default opinfo_cases.DEFAULT_CASES; ``all`` runs every one), drawn
with STITCH_OPINFO_SEED (default: today's UTC date, so CI covers other cases each day); the first
summary line names both, and the same values draw the same cases.
"""
import logging
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # opinfo_*.py
sys.path.insert(0, str(HERE.parents[1]))  # python/tests
import package_under_test  # noqa: E402

package_under_test.use()  # python/, or the installed package (STITCH_TEST_INSTALLED=1)

import opinfo_cases  # noqa: E402
import opinfo_session  # noqa: E402
from opinfo_session import TEST_FILE, OpInfoRun, opinfo_run  # noqa: E402

# Dynamo's structured trace (the logger torch.__trace, at DEBUG) would otherwise fill a failing
# case's captured log with thousands of lines; the failure message says what failed and how to
# rerun it (with TORCH_LOGS for more).
logging.getLogger("torch.__trace").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def opinfo():
    return opinfo_run()


def _ours(item) -> bool:
    return Path(str(item.fspath)).resolve() == TEST_FILE


@pytest.hookimpl(trylast=True)  # after -k and node ids: the sample is drawn from what they left
def pytest_collection_modifyitems(session, config, items):
    ours = [i for i in items if _ours(i)]
    if not ours:
        return
    run = opinfo_run()
    s = run.settings
    keep = ours
    if s.cases is not None and len(ours) > s.cases:
        chosen = set(random.Random(s.seed).sample(sorted(i.nodeid for i in ours), s.cases))
        keep = [i for i in ours if i.nodeid in chosen]
        dropped = [i for i in ours if i.nodeid not in chosen]
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if not _ours(i) or i.nodeid in chosen]
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line(
            "opinfo: %d of %d cases (STITCH_OPINFO_CASES=%s), seed %d (STITCH_OPINFO_SEED), "
            "%s samples each, backend %s"
            % (len(keep), len(ours), "all" if s.cases is None else s.cases, s.seed,
               "all" if s.samples is None else s.samples, s.backend))


def _case_line(case, outcome, result, seconds) -> str:
    if result is None:
        return "  %-44s %-6s %s" % (case.id, outcome, "")
    fw = sorted(o[3:] for o in result.in_stitch if o.startswith("fw:"))
    bw = sorted(o[3:] for o in result.in_stitch if o.startswith("bw:"))
    fell = sorted({o for o in result.fallbacks} - result.in_stitch)
    parts = ["%d sample(s) %.1fs" % (result.samples, seconds)]
    if fw or bw:
        parts.append("in Stitch:%s%s" % (" fw " + ",".join(fw) if fw else "",
                                         " bw " + ",".join(bw) if bw else ""))
    else:
        parts.append("in Stitch: nothing")
    if fell:
        parts.append("left to PyTorch: " + ",".join(fell))
    return "  %-44s %-6s %s" % (case.id, outcome, "; ".join(parts))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    run = opinfo_session.current()
    if run is None or not run.results:
        return
    tr = terminalreporter
    res = list(run.results.values())
    outcomes = Counter(o for _, o, _, _ in res)
    samples = sum(r.samples for _, _, r, _ in res if r is not None)
    eager_raised = sum(r.eager_raised for _, _, r, _ in res if r is not None)
    ran = [(c, r) for c, o, r, _ in res if r is not None and o != "skip"]
    in_stitch = [c for c, r in ran if r.in_stitch]
    tr.section("OpInfo through torch.compile(backend=%r)" % run.settings.backend)
    tr.write_line("%d cases, %d samples: %d passed, %d expected failures, %d failed, %d skipped; "
                  "%d of %d cases ran ops in Stitch; %d samples eager cannot run (the compiled "
                  "function raised too); %.0f s"
                  % (len(res), samples, outcomes["pass"], outcomes["xfail"], outcomes["fail"],
                     outcomes["skip"], len(in_stitch), len(ran), eager_raised,
                     time.monotonic() - run.started))
    if run.settings.stitch:
        replaced = Counter(o for _, r in ran for o in r.in_stitch)
        fell = Counter()
        reasons = {}
        for _, r in ran:
            for op, why in r.fallbacks.items():
                if op not in r.in_stitch:
                    fell[op] += 1
                    reasons.setdefault(op, Counter()).update(why)
        tr.write_line("ran in Stitch (op: cases): " + ", ".join(
            "%s %d" % kv for kv in sorted(replaced.items(), key=lambda kv: (-kv[1], kv[0]))))
        tr.write_line("left to PyTorch (op: cases, the most frequent reason):")
        for op, n in sorted(fell.items(), key=lambda kv: (-kv[1], kv[0])):
            tr.write_line("  %-40s %4d  %s" % (op, n, reasons[op].most_common(1)[0][0][:100]))
    if run.settings.stitch and run.full_samples:
        grown = [(c, sorted(r.in_stitch - run.in_stitch.get(c.key, frozenset())))
                 for c, o, r, _ in res if o == "pass" and r is not None]
        grown = [(c, ops) for c, ops in grown if ops]
        if grown:
            tr.write_line("%d case(s) ran ops in Stitch that %s does not list (record them: "
                          "STITCH_OPINFO_RECORD=1):" % (len(grown), opinfo_cases.IN_STITCH.name))
            for case, ops in grown:
                tr.write_line("  %-44s +%s" % (case.id, " ".join(ops)))
    tr.write_line("per case (outcome; samples and time; what ran in Stitch; what did not):")
    for case, outcome, result, seconds in res:
        tr.write_line(_case_line(case, outcome, result, seconds))
    failed = [(c, r) for c, o, r, _ in res if o == "fail"]
    if failed:
        tr.write_line("rerun a failure alone:")
        for case, r in failed:
            sample = r.failures[0].index if r is not None and r.failures else None
            tr.write_line("  " + run.rerun(case, sample))
    report = os.environ.get("STITCH_OPINFO_REPORT")
    if report:
        _write_report(Path(report), run)
        tr.write_line("opinfo: per-case report written to %s" % report)


def _write_report(path: Path, run: OpInfoRun) -> None:
    import json
    rows = []
    for case, outcome, r, seconds in run.results.values():
        row = {"case": case.id, "outcome": outcome, "seconds": round(seconds, 2)}
        if r is not None:
            row.update(samples=r.samples, in_stitch=sorted(r.in_stitch),
                       fallbacks={k: sorted(v) for k, v in sorted(r.fallbacks.items())},
                       failures=[{"sample": f.index, "kind": f.kind, "phase": f.phase,
                                  "message": f.message[:2000]} for f in r.failures],
                       random=r.random)
        rows.append(row)
    path.write_text(json.dumps(rows, indent=1) + "\n")


def pytest_sessionfinish(session, exitstatus):
    run = opinfo_session.current()
    if run is None or not run.settings.record or not run.results:
        return
    sets = dict(run.in_stitch)
    for case, outcome, r, _ in run.results.values():
        if outcome == "pass" and r is not None:
            sets[case.key] = frozenset(r.in_stitch)
        elif outcome in ("skip", "xfail"):
            sets.pop(case.key, None)
    opinfo_cases.write_in_stitch(sets, run.cases)
