"""The layers of hetplan's cost model as PyTorch modules (costmodel/layer_ops.cpp, layer by layer).

Each choice below keeps the tensors PyTorch saves for backward equal to what hetplan counts in
LayerWork::activation_bytes, so that measured memory is comparable:
  - pre-norm blocks; LayerNorm through F.layer_norm (saves input, mean, rstd); RMSNorm as a
    function that saves its input and fp32 rstd only (on a GPU hetplan's fused kernels, fused.py);
  - one QKV projection; rotary on Q and K (on a GPU hetplan's fused kernel) with V copied out, so
    that Q, K, V are all that stays;
  - fused attention: F.scaled_dot_product_attention(is_causal) without attention dropout (hetplan
    does not model one); unfused attention: scores, softmax, dropout and context as separate ops
    (5 bytes per score kept, Korthikanti et al. 2022);
  - GeLU (tanh) saves its input; SwiGLU as a function that saves its input only (as Megatron's
    fused bias-SwiGLU does; on a GPU hetplan's fused kernels);
  - residual dropout keeps its one-byte mask;
  - the LM head's loss is Megatron-LM's cross-entropy: fp32 softmax kept, gradient formed in place;
  - the vocabulary is padded to a multiple of 128 (Megatron-LM; hetplan's costs use it).
"""

import math

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn

from . import fused, spec


def acc(x):
    """The accumulation type: fp32 for half-precision tensors, else their own."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


def rmsnorm_eager(x, weight, eps):
    """y and fp32 rstd ([..., 1]) by eager operators."""
    xf = acc(x)
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * rstd).to(x.dtype) * weight, rstd


def rmsnorm_backward_eager(dy, x, weight, rstd):
    """dx and dweight by eager operators."""
    xhat = acc(x) * rstd
    dyw = acc(dy) * acc(weight)
    dweight = (acc(dy) * xhat).reshape(-1, x.shape[-1]).sum(0).to(weight.dtype)
    dx = rstd * (dyw - xhat * (dyw * xhat).mean(-1, keepdim=True))
    return dx.to(x.dtype), dweight


class RMSNormFunction(torch.autograd.Function):
    """Saves its input, fp32 rstd and the weight; hetplan's fused kernels on a GPU (fused.py)."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        ctx.fused = fused.active(x) and weight.dtype == x.dtype
        run = fused.rmsnorm_forward if ctx.fused else rmsnorm_eager
        y, rstd = run(x, weight, eps)
        ctx.save_for_backward(x, rstd, weight)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, rstd, weight = ctx.saved_tensors
        run = fused.rmsnorm_backward if ctx.fused else rmsnorm_backward_eager
        dx, dweight = run(dy, x, weight, rstd)
        return dx, dweight, None


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        return RMSNormFunction.apply(x, self.weight, self.eps)


def make_norm(kind, hidden):
    if kind == "layernorm":
        return nn.LayerNorm(hidden, eps=1e-5)
    if kind == "rmsnorm":
        return RMSNorm(hidden)
    return nn.Identity()


def swiglu_eager(x):
    gate, up = x.chunk(2, dim=-1)
    return F.silu(gate) * up


def swiglu_backward_eager(dy, x):
    gate, up = x.chunk(2, dim=-1)
    g = acc(gate)
    sig = torch.sigmoid(g)
    dgate = acc(dy) * acc(up) * sig * (1 + g * (1 - sig))
    dup = acc(dy) * g * sig
    return torch.cat([dgate, dup], dim=-1).to(x.dtype)


class SwiGLUFunction(torch.autograd.Function):
    """silu(gate) * up over the two halves of the input; saves the input only. hetplan's fused
    kernels on a GPU (fused.py)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.fused = fused.active(x)
        return (fused.swiglu_forward if ctx.fused else swiglu_eager)(x)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        return (fused.swiglu_backward if ctx.fused else swiglu_backward_eager)(dy, x)


class CrossEntropyFunction(torch.autograd.Function):
    """Mean cross-entropy over tokens in fp32, keeping the softmax (Megatron-LM's
    vocab_parallel_cross_entropy on one rank)."""

    @staticmethod
    def forward(ctx, logits, target):
        x = acc(logits)
        if x is logits:
            x = x.clone()
        x -= x.max(dim=-1, keepdim=True).values
        target_logit = x.gather(-1, target.unsqueeze(-1)).squeeze(-1)
        x.exp_()
        total = x.sum(dim=-1)
        loss = (torch.log(total) - target_logit).mean()
        x /= total.unsqueeze(-1)
        ctx.save_for_backward(x, target)
        ctx.logits_dtype = logits.dtype
        return loss

    @staticmethod
    def backward(ctx, dloss):
        softmax, target = ctx.saved_tensors
        grad = softmax  # in place, as Megatron-LM does
        grad.scatter_add_(-1, target.unsqueeze(-1),
                          torch.full_like(target, -1, dtype=grad.dtype).unsqueeze(-1))
        grad *= dloss / target.numel()
        return grad.to(ctx.logits_dtype), None


class RopeTables:
    """cos and sin of angle position * base^(-2i / head_dim): [seq, 1, head_dim] in the
    activations' type for the eager operators, [seq, head_dim / 2] fp32 for the fused kernel."""

    def __init__(self, seq_len, head_dim, device, dtype, base=10000.0):
        inv = base ** (-torch.arange(0, head_dim, 2, device=device, dtype=torch.float64) / head_dim)
        angles = torch.outer(torch.arange(seq_len, device=device, dtype=torch.float64), inv)
        self.cos_half, self.sin_half = angles.cos().float(), angles.sin().float()
        full = torch.cat([angles, angles], dim=-1).unsqueeze(1)
        self.cos, self.sin = full.cos().to(dtype), full.sin().to(dtype)
        self.device = torch.device(device)


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


def rotary_eager(x, tables, inverse=False):
    """x ([batch, seq, heads, head_dim]) rotated by the tables' angles (their negatives when
    `inverse`: the backward) with eager operators."""
    sin = -tables.sin if inverse else tables.sin
    return x * tables.cos + rotate_half(x) * sin


class RotaryFunction(torch.autograd.Function):
    """Q and K ([batch, seq, heads, head_dim], views into the QKV projection's output) rotated out
    of place (rotate-half pairing, LLaMA's); saves nothing. hetplan's fused kernel on a GPU, which
    reads Q and K in place from the QKV output (fused.py)."""

    @staticmethod
    def forward(ctx, q, k, tables):
        ctx.tables = tables
        ctx.fused = fused.active(q)
        if ctx.fused:
            return (fused.rotary_forward(q, tables.cos_half, tables.sin_half),
                    fused.rotary_forward(k, tables.cos_half, tables.sin_half))
        return rotary_eager(q, tables), rotary_eager(k, tables)

    @staticmethod
    def backward(ctx, dq, dk):
        t = ctx.tables
        if ctx.fused:
            return (fused.rotary_backward(dq, t.cos_half, t.sin_half),
                    fused.rotary_backward(dk, t.cos_half, t.sin_half), None)
        return rotary_eager(dq, t, inverse=True), rotary_eager(dk, t, inverse=True), None


# torch < 2.0 has no fused attention: the unfused path stands in (CPU tests only).
HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def sdpa_gqa(q, k, v, causal):
    """Grouped-query attention: SDPA's enable_gqa (torch >= 2.5), else K and V repeated."""
    try:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    except torch.cuda.OutOfMemoryError:
        raise
    except (TypeError, RuntimeError):  # no enable_gqa, or no fused kernel for it
        rep = q.shape[1] // k.shape[1]
        return F.scaled_dot_product_attention(q, k.repeat_interleave(rep, dim=1),
                                              v.repeat_interleave(rep, dim=1), is_causal=causal)


class Embedding(nn.Module):
    def __init__(self, layer, vocab_rows):
        super().__init__()
        h = layer["hidden"]
        self.word = nn.Embedding(vocab_rows, h)
        self.position = nn.Embedding(layer["max_positions"], h) if layer["max_positions"] else None
        self.token_type = nn.Embedding(layer["token_types"], h) if layer["token_types"] else None
        self.norm = make_norm(layer["norm"], h)
        self.dropout = layer["dropout"]

    def forward(self, tokens):
        x = self.word(tokens)
        if self.position is not None:
            positions = torch.arange(tokens.shape[1], device=tokens.device)
            x = x + self.position(positions)
        if self.token_type is not None:
            x = x + self.token_type(torch.zeros_like(tokens))
        x = self.norm(x)
        return F.dropout(x, self.dropout, self.training) if self.dropout > 0 else x


class Attention(nn.Module):
    def __init__(self, layer, tp=1):
        super().__init__()
        h, d = layer["hidden"], layer["head_dim"]
        self.heads, self.kv_heads, self.head_dim = layer["heads"] // tp, layer["kv_heads"] // tp, d
        q, kv = layer["heads"] * d, layer["kv_heads"] * d
        # Output layout: per tensor-parallel rank, that rank's Q, K and V heads (so that a
        # column-parallel split gives each rank whole heads).
        self.qkv = nn.Linear(h, q + 2 * kv, bias=layer["bias"])
        self.out = nn.Linear(q, h, bias=layer["bias"])
        self.rotary = layer["rotary"]
        self.causal = layer["causal"]
        self.dropout = layer["dropout"]
        self.flash = True
        self.recompute_core = False

    def core(self, q, k, v):
        if self.flash and HAS_SDPA:
            if self.kv_heads != self.heads:
                return sdpa_gqa(q, k, v, self.causal)
            return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        if self.kv_heads != self.heads:
            rep = self.heads // self.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_dim))
        if self.causal:
            s = scores.shape[-1]
            mask = torch.ones(s, s, dtype=torch.bool, device=scores.device).triu_(1)
            scores = scores.masked_fill(mask, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        if self.dropout > 0:
            probs = F.dropout(probs, self.dropout, self.training)
        return torch.matmul(probs, v)

    def forward(self, x, rope):
        b, s, _ = x.shape
        qkv = self.qkv(x).view(b, s, self.heads + 2 * self.kv_heads, self.head_dim)
        q, k, v = qkv.split([self.heads, self.kv_heads, self.kv_heads], dim=2)
        if self.rotary:
            q, k = RotaryFunction.apply(q, k, rope)
            v = v.contiguous()  # lets the QKV output go: Q, K, V are what stays for backward
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if self.recompute_core and not self.flash:
            ctx = torch.utils.checkpoint.checkpoint(self.core, q, k, v, use_reentrant=False)
        else:
            ctx = self.core(q, k, v)
        return self.out(ctx.transpose(1, 2).reshape(b, s, self.heads * self.head_dim))


class Mlp(nn.Module):
    def __init__(self, layer, tp=1):
        super().__init__()
        h, f = layer["hidden"], layer["ffn_hidden"]
        self.swiglu = layer["activation"] == "swiglu"
        self.activation = layer["activation"]
        mlp_bias = layer.get("mlp_bias", layer["bias"])  # model-info before mlp_bias: one flag
        self.fc1 = nn.Linear(h, 2 * f if self.swiglu else f, bias=mlp_bias)
        self.fc2 = nn.Linear(f, h, bias=mlp_bias)

    def forward(self, x):
        y = self.fc1(x)
        if self.swiglu:
            y = SwiGLUFunction.apply(y)
        elif self.activation == "gelu":
            y = F.gelu(y, approximate="tanh")
        else:
            y = F.relu(y)
        return self.fc2(y)


class MoeMlp(nn.Module):
    """Top-k routed experts (no capacity limit). Routing is data dependent, so expert loads differ
    from hetplan's balanced assumption: an approximation, not tested on a GPU here."""

    def __init__(self, layer):
        super().__init__()
        self.router = nn.Linear(layer["hidden"], layer["experts"], bias=False)
        self.experts = nn.ModuleList(Mlp(layer) for _ in range(layer["experts"]))
        self.top_k = layer["top_k"]

    def forward(self, x):
        b, s, h = x.shape
        flat = x.reshape(-1, h)
        weights, chosen = torch.topk(torch.softmax(self.router(flat).float(), -1), self.top_k, -1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows, slot = torch.nonzero(chosen == e, as_tuple=True)
            if rows.numel():
                y = expert(flat[rows]) * weights[rows, slot].unsqueeze(-1).to(flat.dtype)
                out = out.index_add(0, rows, y)
        return out.view(b, s, h)


class Block(nn.Module):
    def __init__(self, layer, tp=1):
        super().__init__()
        h = layer["hidden"]
        self.norm1 = make_norm(layer["norm"], h)
        self.attention = Attention(layer, tp)
        self.norm2 = make_norm(layer["norm"], h)
        self.mlp = MoeMlp(layer) if layer["experts"] > 1 else Mlp(layer, tp)
        self.dropout = layer["dropout"]
        self.rotary = layer["rotary"]
        self.seq_len = layer["seq_len"]
        self.head_dim = layer["head_dim"]
        self._rope = None

    def rope(self, x):
        if not self.rotary:
            return None
        if self._rope is None or self._rope.device != x.device:
            self._rope = RopeTables(x.shape[1], self.head_dim, x.device, x.dtype)
        return self._rope

    def residual(self, x, y):
        if self.dropout > 0:
            y = F.dropout(y, self.dropout, self.training)
        return x + y

    def forward(self, x):
        x = self.residual(x, self.attention(self.norm1(x), self.rope(x)))
        return self.residual(x, self.mlp(self.norm2(x)))


class LmHead(nn.Module):
    def __init__(self, layer, vocab_rows, embedding=None):
        super().__init__()
        h = layer["hidden"]
        self.final_norm = make_norm(layer["final_norm"], h)
        self.transform = nn.Linear(h, h) if layer["transform"] else None
        self.transform_norm = nn.LayerNorm(h) if layer["transform"] else None
        if layer["tied"]:
            self._tied = [embedding]  # a list, so the embedding is not registered twice
            self.output = None
        else:
            self.output = nn.Linear(h, vocab_rows, bias=False)
        self.output_bias = nn.Parameter(torch.zeros(vocab_rows)) if layer["output_bias"] else None

    def weight(self):
        return self.output.weight if self.output is not None else self._tied[0].word.weight

    def forward(self, x, target):
        x = self.final_norm(x)
        if self.transform is not None:
            x = self.transform_norm(F.gelu(self.transform(x), approximate="tanh"))
        logits = F.linear(x, self.weight(), self.output_bias)
        return CrossEntropyFunction.apply(logits.view(-1, logits.shape[-1]), target.reshape(-1))


class Model(nn.Module):
    """The whole model as hetplan lists it: embedding, blocks, LM head with its loss."""

    def __init__(self, info, tp=1, flash=True, recompute="none"):
        super().__init__()
        layers = info["layers"]
        pad = info.get("vocab_pad_multiple", 128)
        rows = spec.padded_vocab(layers[0]["vocab"], tp, pad)
        self.embedding = Embedding(layers[0], rows)
        self.blocks = nn.ModuleList(Block(layer, tp) for layer in layers[1:-1])
        self.head = LmHead(layers[-1], rows, self.embedding)
        self.recompute = recompute
        for block in self.blocks:
            block.attention.flash = flash
            # Selective recomputation re-runs hetplan's core-attention ops: the unfused softmax
            # and its GEMMs. With fused attention there are none (costmodel/layer_ops.cpp).
            block.attention.recompute_core = recompute == "selective"

    def run(self, module, *args):
        if self.recompute == "full":
            return torch.utils.checkpoint.checkpoint(module, *args, use_reentrant=False)
        return module(*args)

    def forward(self, tokens, target):
        x = self.run(self.embedding, tokens)
        for block in self.blocks:
            x = self.run(block, x)
        return self.run(self.head, x, target)


def init_weights(model, std=0.02):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, std)
            elif "norm" in name and name.endswith("weight"):
                p.fill_(1.0)
            else:
                p.zero_()
