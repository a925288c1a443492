"""Hugging Face models built from small configs with random weights (nothing is downloaded):
GPT-2, BERT, Llama and the T5 encoder through torch.compile, inference and three SGD steps, each
call at a new batch size and sequence length, against eager. Dropout probabilities are 0 so eager
and compiled compute the same function in train mode. Eager attention (not SDPA), so that the
softmax and its backward are aten ops Stitch can take.

The report checks name, per model, the norms, softmaxes and activations of its forward and their
backward ops, which every correct Stitch partition must run in Stitch pieces."""
import pytest
import torch

transformers = pytest.importorskip("transformers")

import harness  # noqa: E402

VOCAB = 100
# (batch, sequence) of successive calls: each changes a size, some both.
SHAPES = [(2, 8), (3, 12), (2, 16)]


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


def t5_encoder():
    # gated-gelu: T5 v1.1's feed-forward (GELU with tanh, times a linear gate).
    return transformers.T5EncoderModel(transformers.T5Config(
        vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
        dropout_rate=0.0, feed_forward_proj="gated-gelu", use_cache=False))


# Per model: its factory, whether it computes its own loss from labels, and the aten ops of its
# norms, softmax and activation (forward; backward).
# GPT-2's and T5's GELU is the tanh formula (transformers' gelu_new), written as aten ops.
# RMSNorm (Llama, T5) is pow, mean, rsqrt and mul; its backward has no op of its own, pow is the
# one that is surely there (the derivative of x^2 and of rsqrt).
LAYER_NORM = ["aten.native_layer_norm"], ["aten.native_layer_norm_backward"]
RMS_NORM = ["aten.pow", "aten.mean", "aten.rsqrt"], ["aten.pow"]
SOFTMAX = ["aten._softmax"], ["aten._softmax_backward_data"]
# The LM loss (cross-entropy over the vocabulary, labels -100 on padding): log_softmax and the
# one-hot nll_loss fuse into one piece, their backward into another.
LOSS = (["aten._log_softmax", "aten.nll_loss_forward"],
        ["aten._log_softmax_backward_data", "aten.nll_loss_backward"])
MODELS = {
    "gpt2": (gpt2, True, [LAYER_NORM, SOFTMAX, (["aten.tanh"], ["aten.tanh_backward"])]),
    "bert": (bert, True, [LAYER_NORM, SOFTMAX, (["aten.gelu"], ["aten.gelu_backward"])]),
    "llama": (llama, True, [RMS_NORM, SOFTMAX, (["aten.silu"], ["aten.silu_backward"])]),
    "t5_encoder": (t5_encoder, False, [RMS_NORM, SOFTMAX, (["aten.tanh"], ["aten.tanh_backward"])]),
}
DYNAMIC = pytest.mark.parametrize("dynamic", [True, None], ids=["dynamic", "automatic"])


def batch(b, s, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (b, s), generator=g)
    mask = torch.ones(b, s, dtype=torch.long)
    mask[-1, -2:] = 0  # the last sequence is padded
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def build(name):
    torch.manual_seed(0)
    return MODELS[name][0]()


def output(model, b):
    out = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"])
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def loss(name):
    if MODELS[name][1]:
        return lambda model, b: model(**b).loss
    return lambda model, b: output(model, b).pow(2).mean()


@DYNAMIC
@pytest.mark.parametrize("name", MODELS)
def test_inference_matches_eager(name, dynamic):
    batches = [batch(b, s, seed) for seed, (b, s) in enumerate(SHAPES)]
    harness.check_inference(build(name), batches, output, dynamic=dynamic)
    harness.expect_in_stitch(inference=[op for fw, _ in MODELS[name][2] for op in fw])
    harness.expect_no_runtime_fallbacks()


@DYNAMIC
@pytest.mark.parametrize("name", MODELS)
def test_training_matches_eager(name, dynamic):
    batches = [batch(b, s, seed) for seed, (b, s) in enumerate(SHAPES)]
    harness.check_training(build(name), batches, loss(name), dynamic=dynamic)
    parts = MODELS[name][2] + ([LOSS] if MODELS[name][1] else [])
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
