"""The harness's model as plain PyTorch code runs it (`--style pytorch`, `hetplan measure
--framework pytorch`; presets/frameworks/pytorch.yaml).

The same layers, GEMMs and parameters as model.py (hetplan's decomposition: one QKV projection,
one fc1 of gate and up), written as Hugging Face-style code writes them and trained the way a
plain PyTorch script trains them:
  - parameters in fp32; the forward under torch.autocast(bfloat16), so every linear casts its
    weight (once per forward: autocast's cache) and an fp32 input to bf16, and the residual
    stream, the norms and the embedding stay fp32 (a bf16 branch output added to the fp32 stream
    is promoted);
  - RMSNorm as transformers' LlamaRMSNorm: to(fp32), pow, mean, add, rsqrt, mul, then the gain
    times the result in the input's type; LayerNorm as nn.LayerNorm (fp32 under autocast);
  - rotary as rotate-half with cos and sin in the residual stream's type (transformers'
    LlamaRotaryEmbedding returns them in x's type; the stream is fp32, so the rotated Q and K are
    fp32 and SDPA's autocast casts them back to bf16); V stays a view of the QKV output;
  - SwiGLU as silu(gate) * up; GeLU as F.gelu(approximate="tanh");
  - fused attention by F.scaled_dot_product_attention with its default backend choice; unfused
    attention as transformers' eager attention (matmul, mask, softmax in fp32, cast back, dropout,
    matmul);
  - the loss as F.cross_entropy on the logits cast to fp32 (transformers' ForCausalLMLoss);
  - plain autograd throughout: no custom autograd function, no hook; the optimizer is
    torch.optim.AdamW(fused=True) on the fp32 parameters (train.py), gradients accumulated by
    autograd into .grad (the first micro-batch's gradient becomes .grad, later ones are added).
"""

import math

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn

from . import model as ref


class RMSNorm(nn.Module):
    """transformers' LlamaRMSNorm."""

    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


def make_norm(kind, hidden):
    if kind == "rmsnorm":
        return RMSNorm(hidden)
    return ref.make_norm(kind, hidden)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Rope:
    """cos and sin ([seq, 1, head_dim], rotate-half layout) in the residual stream's type."""

    def __init__(self, seq_len, head_dim, device, dtype, base=10000.0):
        inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32)
                              / head_dim))
        freqs = torch.outer(torch.arange(seq_len, device=device, dtype=torch.float32), inv)
        emb = torch.cat((freqs, freqs), dim=-1).unsqueeze(1)
        self.cos, self.sin = emb.cos().to(dtype), emb.sin().to(dtype)
        self.device, self.dtype = torch.device(device), dtype


def apply_rotary(q, k, rope):
    """transformers' apply_rotary_pos_emb on [batch, seq, heads, head_dim]."""
    return (q * rope.cos) + (rotate_half(q) * rope.sin), (k * rope.cos) + (rotate_half(k) * rope.sin)


class Attention(ref.Attention):
    def core(self, q, k, v):
        if self.flash and ref.HAS_SDPA:
            if self.kv_heads != self.heads:
                return ref.sdpa_gqa(q, k, v, self.causal)
            return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        if self.kv_heads != self.heads:
            rep = self.heads // self.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(self.head_dim))
        if self.causal:
            s = scores.shape[-1]
            mask = torch.ones(s, s, dtype=torch.bool, device=scores.device).triu_(1)
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        if self.dropout > 0:
            probs = F.dropout(probs, self.dropout, self.training)
        return torch.matmul(probs, v)

    def forward(self, x, rope):
        b, s, _ = x.shape
        qkv = self.qkv(x).view(b, s, self.heads + 2 * self.kv_heads, self.head_dim)
        q, k, v = qkv.split([self.heads, self.kv_heads, self.kv_heads], dim=2)
        if self.rotary:
            q, k = apply_rotary(q, k, rope)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if self.recompute_core and not self.flash:
            ctx = torch.utils.checkpoint.checkpoint(self.core, q, k, v, use_reentrant=False)
        else:
            ctx = self.core(q, k, v)
        return self.out(ctx.transpose(1, 2).reshape(b, s, self.heads * self.head_dim))


class Mlp(ref.Mlp):
    def forward(self, x):
        y = self.fc1(x)
        if self.swiglu:
            gate, up = y.chunk(2, dim=-1)
            y = F.silu(gate) * up
        elif self.activation == "gelu":
            y = F.gelu(y, approximate="tanh")
        else:
            y = F.relu(y)
        return self.fc2(y)


class MoeMlp(ref.MoeMlp):
    def __init__(self, layer):
        super().__init__(layer)
        self.experts = nn.ModuleList(Mlp(layer) for _ in range(layer["experts"]))


class Block(ref.Block):
    def __init__(self, layer):
        super().__init__(layer)
        h = layer["hidden"]
        self.norm1 = make_norm(layer["norm"], h)
        self.attention = Attention(layer)
        self.norm2 = make_norm(layer["norm"], h)
        self.mlp = MoeMlp(layer) if layer["experts"] > 1 else Mlp(layer)

    def rope(self, x):
        if not self.rotary:
            return None
        if self._rope is None or self._rope.device != x.device or self._rope.dtype != x.dtype:
            self._rope = Rope(x.shape[1], self.head_dim, x.device, x.dtype)
        return self._rope


class Embedding(ref.Embedding):
    def __init__(self, layer, vocab_rows):
        super().__init__(layer, vocab_rows)
        self.norm = make_norm(layer["norm"], layer["hidden"])


class LmHead(ref.LmHead):
    def __init__(self, layer, vocab_rows, embedding=None):
        super().__init__(layer, vocab_rows, embedding)
        self.final_norm = make_norm(layer["final_norm"], layer["hidden"])

    def forward(self, x, target):
        x = self.final_norm(x)
        if self.transform is not None:
            x = self.transform_norm(F.gelu(self.transform(x), approximate="tanh"))
        logits = F.linear(x, self.weight(), self.output_bias)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), target.reshape(-1))


class Model(ref.Model):
    """The whole model in plain PyTorch: embedding, blocks, LM head with its loss."""

    def __init__(self, info, flash=True, recompute="none"):
        nn.Module.__init__(self)
        layers = info["layers"]
        pad = info.get("vocab_pad_multiple", 128)
        rows = ref.spec.padded_vocab(layers[0]["vocab"], 1, pad)
        self.embedding = Embedding(layers[0], rows)
        self.blocks = nn.ModuleList(Block(layer) for layer in layers[1:-1])
        self.head = LmHead(layers[-1], rows, self.embedding)
        self.recompute = recompute
        for block in self.blocks:
            block.attention.flash = flash
            # As model.py: selective recomputation checkpoints unfused attention's core only.
            block.attention.recompute_core = recompute == "selective"


def autocast(device, enabled=True):
    """torch.autocast to bf16 on `device`'s type (CPU autocast on the CPU, for the tests)."""
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16,
                          enabled=enabled)


class AdamW:
    """torch.optim.AdamW(fused=True) over the fp32 parameters, as a plain training script steps
    them; .grad is accumulated by autograd and dropped by zero_grad(set_to_none=True)."""

    use_hooks = False

    def __init__(self, model, lr=1e-4, weight_decay=0.1):
        self.params = list({id(p): p for p in model.parameters() if p.requires_grad}.values())
        try:
            self.opt = torch.optim.AdamW(self.params, lr=lr, weight_decay=weight_decay, fused=True)
            self.fused = True
        except (RuntimeError, TypeError, ValueError):  # no fused AdamW here (torch 1.13, CPU)
            self.opt = torch.optim.AdamW(self.params, lr=lr, weight_decay=weight_decay)
            self.fused = False

    def after_backward(self):
        pass

    def step(self):
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def close(self):
        pass


def build_model(info, device, flash=True, recompute="none"):
    """The model in fp32 on `device` (built on the meta device first where torch has one)."""
    if not hasattr(torch.device, "__enter__"):  # torch < 2.0 (CPU tests only)
        model = Model(info, flash=flash, recompute=recompute).to(device=device)
    else:
        with torch.device("meta"):
            model = Model(info, flash=flash, recompute=recompute)
        model = model.to_empty(device=device)
    ref.init_weights(model)
    return model
