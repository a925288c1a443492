"""Shape classes on the cpu backend (README "Shape classes"): how many kernels 100 input
signatures compile, and the steady-state time of a class kernel against the kernel specialized
for the very sizes it runs.

Like for like, in one process: both programs are the same graph on the same engine, run on the
same input and output tensors (allocated once), alternately run by run. A round times `--iters`
runs of each; the table gives each one's best round median and the median over `--rounds` of
the rounds' class/specialized ratios (paired in time, so a drift of this VM's bandwidth between
rounds does not enter the ratio). The class program first runs at another size of its class,
so the kernel it runs at the measured size was compiled for that other size (checked: the
measured size compiles nothing); the specialized one is built with STITCH_SHAPE_CLASSES=0.

    BENCH_STITCH_BUILD=build/ci .venv-torch/bin/python bench/cpu/shape_classes.py
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("BENCH_STITCH_BUILD", os.path.join(ROOT, "build", "release"))
os.environ["STITCH_CACHE"] = "off"  # every compile counted in this process
os.environ.setdefault("STITCH_LIBRARY", os.path.join(BUILD, "src", "libstitch.so"))
sys.path.insert(0, os.path.join(ROOT, "python"))

import stitch  # noqa: E402
import torch  # noqa: E402


def graph(file, name):
    with open(os.path.join(ROOT, "examples", file)) as f:
        return stitch.parse_module(f.read(), file)[name]


# (label, file, graph, sizes the class kernel is compiled at, sizes measured)
CASES = [
    # The class kernel is compiled at a size of the measured size's class: layer norm, GELU and
    # Adam move more than twice this VM's 32 MB last-level cache at both sizes (streaming stores).
    ("layer norm", "layer_norm.stitch", "layer_norm", {"N": 12000}, {"N": 16384}),
    ("softmax", "softmax.stitch", "softmax", {"N": 1000}, {"N": 16384}),
    ("attention softmax", "attention_softmax.stitch", "attention_softmax_additive",
     {"B": 2, "H": 12, "S": 100}, {"B": 8, "H": 12, "S": 256}),
    ("bias + GELU + residual", "bias_gelu_residual.stitch", "bias_gelu_residual", {"T": 3000},
     {"T": 4096}),
    ("Adam step", "adam_step.stitch", "adam_step", {"P": 6 << 20}, {"P": 8 << 20}),
    ("transformer block", "transformer_block.stitch", "transformer_block",
     {"B": 2, "S": 64}, {"B": 8, "S": 128}),
    ("transformer block", "transformer_block.stitch", "transformer_block",
     {"B": 2, "S": 64}, {"B": 4, "S": 384}),
]

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
          "bool": torch.bool, "i64": torch.int64, "i32": torch.int32}


def tensors(g, sizes, seed):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(g.num_inputs):
        _, dt, shape = g.value_info(i)
        shape = [sizes[d] if isinstance(d, str) else d for d in shape]
        t = torch.randn(*shape, generator=gen)
        out.append(t > 0 if dt == "bool" else t.to(DTYPES[dt]))
    return out


def with_classes(on, fn):
    old = os.environ.get("STITCH_SHAPE_CLASSES")
    os.environ["STITCH_SHAPE_CLASSES"] = "1" if on else "0"
    try:
        return fn()
    finally:
        if old is None:
            del os.environ["STITCH_SHAPE_CLASSES"]
        else:
            os.environ["STITCH_SHAPE_CLASSES"] = old


def paired_medians_ms(a, b, iters):
    """Median times of a and b, run alternately (which goes first alternates too), so that a
    drift of the machine's bandwidth within the round weighs on both alike."""
    times = ([], [])
    for i in range(iters):
        for k in ((0, 1) if i % 2 == 0 else (1, 0)):
            t0 = time.perf_counter()
            (a, b)[k]()
            times[k].append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times[0]), statistics.median(times[1])


def speed(engine, rounds, iters):
    rows = []
    for label, file, name, seed_sizes, sizes in CASES:
        g = graph(file, name)
        cls, spec = engine.compile(g), engine.compile(g)
        seed_in = tensors(g, seed_sizes, 1)
        with_classes(True, lambda: cls.run(seed_in))
        ins = tensors(g, sizes, 2)
        outs = [torch.empty(s) for s in cls.output_shapes(ins)]
        before = engine.cache_stats()["compiles"]
        with_classes(True, lambda: cls.run(ins, outs))
        class_compiles = engine.cache_stats()["compiles"] - before
        spec_outs = [torch.empty(s) for s in spec.output_shapes(ins)]
        with_classes(False, lambda: spec.run(ins, spec_outs))
        for a, b in zip(outs, spec_outs):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        best_c = best_s = float("inf")
        ratios = []
        for _ in range(rounds):
            c, sp = paired_medians_ms(lambda: cls.run(ins, outs),
                                      lambda: spec.run(ins, spec_outs), iters)
            best_c, best_s = min(best_c, c), min(best_s, sp)
            ratios.append(c / sp)
        size_text = ", ".join(f"{k}={v}" for k, v in sizes.items())
        seed_text = ", ".join(f"{k}={v}" for k, v in seed_sizes.items())
        ratio = statistics.median(ratios)
        rows.append((label, size_text, seed_text, class_compiles, best_c, best_s, ratio))
        print(f"  {label} ({size_text}): class {best_c:.3f} ms, specialized {best_s:.3f} ms, "
              f"round ratios {' '.join(f'{r:.3f}' for r in ratios)}", file=sys.stderr)
    return rows


def hundred_shapes(engine, on):
    g = graph("transformer_block.stitch", "transformer_block")
    p = engine.compile(g)
    pairs = sorted({(1 + (i * 7) % 5, 2 + (i * 37) % 61) for i in range(400)})[:100]
    before = engine.cache_stats()
    t0 = time.perf_counter()
    for b, s in pairs:
        ins = tensors(g, {"B": b, "S": s}, b * 1000 + s)
        with_classes(on, lambda: p.run(ins))
    seconds = time.perf_counter() - t0
    after = engine.cache_stats()
    return (after["compiles"] - before["compiles"], after["compile_seconds"] -
            before["compile_seconds"], seconds, p.stats()["plan_searches"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    torch.set_num_threads(1)
    engine = stitch.Engine(backend="cpu")
    print("compiles for 100 (batch, sequence) pairs of the transformer block:", file=sys.stderr)
    on = hundred_shapes(engine, True)
    off = hundred_shapes(stitch.Engine(backend="cpu"), False)
    print("\n| transformer block, 100 (B, S) pairs | plans searched | kernels compiled | "
          "compile time | first runs, total |")
    print("|:--|--:|--:|--:|--:|")
    print(f"| shape classes (default) | {on[3]} | {on[0]} | {on[1]:.2f} s | {on[2]:.2f} s |")
    print(f"| STITCH_SHAPE_CLASSES=0 (sizes compiled in) | {off[3]} | {off[0]} | {off[1]:.2f} s | "
          f"{off[2]:.2f} s |")
    rows = speed(engine, a.rounds, a.iters)
    print("\n| graph | sizes measured | class compiled at | compiles at the measured size | "
          "class kernel, ms | specialized, ms | class / specialized |")
    print("|:--|:--|:--|--:|--:|--:|--:|")
    for label, size_text, seed_text, compiles, c, s, ratio in rows:
        print(f"| {label} | {size_text} | {seed_text} | {compiles} | {c:.3f} | {s:.3f} | "
              f"{ratio:.3f} |")


if __name__ == "__main__":
    main()
