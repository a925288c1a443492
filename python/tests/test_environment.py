"""A bad STITCH_* value is a ValueError from the hook, naming the variable, the value and the valid
values, for every variable of the README's table; never a hook that runs every piece eagerly and
says nothing (issue 33). stitch.torch.optimize checks when it is called and again at the first
call; torch.compile's backend when Dynamo enters it (torch2/test_compile_environment.py)."""
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import stitch  # noqa: E402
import stitch.torch as st  # noqa: E402
from environment_cases import (BAD, PATHS, SECRETS, expect_named, readme_variables,  # noqa: E402
                               skip_if_unread)


def test_every_variable_of_the_readme_is_covered():
    listed = readme_variables()
    assert len(listed) >= 20
    assert set(BAD) | PATHS | set(SECRETS) == set(listed)


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_a_bad_secret_is_named_but_never_printed(name, monkeypatch):
    monkeypatch.setenv(name, SECRETS[name])
    with pytest.raises(ValueError) as e:
        stitch.check_environment()
    assert name + " is not valid" in str(e.value), e
    assert SECRETS[name] not in str(e.value), e


@pytest.mark.parametrize("name", sorted(BAD))
def test_optimize_raises_for_a_bad_value(name, monkeypatch):
    skip_if_unread(name)
    monkeypatch.setenv(name, BAD[name])
    with pytest.raises(ValueError) as e:
        st.optimize(nn.LayerNorm(8))
    expect_named(e, name, BAD[name])
    with pytest.raises(ValueError) as e:
        stitch.check_environment()
    expect_named(e, name, BAD[name])


def test_a_bad_value_set_after_optimize_raises_at_the_first_call(monkeypatch):
    fast = st.optimize(nn.LayerNorm(8).eval())
    monkeypatch.setenv("STITCH_CPU_OPENMP", "banana")
    with pytest.raises(ValueError) as e, torch.no_grad():
        fast(torch.randn(2, 8))
    expect_named(e, "STITCH_CPU_OPENMP", "banana")


def test_every_bad_value_is_named(monkeypatch):
    monkeypatch.setenv("STITCH_FUSION", "bogus")
    monkeypatch.setenv("STITCH_SPIN_US", "abc")
    with pytest.raises(ValueError) as e:
        st.optimize(nn.LayerNorm(8))
    lines = str(e.value).splitlines()
    assert lines[0].startswith("STITCH_FUSION=bogus is not valid; valid values: stitch, basic"), e
    assert lines[1].startswith("STITCH_SPIN_US=abc is not valid; valid values: an integer"), e


def test_dump_ptx_says_it_is_not_built(monkeypatch):
    monkeypatch.setenv("STITCH_DUMP", "ptx")
    with pytest.raises(ValueError, match=r"plan, source, llvm \(ptx dumps are not built"):
        st.optimize(nn.LayerNorm(8))


def test_paths_take_any_value(monkeypatch):
    for name in sorted(PATHS - {"STITCH_LIBRARY"}):  # this process has loaded its library
        monkeypatch.setenv(name, "/nonexistent/" + name.lower())
    stitch.check_environment()
    m = nn.LayerNorm(8).eval()
    fast = st.optimize(m)
    x = torch.randn(3, 8)
    with torch.no_grad():
        torch.testing.assert_close(fast(x), m(x))
    assert fast.stitch_report.programs == 1 and not fast.stitch_report.runtime_fallbacks
