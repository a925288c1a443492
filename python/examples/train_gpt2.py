#!/usr/bin/env python3
"""Trains a small GPT-2 (transformers, random weights, nothing downloaded) for a few steps with
``torch.compile(model, backend="stitch")`` beside an eager copy, at changing batch and sequence
lengths, and prints both losses, the largest gradient difference and Stitch's report: which aten
ops of the forward and backward graphs run in Stitch, in how many programs and kernels, and what
stayed in PyTorch and why.

    PYTHONPATH=python .venv-torch/bin/python python/examples/train_gpt2.py [--device cuda]
"""
import argparse
import copy

import torch
import transformers

import stitch.torch as st  # registers backend="stitch"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=128,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(cfg).to(a.device)
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend="stitch")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-3)
    shapes = [(2, 16), (3, 24), (2, 40), (4, 32)]
    for step in range(a.steps):
        b, s = shapes[step % len(shapes)]
        ids = torch.randint(0, cfg.vocab_size, (b, s), device=a.device)
        loss = compiled(ids, labels=ids).loss
        ref_loss = reference(ids, labels=ids).loss
        loss.backward()
        ref_loss.backward()
        grad_diff = max((p.grad - q.grad).abs().max().item()
                        for p, q in zip(model.parameters(), reference.parameters()))
        opt.step()
        ref_opt.step()
        opt.zero_grad()
        ref_opt.zero_grad()
        print("step %d, batch %d x seq %d: loss %.6f (eager %.6f), max |grad - eager grad| %.2e"
              % (step, b, s, loss.item(), ref_loss.item(), grad_diff))
    for report in st.all_reports():
        print()
        print(report)


if __name__ == "__main__":
    main()
