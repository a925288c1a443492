"""bench/torch/models.py, the model benchmark, end to end at --quick sizes on GPT-2 (training and
inference, eager and Stitch): the command completes, its JSON holds every figure the tables are
made from, Stitch's first outputs match eager's, and the process on the warm disk cache compiles
no kernel."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import package_under_test
import stitch

pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[3]


def test_quick_run_json(tmp_path):
    if stitch.backends()["cpu"] is not None:
        pytest.skip("the model benchmark runs on the cpu backend, which this build has not")
    out, md, chart = tmp_path / "m.json", tmp_path / "m.md", tmp_path / "m.svg"
    p = subprocess.run(
        [sys.executable, str(REPO / "bench" / "torch" / "models.py"), "--quick", "--models", "gpt2",
         "--dtypes", "f32", "--threads", "1", "--contenders", "eager,stitch", "--out", str(out),
         "--markdown", str(md), "--chart", str(chart)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
        env=package_under_test.subprocess_env())
    assert p.returncode == 0, p.stdout[-3000:]
    d = json.loads(out.read_text())
    assert d["notes"] == []
    assert {"model", "cores", "isa", "load", "torch", "transformers", "date"} <= set(d["host"])
    assert [(r["model"], r["mode"], r["dtype"], r["threads"]) for r in d["rows"]] == [
        ("gpt2", "train", "f32", 1), ("gpt2", "infer", "f32", 1)]
    for r in d["rows"]:
        eager, st = r["contenders"]["eager"], r["contenders"]["stitch"]
        assert "error" not in eager and "error" not in st, (eager, st)
        assert st["match"] is True, st["diff"]
        for c in (eager, st):
            assert c["ms"] > 0 and c["first_s"] > 0 and len(c["round_ms"]) == 1
            sp = c["split"]
            assert sp["library_ms"] > 0 and sp["memory_ms"] > 0, sp
        assert "stitch::program_run" in st["split"]["top_ops"]
        rep = st["report"]
        assert rep["programs"] > 0 and rep["kernels"] > 0 and rep["failed_pieces"] == []
        assert st["cache"]["compiles"] > 0
        assert r["vs_eager"] == pytest.approx(eager["ms"] / st["ms"])
        warm = r["warm"]["stitch"]
        assert warm["kernels_compiled"] == 0 and warm["warm_starts"] > 0, warm
        assert set(r["warm"]) == {"stitch"}  # eager has no compile to warm
    text = md.read_text()
    assert "| gpt2 train f32 1t |" in text and "| gpt2 infer f32 1t |" in text
    assert chart.read_text().startswith("<svg")
