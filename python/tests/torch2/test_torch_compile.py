"""torch.compile(model, backend="stitch") on PyTorch 2.x: the backend is registered when
stitch.torch is imported, Dynamo hands it FX graphs, and results match eager, on the small models
the 1.13 hook's tests use (python/tests/models.py)."""
import pytest
import torch

import harness
from models import MLP, BertLayer


def test_backend_is_registered():
    assert "stitch" in torch._dynamo.list_backends()


@pytest.mark.parametrize("batch", [3, 5])
def test_bert_layer_matches_eager(batch):
    torch.manual_seed(0)
    m = BertLayer().eval()
    compiled = harness.compile_model(m)
    x = torch.randn(batch, 8, 32)
    mask = torch.ones(batch, 8)
    mask[:, -3:] = 0
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, mask), m(x, mask), rtol=1e-4, atol=1e-4)


def test_mlp_matches_eager():
    torch.manual_seed(0)
    m = MLP().eval()
    compiled = harness.compile_model(m)
    with torch.no_grad():
        for b in (2, 7):
            x = torch.randn(b, m.fc1.in_features)
            torch.testing.assert_close(compiled(x), m(x), rtol=1e-4, atol=1e-4)
