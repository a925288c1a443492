"""The state of one pytest run of the OpInfo test, shared by the test and its conftest: the
settings, op_db's cases, the expectations files and the results so far."""

import os
import shlex
import sys
import time
from pathlib import Path

import opinfo_cases

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
TEST_FILE = HERE / "test_opinfo.py"


class OpInfoRun:
    """What the cases of one pytest run share: the settings, the expectations and the results."""

    def __init__(self):
        self.settings = opinfo_cases.Settings.from_env()
        self.op_db = opinfo_cases.load_op_db()
        self.cases = opinfo_cases.all_cases(self.op_db)
        supported = opinfo_cases.supported_dtypes(self.op_db)
        self.expected = opinfo_cases.load_expected_failures(supported)
        self.skipped = opinfo_cases.load_skipped(supported)
        self.in_stitch = opinfo_cases.load_in_stitch(supported)
        self.results = {}   # case id -> (case, outcome, CaseResult or None, seconds)
        self.started = time.monotonic()

    @property
    def full_samples(self) -> bool:
        """Whether each case runs at least the samples its expectations were written for."""
        s = self.settings
        return s.sample_index is None and (s.samples is None or
                                           s.samples >= opinfo_cases.DEFAULT_SAMPLES)

    def rerun(self, case, sample=None) -> str:
        """The command that reruns one case (one sample of it) alone."""
        env = []
        if os.environ.get("STITCH_LIBRARY"):
            env.append("STITCH_LIBRARY=%s" % shlex.quote(os.environ["STITCH_LIBRARY"]))
        if sample is not None:
            env.append("STITCH_OPINFO_SAMPLE=%d" % sample)
        elif self.settings.samples != opinfo_cases.DEFAULT_SAMPLES:
            env.append("STITCH_OPINFO_SAMPLES=%s" % (self.settings.samples or "all"))
        if not self.settings.stitch:
            env.append("STITCH_TEST_BACKEND=%s" % self.settings.backend)
        node = "%s::test_opinfo[%s]" % (TEST_FILE.relative_to(REPO), case.id)
        return "cd %s && %s %s -m pytest %s -q" % (shlex.quote(str(REPO)), " ".join(env),
                                                  shlex.quote(sys.executable),
                                                  shlex.quote(node))


_RUN = None


def opinfo_run() -> OpInfoRun:
    global _RUN
    if _RUN is None:
        _RUN = OpInfoRun()
    return _RUN


def current():
    """The run, if the OpInfo test was collected in this session (else None)."""
    return _RUN
