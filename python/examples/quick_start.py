# After `pip install stitch-VERSION-py3-none-linux_x86_64.whl` (README, "Installing with pip"):
# trains a small model through torch.compile(backend="stitch") and prints what ran in Stitch.
# Nothing else is needed: no `import stitch`, no PYTHONPATH, no STITCH_LIBRARY.
import torch

model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.LayerNorm(64))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
compiled = torch.compile(model, backend="stitch", options={"report": "stdout"})
for step in range(3):
    loss = compiled(torch.randn(32, 64)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(f"step {step}: loss {loss.item():.4f}")
