"""The copy PyTorch makes for a matmul operand, in the two orders (BENCHMARKS.md, "Whole models").

`q @ k.transpose(-1, -2)` on [batch, heads, seq, dim] tensors viewed from a [batch, seq, heads,
dim] projection (T5's attention) copies the transposed keys to contiguous before bmm: a transpose
that reads one element per source line. The hook's _matmul_copies makes the copy of the keys
in rows instead and hands bmm its transposed view. This times clone + bmm both ways, and bmm
alone on each layout, one thread, medians of 7 rounds:

    .venv-torch/bin/python bench/torch/pieces/transposed_operand.py [--batch 8 --seq 128 --heads 4 --dim 64]
"""
import argparse
import time

import torch


def timed(fn, n=200):
    for _ in range(20):
        fn()
    rounds = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        rounds.append((time.perf_counter() - t) / n * 1e3)
    return sorted(rounds)[3]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dim", type=int, default=64)
    a = ap.parse_args()
    torch.set_num_threads(1)
    b, s, h, d = a.batch, a.seq, a.heads, a.dim
    k = torch.randn(b, s, h, d)
    q = torch.randn(b, s, h, d).transpose(1, 2).contiguous().view(b * h, s, d)

    def transposed():  # AOTAutograd's graph: clone of k^T, view, bmm
        return torch.bmm(q, k.transpose(1, 2).transpose(3, 2).contiguous().view(b * h, d, s))

    def in_rows():  # the hook's: clone of k in rows, view, bmm of its transposed view
        return torch.bmm(q, k.transpose(1, 2).contiguous().view(b * h, s, d).transpose(1, 2))

    torch.testing.assert_close(transposed(), in_rows())
    kt = k.transpose(1, 2).transpose(3, 2).contiguous().view(b * h, d, s)
    kr = k.transpose(1, 2).contiguous().view(b * h, s, d).transpose(1, 2)
    print("clone + bmm: transposed copy %.3f ms, copy in rows %.3f ms" % (timed(transposed),
                                                                        timed(in_rows)))
    print("bmm alone:   contiguous operand %.3f ms, transposed view %.3f ms" % (
        timed(lambda: torch.bmm(q, kt)), timed(lambda: torch.bmm(q, kr))))


if __name__ == "__main__":
    main()
