"""torch.compile(backend="stitch") and a bad STITCH_* value: the backend checks every variable when
Dynamo enters it and raises ValueError (through Dynamo, not wrapped in BackendCompilerFailed),
naming the variable, the value and the valid values; issue 33 found every piece running eagerly
in silence instead. stitch.torch.optimize on PyTorch 2.x checks the same way."""
import pytest
import torch
import torch.nn as nn

import harness
import stitch.torch as st
from environment_cases import BAD, expect_named, skip_if_unread

pytestmark = harness.needs_stitch


@pytest.mark.parametrize("name", sorted(BAD))
def test_torch_compile_raises_for_a_bad_value(name, monkeypatch):
    skip_if_unread(name)
    monkeypatch.setenv(name, BAD[name])
    compiled = harness.compile_model(lambda x: torch.relu(x) * 2 + 1)
    with pytest.raises(ValueError) as e:
        compiled(torch.randn(4, 8))
    expect_named(e, name, BAD[name])


@pytest.mark.parametrize("name", sorted(BAD))
def test_optimize_raises_for_a_bad_value(name, monkeypatch):
    skip_if_unread(name)
    monkeypatch.setenv(name, BAD[name])
    with pytest.raises(ValueError) as e:
        st.optimize(nn.LayerNorm(8))
    expect_named(e, name, BAD[name])


def test_valid_values_compile_and_run(monkeypatch):
    monkeypatch.setenv("STITCH_FUSION", "basic")
    monkeypatch.setenv("STITCH_CPU_OPENMP", "off")
    monkeypatch.setenv("STITCH_CUDA_LIBRARY", "/nonexistent/libcuda.so")
    f = lambda x: torch.softmax(x * 2, dim=-1)  # noqa: E731
    x = torch.randn(4, 8)
    harness.close(harness.compile_model(f)(x), f(x), "softmax")
    harness.expect_in_stitch(inference=["aten._softmax"])
