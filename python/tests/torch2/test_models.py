"""Hugging Face models built from small configs with random weights (nothing is downloaded),
through torch.compile, inference and one SGD step per call, each call at a new batch size and
sequence length (or image side), against eager.

Two groups. The benchmark's six (bench/torch/hf_models.py): GPT-2, Llama, Qwen2, BERT, the full T5
encoder-decoder and ViT, plus the T5 encoder alone. And architectures neither the benchmark nor
the hook's authors tuned for, each chosen for ops the first group lacks: GPT-NeoX (parallel
residual, rotary on a quarter of each head), BLOOM (ALiBi biases from a cumsum of the mask,
baddbmm, a GELU written as an autograd.Function), OPT (learned positions from a cumsum of the
mask, ReLU) and ConvNeXt (depthwise convolutions, a channels-first LayerNorm written as means,
permutes around a channels-last one, layer scale). Any architecture a user brings must compile
and match eager; these stand in for them.

Every dropout probability is 0 so eager and compiled compute the same function in train mode.
Eager attention (not SDPA), so that the softmax and its backward are aten ops Stitch can take.
The report checks name, per model, the norms, softmaxes and activations of its forward and their
backward ops, which every correct Stitch partition must run in Stitch pieces."""
from dataclasses import dataclass
from typing import Callable

import pytest
import torch

transformers = pytest.importorskip("transformers")

import harness  # noqa: E402

VOCAB = 100
# (batch, sequence) of successive calls: each changes a size, some both.
SHAPES = [(2, 8), (3, 12), (2, 16)]
# (batch, image side) for the vision models: each side a multiple of the patch (8) that changes
# the number of patches.
IMAGE_SHAPES = [(2, 16), (3, 24)]
LABELS = 10  # the vision models' classes


def gpt2():
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=32, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, attn_implementation="eager"))


def bert():
    return transformers.BertForMaskedLM(transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=32, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, attn_implementation="eager"))


def llama():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        use_cache=False, attn_implementation="eager"))


def qwen2():
    # Llama's layout with biased q/k/v projections and grouped-query attention.
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        attention_dropout=0.0, use_cache=False, attn_implementation="eager"))


def t5_encoder():
    # gated-gelu: T5 v1.1's feed-forward (GELU with tanh, times a linear gate).
    return transformers.T5EncoderModel(transformers.T5Config(
        vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
        dropout_rate=0.0, feed_forward_proj="gated-gelu", use_cache=False))


def t5():
    # The original T5's ReLU feed-forward; relative position buckets in encoder and decoder,
    # cross-attention, and the decoder's inputs shifted right from the labels.
    return transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2,
        num_heads=4, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0,
        use_cache=False, attn_implementation="eager"))


def vit():
    return transformers.ViTForImageClassification(transformers.ViTConfig(
        image_size=16, patch_size=8, num_channels=3, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=128, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, num_labels=LABELS, attn_implementation="eager",
        # Named up front: the first call with labels would set it, changing the config that
        # Dynamo's guards read.
        problem_type="single_label_classification"))


def gpt_neox():
    return transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, rotary_pct=0.25, max_position_embeddings=64,
        use_parallel_residual=True, use_cache=False, attn_implementation="eager"))


def bloom():
    return transformers.BloomForCausalLM(transformers.BloomConfig(
        vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4, hidden_dropout=0.0,
        attention_dropout=0.0, use_cache=False, attn_implementation="eager"))


def opt():
    return transformers.OPTForCausalLM(transformers.OPTConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, ffn_dim=128,
        num_attention_heads=4, max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
        pad_token_id=1, use_cache=False, attn_implementation="eager"))


def convnext():
    return transformers.ConvNextForImageClassification(transformers.ConvNextConfig(
        num_channels=3, patch_size=4, num_stages=2, hidden_sizes=[32, 64], depths=[1, 1],
        num_labels=LABELS, problem_type="single_label_classification"))


def text(b, s, seed, train):
    """A causal or masked LM's call: ids, a mask padding the last sequence, and (training) labels
    that are -100 on the padding."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (b, s), generator=g)
    mask = torch.ones(b, s, dtype=torch.long)
    mask[-1, -2:] = 0  # the last sequence is padded
    kw = {"input_ids": ids, "attention_mask": mask}
    if train:
        kw["labels"] = ids.masked_fill(mask == 0, -100)
    return kw


def seq2seq(b, s, seed, train):
    """An encoder-decoder's call: text()'s, and for inference the decoder's ids (training derives
    them from the labels, shifted right)."""
    kw = text(b, s, seed, train)
    if not train:
        kw["decoder_input_ids"] = torch.randint(0, VOCAB, (b, s),
                                                generator=torch.Generator().manual_seed(seed + 99))
    return kw


def image(b, side, seed, train):
    """An image classifier's call: pixels and (training) one class per image."""
    g = torch.Generator().manual_seed(seed)
    kw = {"pixel_values": torch.randn(b, 3, side, side, generator=g)}
    if train:
        kw["labels"] = torch.randint(0, LABELS, (b,), generator=g)
    return kw


def vit_image(b, side, seed, train):
    # Sides other than the config's need the position embeddings interpolated to the new grid.
    return dict(image(b, side, seed, train), interpolate_pos_encoding=True)


# The aten ops of a model's norms, softmax and activation: (forward, backward).
# GPT-2's, T5 v1.1's and BLOOM's GELU is the tanh formula, written as aten ops (BLOOM's backward
# computes the tanh again).
# RMSNorm (Llama, Qwen2, T5) is pow, mean, rsqrt and mul; its backward has no op of its own, pow
# is the one that is surely there (the derivative of x^2 and of rsqrt).
LAYER_NORM = ["aten.native_layer_norm"], ["aten.native_layer_norm_backward"]
RMS_NORM = ["aten.pow", "aten.mean", "aten.rsqrt"], ["aten.pow"]
SOFTMAX = ["aten._softmax"], ["aten._softmax_backward_data"]
GELU = ["aten.gelu"], ["aten.gelu_backward"]
TANH_GELU = ["aten.tanh"], ["aten.tanh_backward"]
RELU = ["aten.relu"], ["aten.threshold_backward"]
SILU = ["aten.silu"], ["aten.silu_backward"]
# ConvNeXt's channels-first LayerNorm: mean, the variance as pow and mean, sqrt and a division.
CHANNELS_FIRST_NORM = ["aten.mean", "aten.sqrt"], ["aten.pow"]
# The loss (cross-entropy over the vocabulary or the classes, labels -100 on padding):
# log_softmax and the one-hot nll_loss fuse into one piece, their backward into another.
LOSS = (["aten._log_softmax", "aten.nll_loss_forward"],
        ["aten._log_softmax_backward_data", "aten.nll_loss_backward"])


@dataclass(frozen=True)
class Model:
    build: Callable[[], torch.nn.Module]
    parts: list  # (forward ops, backward ops) of its norms, softmax and activation
    inputs: Callable = text  # (batch, length or side, seed, train) -> keyword arguments
    shapes: tuple = tuple(SHAPES)
    own_loss: bool = True  # computes its loss from labels (else: the mean square of its output)


MODELS = {
    # The benchmark's.
    "gpt2": Model(gpt2, [LAYER_NORM, SOFTMAX, TANH_GELU]),
    "bert": Model(bert, [LAYER_NORM, SOFTMAX, GELU]),
    "llama": Model(llama, [RMS_NORM, SOFTMAX, SILU]),
    "qwen2": Model(qwen2, [RMS_NORM, SOFTMAX, SILU]),
    "t5_encoder": Model(t5_encoder, [RMS_NORM, SOFTMAX, TANH_GELU], own_loss=False),
    "t5": Model(t5, [RMS_NORM, SOFTMAX, RELU], inputs=seq2seq),
    "vit": Model(vit, [LAYER_NORM, SOFTMAX, GELU], inputs=vit_image, shapes=tuple(IMAGE_SHAPES)),
    # Architectures that neither the benchmark nor the other tests name.
    "gpt_neox": Model(gpt_neox, [LAYER_NORM, SOFTMAX, GELU]),
    "bloom": Model(bloom, [LAYER_NORM, SOFTMAX, (["aten.tanh"], ["aten.tanh"])]),
    "opt": Model(opt, [LAYER_NORM, SOFTMAX, RELU]),
    "convnext": Model(convnext, [LAYER_NORM, CHANNELS_FIRST_NORM, GELU], inputs=image,
                      shapes=tuple(IMAGE_SHAPES)),
}
DYNAMIC = pytest.mark.parametrize("dynamic", [True, None], ids=["dynamic", "automatic"])


def batch(b, s, seed):
    """A causal LM's training call (test_gpt2_training_with_dropout)."""
    return text(b, s, seed, train=True)


def build(name):
    torch.manual_seed(0)
    return MODELS[name].build()


def batches(name, train):
    spec = MODELS[name]
    return [spec.inputs(b, s, seed, train) for seed, (b, s) in enumerate(spec.shapes)]


def output(model, kw):
    out = model(**{k: v for k, v in kw.items() if k != "labels"})
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def loss(name):
    if MODELS[name].own_loss:
        return lambda model, kw: model(**kw).loss
    return lambda model, kw: output(model, kw).pow(2).mean()


@DYNAMIC
@pytest.mark.parametrize("name", MODELS)
def test_inference_matches_eager(name, dynamic):
    harness.check_inference(build(name), batches(name, train=False), output, dynamic=dynamic)
    harness.expect_in_stitch(inference=[op for fw, _ in MODELS[name].parts for op in fw])
    harness.expect_no_runtime_fallbacks()


@DYNAMIC
@pytest.mark.parametrize("name", MODELS)
def test_training_matches_eager(name, dynamic):
    harness.check_training(build(name), batches(name, train=True), loss(name), dynamic=dynamic)
    parts = MODELS[name].parts + ([LOSS] if MODELS[name].own_loss else [])
    harness.expect_in_stitch(forward=[op for fw, _ in parts for op in fw],
                             backward=[op for _, bw in parts for op in bw])
    harness.expect_no_runtime_fallbacks()


def philox_dropout(x, p=0.5, training=True, inplace=False):
    """F.dropout as the stitch backend computes it (its seed draw, its Philox numbers): an eager
    model using it draws the masks a compiled one draws after the same torch.manual_seed."""
    from stitch.torch import _random
    if not training or not 0.0 < p < 1.0:
        return x if p < 1.0 or not training else x * 0.0
    seed = torch.ops.stitch.philox_seed(x.device, 0)
    keep = _random.uniform(seed, list(x.shape), torch.float32) >= p
    return x * keep * (1.0 / (1.0 - p))


@harness.needs_stitch
@DYNAMIC
def test_gpt2_training_with_dropout(dynamic, monkeypatch):
    """GPT-2 with every dropout at 0.1: the compiled training step against an eager one whose
    dropout draws the same Philox masks (the backend's numbers are not PyTorch's own stream, so
    plain eager agrees in distribution only: test_blocks checks that); losses, gradients and
    updates must agree. The dropout masks, forward and backward, and the loss run in Stitch."""
    def model():
        torch.manual_seed(0)
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=VOCAB, n_positions=32, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.1,
            embd_pdrop=0.1, attn_pdrop=0.1, use_cache=False, attn_implementation="eager"))

    def loss_of(m, b):
        torch.manual_seed(1234)  # the same draws for the eager and the compiled call
        if isinstance(m, torch._dynamo.eval_frame.OptimizedModule):
            return m(**b).loss
        with monkeypatch.context() as patch:
            patch.setattr(torch.nn.functional, "dropout", philox_dropout)
            return m(**b).loss

    batches = [batch(b, s, seed) for seed, (b, s) in enumerate(SHAPES)]
    harness.check_training(model(), batches, loss_of, dynamic=dynamic)
    harness.expect_in_stitch(forward=["aten.native_dropout", "aten.nll_loss_forward"],
                             backward=["aten.native_dropout_backward", "aten.nll_loss_backward"])
    harness.expect_no_runtime_fallbacks()
    # Every mask's random numbers are drawn inside a Stitch piece, forward and backward.
    for kind in ("forward", "backward"):
        graphs = [g for r in harness.reports() for g in r.graphs if g.kind == kind]
        assert any("stitch.philox_uniform" in g.replaced() for g in graphs), harness.describe()
        assert not any(fb["op"] == "stitch.philox_uniform" for g in graphs
                       for fb in g.fallbacks), harness.describe()
