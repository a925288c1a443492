import time, torch, sys
sys.path.insert(0, "python")  # run from the repository root, STITCH_LIBRARY set
import stitch.torch
torch.set_num_threads(1)
B, T, C, H = 8, 128, 256, 4
D = C // H
def f(dq, dk, dv):
    parts = [t.transpose(1, 2).reshape(B, T, C) for t in (dq, dk, dv)]
    x = torch.cat(parts, dim=2).view(-1, 3 * C)
    return x, x.sum(0)
args = [torch.randn(B, H, T, D) for _ in range(3)]
dyn = len(sys.argv) > 1
g = torch.compile(f, backend="stitch", dynamic=dyn)
i = torch.compile(f, dynamic=dyn)
for fn in (f, g, i): fn(*args)
def t(fn, n=50):
    for _ in range(3): fn(*args)
    t0 = time.perf_counter()
    for _ in range(n): fn(*args)
    return (time.perf_counter() - t0) / n * 1e3
for _ in range(2):
    print("eager %.3f ms  stitch %.3f ms  inductor %.3f ms" % (t(f), t(g), t(i)))
torch.testing.assert_close(g(*args), f(*args), rtol=1e-4, atol=1e-4)
