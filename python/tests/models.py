"""Small models for the hook's tests: the memory-bound patterns of BERT and Llama layers written
the way model code writes them, at small sizes so the suite runs in seconds."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class BertLayer(nn.Module):
    """A BERT encoder layer: Linear Q/K/V, scaled masked softmax attention, residual + LayerNorm,
    GELU MLP, residual + functional layer_norm."""

    def __init__(self, hidden=32, heads=4, ffn=64):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.fc1 = nn.Linear(hidden, ffn)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(ffn, hidden)
        self.drop = nn.Dropout(0.1)
        self.ln2_w = nn.Parameter(torch.rand(hidden) + 0.5)
        self.ln2_b = nn.Parameter(torch.rand(hidden))

    def forward(self, x, mask):
        b, s, h = x.size(0), x.size(1), x.size(2)
        qkv = self.qkv(x).chunk(3, dim=-1)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q.view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(b, s, self.heads, self.head_dim).transpose(1, 2)
        v = v.view(b, s, self.heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(mask[:, None, None, :] == 0, -1e9)
        probs = self.drop(F.softmax(scores, dim=-1))
        ctx = torch.matmul(probs, v).transpose(1, 2).contiguous().view(b, s, h)
        x = self.ln1(x + self.drop(self.out(ctx)))
        y = self.fc2(self.act(self.fc1(x)))
        return F.layer_norm(x + y, (h,), self.ln2_w, self.ln2_b, 1e-12)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, x):
        xf = x.float()
        var = xf.pow(2).mean(-1, keepdim=True)
        return (xf * torch.rsqrt(var + self.eps)).to(x.dtype) * self.weight


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaPiece(nn.Module):
    """RMSNorm, rotary embedding on q and k (cos/sin given), attention scores with a causal
    mask, SwiGLU MLP and residuals."""

    def __init__(self, hidden=32, heads=4, ffn=48):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.norm1 = RMSNorm(hidden)
        self.norm2 = RMSNorm(hidden)
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, hidden, bias=False)
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, cos, sin, causal):
        b, s, h = x.size(0), x.size(1), x.size(2)
        n = self.norm1(x)
        q = self.q(n).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(n).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = torch.matmul(q, k.transpose(2, 3)) * (self.head_dim ** -0.5)
        scores = torch.where(causal, scores, torch.full_like(scores, float("-inf")))
        probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
        attn = probs.sum(dim=1).mean(-1, keepdim=True)  # keeps the example short: no V
        x = x + attn
        n2 = self.norm2(x)
        y = self.down(F.silu(self.gate(n2)) * self.up(n2))
        return x + y, probs.amax(dim=-1)


class MLP(nn.Module):
    def __init__(self, d=16, hidden=32):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = torch.clamp(h, max=3.0) * torch.sigmoid(h) + F.gelu(h, approximate="tanh")
        return torch.tanh(self.fc2(h)) + x.abs().sqrt()


def rotary(seq, dim):
    inv = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    t = torch.arange(seq).float()[:, None] * inv[None, :]
    emb = torch.cat((t, t), dim=-1)
    return emb.cos(), emb.sin()
