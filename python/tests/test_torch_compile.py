"""torch.compile(model, backend="stitch") on PyTorch 2.x: the backend is registered when
stitch.torch is imported, dynamo hands it FX graphs, and results match eager. Skipped on
PyTorch 1.x (Debian's python3-torch); run by the opt-in `python_torch2_tests` CTest test, with an
interpreter holding PyTorch 2.x (README, "PyTorch")."""
import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch, "compile"):
    pytest.skip("torch.compile needs PyTorch 2.x (this is %s)" % torch.__version__,
                allow_module_level=True)

import stitch.torch  # noqa: E402,F401  (registers the backend)
from models import MLP, BertLayer  # noqa: E402


def test_backend_is_registered():
    assert "stitch" in torch._dynamo.list_backends()


@pytest.mark.parametrize("batch", [3, 5])
def test_bert_layer_matches_eager(batch):
    torch.manual_seed(0)
    m = BertLayer().eval()
    compiled = torch.compile(m, backend="stitch")
    x = torch.randn(batch, 8, 32)
    mask = torch.ones(batch, 8)
    mask[:, -3:] = 0
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, mask), m(x, mask), rtol=1e-4, atol=1e-4)


def test_mlp_matches_eager():
    torch.manual_seed(0)
    m = MLP().eval()
    compiled = torch.compile(m, backend="stitch")
    with torch.no_grad():
        for b in (2, 7):
            x = torch.randn(b, m.fc1.in_features)
            torch.testing.assert_close(compiled(x), m(x), rtol=1e-4, atol=1e-4)
