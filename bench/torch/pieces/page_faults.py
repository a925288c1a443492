"""Minor page faults and system time per step of one model row, one contender, in a process of
its own (BENCHMARKS.md, "Whole models", the host-output pool): 4 warm-up steps, then 10 timed.
Run from the repository root:
    STITCH_LIBRARY=build/ci/src/libstitch.so .venv-torch/bin/python \\
        bench/torch/pieces/page_faults.py llama infer stitch|inductor|eager
STITCH_HOST_POOL_MB=0 gives the figures without the pool."""
import resource
import sys
import time

import torch

sys.path.insert(0, "bench/torch")
sys.path.insert(0, "python")
import hf_models as hf  # noqa: E402
import stitch.torch  # noqa: E402,F401  (registers backend="stitch")

torch.set_num_threads(1)
name, mode, backend = sys.argv[1], sys.argv[2], sys.argv[3]
s = hf.Sizes(batch=8, seq=128, layers=4, hidden=256, vocab=8192)
torch.manual_seed(0)
base = hf.build(name, s)
g = torch.Generator().manual_seed(1)
batches = [hf.batch(name, s, "cpu", g, mode == "train") for _ in range(2)]
run = base if backend == "eager" else torch.compile(base) if backend == "inductor" else \
    torch.compile(base, backend=backend)
if mode == "train":
    step = hf.train_step(run, torch.optim.AdamW(base.parameters(), lr=1e-4))
else:
    step = hf.infer_step(run)
for i in range(4):
    step(batches[i % 2])
N = 10
r0, t = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
for i in range(N):
    step(batches[i % 2])
ms = (time.perf_counter() - t) / N * 1e3
r1 = resource.getrusage(resource.RUSAGE_SELF)
print("%s %s %s: %.1f ms a step, %d minor faults a step, %.2f ms system time a step" % (
    name, mode, backend, ms, (r1.ru_minflt - r0.ru_minflt) / N, (r1.ru_stime - r0.ru_stime) / N * 1e3))
