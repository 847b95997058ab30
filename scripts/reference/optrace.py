"""What the reference harness really runs, op by op, against what hetplan's cost model counts.

Every aten operator one layer of the harness executes (forward, then backward with the fp32
gradient accumulation of MixedPrecisionAdam) is recorded under a TorchDispatchMode, below autograd,
so the backward's operators are seen as the device runs them. Each is classified:
  - view: aliases an input (view, transpose, split, ...): no kernel, no bytes;
  - gemm: mm / addmm / bmm / baddbmm, with their FLOPs;
  - attention: a fused scaled-dot-product-attention kernel (flash, memory-efficient, cuDNN);
  - memory: everything else (elementwise, norms, reductions, copies, fills, gathers), with the
    bytes it must move at least: every tensor input read once, every output written once
    (hetplan's convention for memory-bound kernels, costmodel/layer_ops.h).
`compare()` sets these beside the layer's work from `hetplan model-info --work`: GEMM FLOPs must
agree exactly (the same model), memory-bound bytes show how far the cost model's kernels are from
the harness's. Runs on the CPU (torch >= 1.13; fused attention and dropout then come from
stand-ins that record the kernels CUDA runs, with the layouts of PyTorch's flash kernel, and so
do RMSNorm, SwiGLU and rotary where the GPU harness runs hetplan's fused kernels) and on a GPU
(the real kernels; those of libhetplan_kernels_c.so, which aten does not see, are told by
fused.py).
"""

import contextlib

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from . import fused as harness_fused
from . import model as harness_model

GEMM_OPS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "_scaled_mm"}
ATTENTION_PREFIXES = ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                      "_scaled_dot_product_cudnn_attention", "_flash_attention_", "_efficient_attention_",
                      "_scaled_dot_product_fused_attention", "hetplan_attention_standin")
# No kernel and no bytes: allocation without initialisation, metadata.
NO_KERNEL = {"_unsafe_view", "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "lift_fresh",
             "_to_copy_noop", "set_", "resize_", "is_same_size", "_local_scalar_dense", "sym_size",
             "sym_stride", "sym_numel", "sym_storage_offset", "_has_compatible_shallow_copy_type"}
# Operators that touch only the indexed rows or elements of a table: (table argument, the tensor
# whose size is the number of elements touched). Out-of-place: the rows read; in place: the
# elements read and written.
INDEXED = {"embedding": (0, "out"), "gather": (0, "out"), "index_select": (0, "out"),
           "scatter_add_": (0, 3), "scatter_": (0, 3), "index_add_": (0, 3),
           "index_put_": (0, 2)}
# The loss's gather of one log-probability per row, and its gradient (written whole).
NLL = {"nll_loss_forward", "nll_loss2d_forward"}
NLL_BACKWARD = {"nll_loss_backward", "nll_loss2d_backward"}
# In-place operators that overwrite their first argument without reading it.
WRITE_ONLY = {"fill_", "zero_", "normal_", "uniform_", "bernoulli_", "random_", "copy_",
              "exponential_", "index_fill_", "masked_fill_"}


def _tensor_bytes(t):
    """Distinct elements addressed (broadcast dimensions, stride 0, count once) x element size."""
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        if stride != 0:
            n *= size
    return n * t.element_size()


def _aliasing(func):
    """(view, in_place): the schema's alias annotation on the first return."""
    returns = func._schema.returns
    if not returns or returns[0].alias_info is None:
        return False, False
    return (not returns[0].alias_info.is_write), returns[0].alias_info.is_write


def gemm_flops(name, args):
    if name == "mm":
        a, b = args[0], args[1]
        return 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
    if name in ("addmm", "_scaled_mm"):
        a, b = (args[1], args[2]) if name == "addmm" else (args[0], args[1])
        return 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
    if name == "bmm":
        a, b = args[0], args[1]
        return 2.0 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    if name in ("baddbmm", "addbmm"):
        a, b = args[1], args[2]
        return 2.0 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    return 0.0


class Event:
    """One operator: its phase, name, kind, bytes moved (and of them, by element size: {2: bytes
    of 2-byte elements, 4: ..., 1: ...}), FLOPs and input shapes."""
    __slots__ = ("phase", "op", "kind", "bytes", "flops", "shapes", "by_size")

    def __init__(self, phase, op, kind, nbytes=0.0, flops=0.0, shapes="", by_size=None):
        self.phase, self.op, self.kind = phase, op, kind
        self.bytes, self.flops, self.shapes = nbytes, flops, shapes
        self.by_size = by_size or {}

    def as_dict(self):
        return {"phase": self.phase, "op": self.op, "kind": self.kind, "bytes": self.bytes,
                "flops": self.flops, "shapes": self.shapes}


def _by_size(tensors, weight=1):
    out = {}
    for t in tensors:
        out[t.element_size()] = out.get(t.element_size(), 0.0) + weight * _tensor_bytes(t)
    return out


def _merge(*parts):
    out = {}
    for part in parts:
        for k, v in part.items():
            out[k] = out.get(k, 0.0) + v
    return out


class OpTrace(TorchDispatchMode):
    """Records every operator dispatched while active, tagged with the current `phase`."""

    def __init__(self):
        super().__init__()
        self.events = []
        self.phase = "forward"
        self.suspended = 0
        # data_ptr()s of the parameters' .grad tensors: an in-place write into one of them is
        # autograd's gradient accumulation (plain PyTorch, phase "grad_accumulation").
        self.grad_ptrs = set()

    def record(self, event):
        self.events.append(event)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.suspended:
            return out
        name = func.overloadpacket.__name__
        if name in NO_KERNEL:
            return out
        view, in_place = _aliasing(func)
        if view:
            return out
        inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        shapes = " ".join("x".join(map(str, t.shape)) or "scalar" for t in inputs[:3])
        phase = self.phase
        if in_place and self.grad_ptrs and inputs and inputs[0].data_ptr() in self.grad_ptrs:
            self.phase = "grad_accumulation"
        try:
            self._classify(name, func, args, kwargs, inputs, outputs, in_place, shapes)
        finally:
            self.phase = phase
        return out

    def _classify(self, name, func, args, kwargs, inputs, outputs, in_place, shapes):
        if name in GEMM_OPS:
            self.record(Event(self.phase, name, "gemm", flops=gemm_flops(name, args), shapes=shapes))
        elif name.startswith(ATTENTION_PREFIXES):
            self.record(Event(self.phase, name, "attention", shapes=shapes))
        elif name in NLL:
            # One log-probability read per row (at its target), not the row: the target, the
            # weight and the output are what moves.
            target = args[1]
            logp = args[0]
            touched = [t for t in inputs if t is not logp]
            sizes = _merge(_by_size(touched), _by_size(outputs),
                           {logp.element_size(): float(target.numel() * logp.element_size())})
            self.record(Event(self.phase, name, "memory", nbytes=sum(sizes.values()),
                              shapes=shapes, by_size=sizes))
        elif name in NLL_BACKWARD:
            # The gradient of every log-probability written (zeros, then -1 at each target):
            # the log-probabilities themselves are not read.
            logp = args[1]
            sizes = _merge(_by_size(outputs), _by_size([t for t in inputs if t is not logp
                                                         and t.dim() > 0 and t is not args[0]]))
            self.record(Event(self.phase, name, "memory", nbytes=sum(sizes.values()),
                              shapes=shapes, by_size=sizes))
        elif name in INDEXED:
            table_pos, touched_by = INDEXED[name]
            others = [t for t in inputs if t is not args[table_pos]]
            if touched_by == "out":
                touched = outputs
            else:
                src = args[touched_by] if len(args) > touched_by else others[-1]
                touched = [t for t in (src if isinstance(src, (list, tuple)) else [src])
                           if isinstance(t, torch.Tensor)]
            # The other inputs (indices, source) read, the touched elements read and written.
            sizes = _merge(_by_size(others), _by_size(touched, 2))
            self.record(Event(self.phase, name, "memory", nbytes=float(sum(sizes.values())),
                              shapes=shapes, by_size=sizes))
        else:
            if in_place or "out" in kwargs:
                # The written tensor is an argument: count it once as written (and read unless
                # the operator only writes it).
                written = outputs[:1]
                read = [t for t in inputs if not any(t is w for w in written)]
                if name not in WRITE_ONLY:
                    read += written
            else:
                written, read = outputs, inputs
            sizes = _merge(_by_size(read), _by_size(written))
            self.record(Event(self.phase, name, "memory", nbytes=float(sum(sizes.values())),
                              shapes=shapes, by_size=sizes))

    @contextlib.contextmanager
    def suspend(self):
        self.suspended += 1
        try:
            yield
        finally:
            self.suspended -= 1


_ACTIVE = []


def _active():
    return _ACTIVE[-1] if _ACTIVE else None


def _unrecorded(trace):
    """The stand-ins' own arithmetic is not what CUDA runs: kept out of the trace."""
    return trace.suspend() if trace else contextlib.nullcontext()


def _record(trace, op, kind, nbytes=0.0):
    if trace:
        trace.record(Event(trace.phase, op, kind, nbytes=float(nbytes)))


def _flash_layout(t):
    """`t` ([batch, heads, seq, dim]) copied into [batch, seq, heads, dim] memory, as PyTorch's
    flash kernel lays out its output and gradients."""
    laid = torch.empty(t.shape[0], t.shape[2], t.shape[1], t.shape[3], dtype=t.dtype,
                       device=t.device).transpose(1, 2)
    laid.copy_(t)
    return laid


class AttentionStandIn(torch.autograd.Function):
    """Fused attention where PyTorch has none (torch < 2.0, or the CPU): one recorded operator, with
    the layouts PyTorch's flash kernel gives (output and gradients [batch, seq, heads, dim] in
    memory, returned as [batch, heads, seq, dim] views); the arithmetic runs unrecorded."""

    @staticmethod
    def forward(ctx, q, k, v, causal):
        trace = _active()
        with _unrecorded(trace):
            out = _flash_layout(_math_attention(q, k, v, causal))
            # What the flash kernel keeps besides its inputs and output: fp32 logsumexp per row.
            lse = torch.empty(q.shape[0], q.shape[1], q.shape[2], dtype=torch.float32,
                              device=q.device)
        _record(trace, "hetplan_attention_standin", "attention")
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal = causal
        return out

    @staticmethod
    def backward(ctx, dout):
        trace = _active()
        q, k, v, _, _ = ctx.saved_tensors
        with _unrecorded(trace):
            with torch.enable_grad():
                qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
                out = _math_attention(qq, kk, vv, ctx.causal)
                dq, dk, dv = (_flash_layout(g) for g in torch.autograd.grad(out, (qq, kk, vv), dout))
        _record(trace, "hetplan_attention_standin_backward", "attention")
        return dq, dk, dv, None


def _math_attention(q, k, v, causal):
    if k.shape[1] != q.shape[1]:  # grouped-query attention, which the flash kernel runs natively
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) / (q.shape[-1] ** 0.5)
    if causal:
        s = scores.shape[-1]
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1),
                                    float("-inf"))
    return torch.matmul(torch.softmax(scores, -1), v.float()).to(q.dtype)


def _autocast_dtype():
    """The dtype CUDA's autocast would cast SDPA's inputs to (its lower_precision_fp list), where
    the stand-in runs under autocast; None outside it."""
    if torch.is_autocast_enabled():
        return torch.get_autocast_gpu_dtype()
    if hasattr(torch, "is_autocast_cpu_enabled") and torch.is_autocast_cpu_enabled():
        return torch.get_autocast_cpu_dtype()
    return None


def _standin_sdpa(q, k, v, is_causal=False, enable_gqa=False, **_):
    low = _autocast_dtype()
    if low is not None:  # recorded casts, as CUDA's autocast makes them (fp32 Q, K of rotary)
        q, k, v = (t if t.dtype == low else t.to(low) for t in (q, k, v))
    if k.shape[1] != q.shape[1] and not enable_gqa:
        raise RuntimeError("grouped-query attention needs enable_gqa")
    # With enable_gqa the flash kernel reads K and V with their own head count: no repeat.
    return AttentionStandIn.apply(q, k, v, is_causal)


class DropoutStandIn(torch.autograd.Function):
    """Dropout as CUDA runs it (aten::native_dropout: one kernel writing the output and a one-byte
    mask; its backward one kernel), where the CPU decomposes it into bernoulli_, div_ and mul."""

    @staticmethod
    def forward(ctx, x, p):
        trace = _active()
        with _unrecorded(trace):
            mask = torch.rand(x.shape, device=x.device) >= p
            out = x * mask.to(x.dtype) / (1 - p)
        _record(trace, "native_dropout", "memory", 2 * _tensor_bytes(x) + mask.numel())
        ctx.save_for_backward(mask)
        ctx.p = p
        return out

    @staticmethod
    def backward(ctx, dout):
        trace = _active()
        (mask,) = ctx.saved_tensors
        with _unrecorded(trace):
            dx = dout * mask.to(dout.dtype) / (1 - ctx.p)
        _record(trace, "native_dropout_backward", "memory", 2 * _tensor_bytes(dout) + mask.numel())
        return dx, None


def _standin_dropout(x, p=0.5, training=True, inplace=False):
    if not training or p == 0:
        return x
    return DropoutStandIn.apply(x, p)


def _fused_standin(eager, x_at, kernels, half_width):
    """A kernel of fused.py on the CPU: `eager` computes, unrecorded; the kernels the library
    launches are recorded with the bytes fused.traffic gives them."""
    def run(*args):
        with _unrecorded(_active()):
            out = eager(*args)
        x = args[x_at]
        cols = x.shape[-1] // 2 if half_width else x.shape[-1]
        for kernel in kernels:
            harness_fused.announce(kernel, x.numel() // x.shape[-1], cols, x)
        return out
    return run


def _rotary_by_half_tables(x, cos, sin, sign=1.0):
    x1, x2 = x.float().chunk(2, dim=-1)
    c, s = cos.unsqueeze(1), sign * sin.unsqueeze(1)
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


FUSED_STANDINS = {
    "rmsnorm_forward": (harness_model.rmsnorm_eager, 0, ("hk_rmsnorm_forward",), False),
    "rmsnorm_backward": (harness_model.rmsnorm_backward_eager, 1,
                         ("hk_rmsnorm_backward_input", "hk_rmsnorm_backward_weight"), False),
    "swiglu_forward": (harness_model.swiglu_eager, 0, ("hk_swiglu_forward",), True),
    "swiglu_backward": (harness_model.swiglu_backward_eager, 1, ("hk_swiglu_backward",), True),
    "rotary_forward": (_rotary_by_half_tables, 0, ("hk_rotary_forward",), False),
    "rotary_backward": (lambda dy, cos, sin: _rotary_by_half_tables(dy, cos, sin, -1.0), 0,
                        ("hk_rotary_backward",), False),
}


@contextlib.contextmanager
def _patched(obj, name, value):
    missing = object()
    saved = getattr(obj, name, missing)
    setattr(obj, name, value)
    try:
        yield
    finally:
        if saved is missing:
            delattr(obj, name)
        else:
            setattr(obj, name, saved)


@contextlib.contextmanager
def cuda_like_standins():
    """On the CPU, the harness's fused attention and dropout become stand-ins that record the
    kernels CUDA runs (the arithmetic is done, unrecorded, by plain operators); so do RMSNorm,
    SwiGLU and rotary where the GPU harness runs hetplan's fused kernels (libhetplan_kernels_c.so
    built)."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(_patched(harness_model, "HAS_SDPA", True))
        stack.enter_context(_patched(harness_model.F, "scaled_dot_product_attention", _standin_sdpa))
        stack.enter_context(_patched(harness_model.F, "dropout", _standin_dropout))
        if harness_fused.library() is not None:
            stack.enter_context(_patched(harness_fused, "active",
                                         lambda t: t.dtype in harness_fused.HK_DTYPES))
            for name, args in FUSED_STANDINS.items():
                stack.enter_context(_patched(harness_fused, name, _fused_standin(*args)))
        yield


@contextlib.contextmanager
def tracing():
    """An OpTrace, also told of the fused kernels fused.py launches outside aten."""
    trace = OpTrace()

    def observe(kernel, nbytes):
        trace.record(Event(trace.phase, kernel, "memory", nbytes=float(nbytes)))

    _ACTIVE.append(trace)
    harness_fused.observers.append(observe)
    try:
        with trace:
            yield trace
    finally:
        harness_fused.observers.remove(observe)
        _ACTIVE.pop()


# Fields of a layer that make it what it is (two blocks with equal fields run the same ops).
def _layer_key(layer):
    return tuple(sorted((k, v) for k, v in layer.items()
                        if k not in ("index", "name", "work") and not isinstance(v, (dict, list))))


def distinct_layers(info):
    """Indices of the first layer of each distinct kind/shape, in model order."""
    seen, out = set(), []
    for i, layer in enumerate(info["layers"]):
        key = _layer_key(layer)
        if key not in seen:
            seen.add(key)
            out.append(i)
    return out


def trace_layer(info, index, micro_batch, device="cpu", dtype=torch.bfloat16, seed=0):
    """Runs layer `index` of the harness's model once forward and backward under an OpTrace and
    adds each parameter gradient into an fp32 main gradient as MixedPrecisionAdam does (phase
    "grad_accumulation"). Returns the events."""
    layers = info["layers"]
    layer = layers[index]
    seq, h = layer["seq_len"], layer["hidden"]
    rows = harness_model.spec.padded_vocab(layers[0]["vocab"], 1, info.get("vocab_pad_multiple", 128))
    gen = torch.Generator(device="cpu").manual_seed(seed)
    embedding = None
    if layer["kind"] == "embedding":
        module = harness_model.Embedding(layer, rows)
    elif layer["kind"] == "transformer":
        module = harness_model.Block(layer)
    else:
        embedding = harness_model.Embedding(layers[0], rows)
        module = harness_model.LmHead(layer, rows, embedding)
    module = module.to(device=device, dtype=dtype)
    if embedding is not None:
        embedding = embedding.to(device=device, dtype=dtype)
    harness_model.init_weights(module)
    module.train()
    params = list(module.parameters())
    if embedding is not None and layer.get("tied"):
        params.append(embedding.word.weight)
    main_grads = [torch.zeros(p.shape, dtype=torch.float32, device=device) for p in params]

    def tokens():
        return torch.randint(0, layers[0]["vocab"], (micro_batch, seq), generator=gen).to(device)

    def hidden():
        x = torch.randn(micro_batch, seq, h, generator=gen).to(device=device, dtype=dtype)
        return x.requires_grad_()

    inputs = (tokens(),) if layer["kind"] == "embedding" else \
        (hidden(),) if layer["kind"] == "transformer" else (hidden(), tokens())
    if layer["kind"] == "transformer":
        module.rope(inputs[0])  # the rotary tables: made once, not in every step
    with tracing() as trace:
        out = module(*inputs)
        trace.phase = "backward"
        if out.dim() == 0:
            out.backward()
        else:
            with trace.suspend():
                dout = torch.randn(out.shape, generator=gen).to(device=device, dtype=out.dtype)
            out.backward(dout)
        trace.phase = "grad_accumulation"
        for p, main in zip(params, main_grads):
            if p.grad is not None:
                main.add_(p.grad)
    return trace.events


def trace_layer_plain(info, index, micro_batch, device="cpu", seed=0):
    """Layer `index` of the plain-PyTorch model (reference/plain.py): fp32 parameters, forward
    under autocast(bfloat16), backward outside it. One micro-batch runs untraced first, so that
    the traced one's gradients are added into .grad by autograd (phase "grad_accumulation"), as
    every micro-batch after the first is; the first micro-batch's gradients become .grad without
    a kernel. Returns (events of the first micro-batch, events of a later one)."""
    from . import plain
    layers = info["layers"]
    layer = layers[index]
    seq, h = layer["seq_len"], layer["hidden"]
    rows = harness_model.spec.padded_vocab(layers[0]["vocab"], 1, info.get("vocab_pad_multiple", 128))
    gen = torch.Generator(device="cpu").manual_seed(seed)
    embedding = None
    if layer["kind"] == "embedding":
        module = plain.Embedding(layer, rows)
    elif layer["kind"] == "transformer":
        module = plain.Block(layer)
    else:
        embedding = plain.Embedding(layers[0], rows).to(device)
        module = plain.LmHead(layer, rows, embedding)
    module = module.to(device=device)
    harness_model.init_weights(module)
    module.train()
    params = list(module.parameters())
    if embedding is not None and layer.get("tied"):
        params.append(embedding.word.weight)

    def inputs():
        tokens = torch.randint(0, layers[0]["vocab"], (micro_batch, seq), generator=gen).to(device)
        if layer["kind"] == "embedding":
            return (tokens,)
        x = torch.randn(micro_batch, seq, h, generator=gen).to(device).requires_grad_()
        return (x,) if layer["kind"] == "transformer" else (x, tokens)

    if layer["kind"] == "transformer":
        module.rope(inputs()[0])  # the rotary tables: made once, not in every step
    traces = []
    for _ in range(2):
        args = inputs()
        with tracing() as trace:
            trace.grad_ptrs = {p.grad.data_ptr() for p in params if p.grad is not None}
            with plain.autocast(device):
                out = module(*args)
            trace.phase = "backward"
            if out.dim() == 0:
                out.backward()
            else:
                with trace.suspend():
                    dout = torch.randn(out.shape, generator=gen).to(device=device, dtype=out.dtype)
                out.backward(dout)
        traces.append(trace.events)
    return traces[0], traces[1]


PHASES = ("forward", "backward", "grad_accumulation")


def _empty_totals():
    return {ph: {"gemm_flops": 0.0, "memory_bytes": 0.0, "attention_ops": 0, "kernels": 0,
                 "memory_ops": {}} for ph in PHASES}


def model_totals(work, accumulate_share=1.0):
    """Per phase from `hetplan model-info --work`: forward; backward = input + weight gradients,
    but for the add into the main gradients (grad_accumulation). `accumulate_share`: the share of
    micro-batches the model's gradient add is for (plain PyTorch with 2 micro-batches: 1/2), by
    which its bytes are divided to compare with one later micro-batch."""
    out = _empty_totals()
    phase = {"forward": "forward", "backward_input": "backward", "backward_weight": "backward"}
    for g in work["gemms"]:
        t = out[phase[g["pass"]]]
        t["gemm_flops"] += g["flops"]
        t["kernels"] += 1
    for m in work["memory_ops"]:
        accumulate = m["kernel"] == "grad_accumulate"
        t = out["grad_accumulation" if accumulate else phase[m["pass"]]]
        share = accumulate_share if accumulate else 1.0
        t["memory_bytes"] += m["bytes"] / share
        t["kernels"] += m.get("launches", 1) / share
        t["memory_ops"][m["kernel"]] = t["memory_ops"].get(m["kernel"], 0.0) + m["bytes"]
    for a in work["attention"]:
        t = out[phase[a["pass"]]]
        t["attention_ops"] += 1
        t["kernels"] += 1
    return out


def harness_totals(events):
    out = _empty_totals()
    for e in events:
        t = out[e.phase]
        t["kernels"] += 1
        if e.kind == "gemm":
            t["gemm_flops"] += e.flops
        elif e.kind == "attention":
            t["attention_ops"] += 1
        else:
            t["memory_bytes"] += e.bytes
            t["memory_ops"][e.op] = t["memory_ops"].get(e.op, 0.0) + e.bytes
    return out


def compare(info_with_work, micro_batch, device="cpu", layers=None, style="reference"):
    """Harness against model for each distinct layer: a list of
    {"index", "name", "kind", "model": totals, "harness": totals}. With style "pytorch" the
    harness's layer is the plain-PyTorch one, traced at a micro-batch after the first (whose
    gradients autograd adds into .grad); "first_micro_batch" holds the first one's totals (no
    gradient add). The model's work must then be of `--framework pytorch --microbatches 2`."""
    if device == "cpu" or not hasattr(harness_model.F, "scaled_dot_product_attention"):
        standin = cuda_like_standins()
    else:
        standin = contextlib.nullcontext()
    results = []
    share = 0.5 if style == "pytorch" else 1.0  # one of the two micro-batches adds
    with standin:
        for i in layers if layers is not None else distinct_layers(info_with_work):
            layer = info_with_work["layers"][i]
            entry = {"index": i, "name": layer["name"], "kind": layer["kind"],
                     "model": model_totals(layer["work"], share)}
            if style == "pytorch":
                first, events = trace_layer_plain(info_with_work, i, micro_batch, device=device)
                entry["first_micro_batch"] = harness_totals(first)
            else:
                events = trace_layer(info_with_work, i, micro_batch, device=device)
            entry["harness"] = harness_totals(events)
            entry["events"] = [e.as_dict() for e in events]
            results.append(entry)
    return results


# ---------------------------------------------------------------------------------------------
# Op families (costmodel/framework.h: rmsnorm, rotary, swiglu, softmax, cross_entropy) as a style
# of the harness runs them, traced alone: what a framework file's `ops` section says of them.


def _saved_created(run, before):
    """Runs `run` under saved-tensor hooks; returns the tensors autograd saved for backward that
    `run` created (by storage, each once): not its inputs, parameters or tables (`before`)."""
    seen = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else \
            t.storage().data_ptr()
        if ptr not in before and ptr not in seen:
            seen[ptr] = t
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = run()
    return out, list(seen.values())


def _storage_ptr(t):
    return t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else \
        t.storage().data_ptr()


def _values(events, elements):
    """Launches and values per element ({act, fp32, bytes}) of `events`: 2-byte elements are
    activation values (bf16), 4-byte ones fp32 (8-byte ones two), 1-byte ones single bytes."""
    sizes = _merge(*(e.by_size for e in events))
    # An 8-byte element is a complex64 (torchtitan's rotary): two fp32 values.
    return {"launches": len(events), "act_values": sizes.get(2, 0.0) / 2 / elements,
            "fp32_values": (sizes.get(4, 0.0) + sizes.get(8, 0.0)) / 4 / elements,
            "bytes": sizes.get(1, 0.0) / elements}


class _KeptByAttention(torch.autograd.Function):
    """Stands for the attention that consumes rotary's Q and K: saves them, as SDPA does."""

    @staticmethod
    def forward(ctx, q, k):
        ctx.save_for_backward(q, k)
        return q.view_as(q), k.view_as(k)

    @staticmethod
    def backward(ctx, dq, dk):
        return dq, dk


def _family_runs(style, family, tokens, hidden, f, heads, kv, head_dim, vocab, seq):
    """(forward callable of the inputs, inputs, element count, parameters) of one family."""
    from . import plain
    bf16 = torch.bfloat16
    act_dtype = torch.float32 if style == "pytorch" else bf16  # the stream's type
    gen = torch.Generator().manual_seed(0)

    def leaf(*shape, dtype=bf16):
        return torch.randn(*shape, generator=gen).to(dtype).requires_grad_()

    if style == "torchtitan":
        return _torchtitan_runs(family, leaf, gen, tokens, hidden, f, heads, kv, head_dim, vocab,
                                seq)
    if family == "rmsnorm":
        x = leaf(tokens, hidden, dtype=act_dtype)
        if style == "pytorch":
            norm = plain.RMSNorm(hidden)
            return (lambda: norm(x)), [x], tokens * hidden, [norm.weight]
        w = torch.ones(hidden, dtype=bf16, requires_grad=True)
        return (lambda: harness_model.RMSNormFunction.apply(x, w, 1e-5)), [x], tokens * hidden, [w]
    if family == "swiglu":
        x = leaf(tokens, 2 * f)
        if style == "pytorch":
            def run():
                gate, up = x.chunk(2, dim=-1)
                return F.silu(gate) * up
            return run, [x], tokens * f, []
        return (lambda: harness_model.SwiGLUFunction.apply(x)), [x], tokens * f, []
    if family == "rotary":
        b = tokens // seq
        q, k = leaf(b, seq, heads, head_dim), leaf(b, seq, kv, head_dim)
        if style == "pytorch":
            rope = plain.Rope(seq, head_dim, "cpu", act_dtype)

            def run():  # then SDPA's autocast casts the fp32 results back to bf16, and SDPA
                rq, rk = plain.apply_rotary(q, k, rope)  # keeps those casts
                return _KeptByAttention.apply(rq.to(bf16), rk.to(bf16))
            return run, [q, k], tokens * (heads + kv) * head_dim, [rope.cos, rope.sin]
        tables = harness_model.RopeTables(seq, head_dim, "cpu", bf16)
        return (lambda: harness_model.RotaryFunction.apply(q, k, tables)), [q, k], \
            tokens * (heads + kv) * head_dim, [tables.cos, tables.sin]
    if family == "cross_entropy":
        logits = leaf(tokens, vocab)
        target = torch.randint(0, vocab, (tokens,), generator=gen)
        if style == "pytorch":
            return (lambda: F.cross_entropy(logits.float(), target)), [logits, target], \
                tokens * vocab, []
        return (lambda: harness_model.CrossEntropyFunction.apply(logits, target)), \
            [logits, target], tokens * vocab, []
    if family == "softmax":
        b = tokens // seq
        scores = leaf(b, heads, seq, seq)
        mask = torch.ones(seq, seq, dtype=torch.bool).triu_(1)
        if style == "pytorch":
            def run():
                masked = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
                return F.softmax(masked, dim=-1, dtype=torch.float32).to(bf16)
            return run, [scores], b * heads * seq * seq, [mask]
        return (lambda: torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)), \
            [scores], b * heads * seq * seq, [mask]
    raise ValueError(f"unknown op family {family!r}")


def _torchtitan_runs(family, leaf, gen, tokens, hidden, f, heads, kv, head_dim, vocab, seq):
    """The families as torchtitan's model code runs them in eager mode (torchtitan b5bcd76c66d0,
    torchtitan/models/common: nn.RMSNorm, complex rotary, w2(silu(w1 x) * w3 x); the loss
    F.cross_entropy(pred.float(), reduction="sum"), components/loss.py), on bf16 activations:
    FSDP2's MixedPrecisionPolicy(param_dtype=bfloat16) gathers bf16 parameters, no autocast.
    nn.RMSNorm is written out as ATen's composite rms_norm (aten/src/ATen/native/layer_norm.cpp:
    upcast, pow, mean, add_, rsqrt, mul, type_as, the gain), which torch 1.13 lacks."""
    bf16 = torch.bfloat16
    if family == "rmsnorm":
        x = leaf(tokens, hidden)
        w = torch.ones(hidden, dtype=bf16, requires_grad=True)

        def run():
            up = x.float()
            rstd = torch.rsqrt(up.pow(2).mean(-1, keepdim=True).add_(1e-6))
            return up.mul(rstd).type_as(x).mul(w)
        return run, [x], tokens * hidden, [w]
    if family == "swiglu":
        a, b = leaf(tokens, f), leaf(tokens, f)  # w1 x and w3 x: two GEMMs' outputs
        return (lambda: F.silu(a) * b), [a, b], tokens * f, []
    if family == "rotary":
        q, k = leaf(tokens // seq, seq, heads, head_dim), leaf(tokens // seq, seq, kv, head_dim)
        angles = torch.outer(torch.arange(seq, dtype=torch.float32),
                             1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim)))
        cis = torch.polar(torch.ones_like(angles), angles).view(1, seq, 1, head_dim // 2)

        def run():
            xq = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
            xk = torch.view_as_complex(k.float().reshape(*k.shape[:-1], -1, 2))
            return (torch.view_as_real(xq * cis).flatten(-2).type_as(q),
                    torch.view_as_real(xk * cis).flatten(-2).type_as(k))
        return run, [q, k], tokens * (heads + kv) * head_dim, [cis]
    if family == "cross_entropy":
        logits = leaf(tokens, vocab)
        target = torch.randint(0, vocab, (tokens,), generator=gen)
        return (lambda: F.cross_entropy(logits.float(), target, reduction="sum")), \
            [logits, target], tokens * vocab, []
    raise ValueError(f"torchtitan runs no {family!r} of its own (its attention is fused)")


FAMILIES = ("rmsnorm", "rotary", "swiglu", "softmax", "cross_entropy")
STYLE_FAMILIES = {"pytorch": FAMILIES, "reference": FAMILIES,
                  "torchtitan": ("rmsnorm", "rotary", "swiglu", "cross_entropy")}


def family_recipe(style, family, tokens=2048, hidden=1024, f=96, heads=4, kv=2, head_dim=16,
                  vocab=2048, seq=32):
    """What `style` runs for `family`: per pass (forward, backward, and weight for a norm's gain)
    its kernels and values moved per element, and what it keeps for backward beyond its inputs
    (`kept`, per element). Traced alone on the CPU: forward under autocast for the pytorch style,
    backward outside it, with the gain first frozen (its gradient's operators are what the
    weight pass adds)."""
    from . import plain
    out = {}
    for with_weight in (False, True):
        run, inputs, elements, params = _family_runs(style, family, tokens, hidden, f, heads, kv,
                                                     head_dim, vocab, seq)
        for p in params:
            if p.requires_grad:
                p.requires_grad_(with_weight)
        before = {_storage_ptr(t) for t in inputs + params}
        ctx = plain.autocast("cpu") if style == "pytorch" else contextlib.nullcontext()
        with tracing() as trace:
            with ctx:
                result, saved = _saved_created(run, before)
            trace.phase = "backward"
            results = result if isinstance(result, tuple) else (result,)
            with trace.suspend():
                grads = [torch.randn(r.shape).to(r.dtype) for r in results]
            torch.autograd.backward(results, grads)
        forward = [e for e in trace.events if e.phase == "forward"]
        backward = [e for e in trace.events if e.phase == "backward"]
        if not with_weight:
            out["forward"] = _values(forward, elements)
            out["backward"] = _values(backward, elements)
            continue
        # What it keeps with the gain trainable (a frozen gain's product keeps less).
        kept = _merge(*(_by_size([t]) for t in saved))
        out["kept"] = {"act_values": kept.get(2, 0.0) / 2 / elements,
                       "fp32_values": kept.get(4, 0.0) / 4 / elements,
                       "bytes": kept.get(1, 0.0) / elements}
        if any(p.requires_grad for p in params):
            # The weight pass: what the backward adds when the gain needs its gradient.
            both = _values(backward, elements)
            w = {k: both[k] - out["backward"][k] for k in both}
            out["weight"] = w
    return out
