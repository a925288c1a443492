"""Hugging Face models for the PyTorch benchmarks (train_step.py, models.py): six architectures
built from configs with random weights (nothing is downloaded), their inputs, one training step
and one inference call per model, and the per-piece timing of a Stitch contender.

Families: decoders (GPT-2, Llama, Qwen2: GQA and biased projections), an encoder (BERT, masked
LM), an encoder-decoder (T5) and a vision model (ViT, image classification). Every dropout
probability is 0 so eager and compiled contenders compute the same function in train mode, and
decoders run without a KV cache (use_cache=False: a training step or a scoring pass keeps none).
Attention is each model's default implementation (SDPA where transformers has it), as a user gets
it. The configs use only arguments that transformers 4.46 and 5.x both accept.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import torch

MODELS = ("gpt2", "llama", "qwen2", "bert", "t5", "vit")
FAMILY = {"gpt2": "decoder", "llama": "decoder", "qwen2": "decoder", "bert": "encoder",
          "t5": "encoder-decoder", "vit": "vision"}


@dataclass
class Sizes:
    batch: int
    seq: int
    layers: int
    hidden: int
    vocab: int
    image: int = 224  # ViT: image side; its sequence is (image / patch)^2 + 1
    patch: int = 16

    @property
    def heads(self) -> int:
        return max(self.hidden // 64, 1)

    @property
    def mlp(self) -> int:  # Llama/Qwen2's SwiGLU width: 8/3 of hidden, a multiple of 64
        return self.hidden * 8 // 3 // 64 * 64 or 64


def build(name: str, s: Sizes) -> torch.nn.Module:
    import transformers as tf
    pos = max(s.seq, 64)
    if name == "gpt2":
        return tf.GPT2LMHeadModel(tf.GPT2Config(
            n_layer=s.layers, n_embd=s.hidden, n_head=s.heads, vocab_size=s.vocab, n_positions=pos,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False))
    if name in ("llama", "qwen2"):
        cls, cfg = (tf.LlamaForCausalLM, tf.LlamaConfig) if name == "llama" else \
            (tf.Qwen2ForCausalLM, tf.Qwen2Config)
        kv = s.heads if name == "llama" else max(s.heads // 2, 1)
        return cls(cfg(num_hidden_layers=s.layers, hidden_size=s.hidden, intermediate_size=s.mlp,
                       num_attention_heads=s.heads, num_key_value_heads=kv, vocab_size=s.vocab,
                       max_position_embeddings=pos, attention_dropout=0.0, use_cache=False))
    if name == "bert":
        return tf.BertForMaskedLM(tf.BertConfig(
            vocab_size=s.vocab, hidden_size=s.hidden, num_hidden_layers=s.layers,
            num_attention_heads=s.heads, intermediate_size=4 * s.hidden,
            max_position_embeddings=pos, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0))
    if name == "t5":
        return tf.T5ForConditionalGeneration(tf.T5Config(
            vocab_size=s.vocab, d_model=s.hidden, d_kv=s.hidden // s.heads, d_ff=4 * s.hidden,
            num_layers=s.layers, num_decoder_layers=s.layers, num_heads=s.heads, dropout_rate=0.0,
            decoder_start_token_id=0, pad_token_id=0, use_cache=False))
    if name == "vit":
        return tf.ViTForImageClassification(tf.ViTConfig(
            image_size=s.image, patch_size=s.patch, num_channels=3, hidden_size=s.hidden,
            num_hidden_layers=s.layers, num_attention_heads=s.heads,
            intermediate_size=4 * s.hidden, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, num_labels=min(s.vocab, 1000),
            # Named up front: the first call with labels would set it, changing the config that
            # Dynamo's guards read, and the second step would compile again.
            problem_type="single_label_classification"))
    raise ValueError("unknown model %r (known: %s)" % (name, ", ".join(MODELS)))


def batch(name: str, s: Sizes, device, gen: torch.Generator, train: bool) -> dict:
    """One call's keyword arguments: with labels for a training step (the model computes its
    loss), without them for inference (T5 then gets decoder_input_ids)."""
    if name == "vit":
        kw = {"pixel_values": torch.randn(s.batch, 3, s.image, s.image, generator=gen)}
        if train:
            kw["labels"] = torch.randint(0, min(s.vocab, 1000), (s.batch,), generator=gen)
    else:
        ids = torch.randint(0, s.vocab, (s.batch, s.seq), generator=gen)
        kw = {"input_ids": ids}
        if train:
            kw["labels"] = ids
        elif name == "t5":
            kw["decoder_input_ids"] = ids
    return {k: v.to(device) for k, v in kw.items()}


def autocast(device: str, dtype: str):
    """bf16 as a user runs it: torch.autocast around the forward (weights stay f32)."""
    if dtype == "bf16":
        return torch.autocast(device, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def train_step(model, opt, device: str = "cpu", dtype: str = "f32"):
    """forward (under autocast for bf16) and loss, backward, optimizer step; returns the loss."""
    def step(kw):
        with autocast(device, dtype):
            loss = model(**kw).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()
    return step


def infer_step(model, device: str = "cpu", dtype: str = "f32"):
    """A no_grad forward; returns the logits."""
    def step(kw):
        with torch.no_grad(), autocast(device, dtype):
            return model(**kw).logits
    return step


def piece_times(step, args, cuda: bool, top: int, reps: int = 20):
    """(piece name, Stitch ms, eager ms, ops) for the `top` Stitch pieces that lose most against
    their own eager fx module (the fallback every piece keeps), timed on the arguments each piece
    got in one call of step(args)."""
    import stitch.torch as st
    from stitch.torch._piece import Piece
    seen = {}
    call = Piece.__call__

    def grab(self, *a):
        seen.setdefault(self.__name__, (self, a))
        return call(self, *a)
    Piece.__call__ = grab
    try:
        step(args)
    finally:
        Piece.__call__ = call

    def ms(fn, a):
        for _ in range(3):
            fn(*a)
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn(*a)
        if cuda:
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) / reps * 1e3
    ops = {p["name"]: p["ops"] for r in st.all_reports() for g in r.graphs for p in g.pieces}
    rows = [(name, ms(lambda *x: call(piece, *x), a), ms(piece.eager, a), ops.get(name, []))
            for name, (piece, a) in seen.items()]
    return sorted(rows, key=lambda r: r[2] - r[1])[:top]
