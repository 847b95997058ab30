"""One training configuration on one GPU: mixed precision as hetplan's memory model counts it, the
training step with gradient accumulation, and the measurement (warm-up, timed iterations with CUDA
events, peak memory, out-of-memory recorded as a result).

Two styles. `reference` (presets/frameworks/reference.yaml; costmodel/memory.h): bf16 parameters
(2 B), fp32 main gradients (4 B) accumulated by post-accumulate-grad hooks into one flat buffer,
fp32 master weights with AdamW's two moments (12 B) stepped by fused AdamW; 18 B per parameter,
Megatron-LM's layout. The bf16 gradient of a parameter lives only until its hook has added it to
the fp32 buffer. `pytorch` (presets/frameworks/pytorch.yaml; plain.py): fp32 parameters, each
micro-batch's forward under torch.autocast(bfloat16), its backward outside it, .grad accumulated
by autograd, torch.optim.AdamW(fused=True) on the fp32 parameters: 16 B per parameter.
"""

import contextlib
import gc
import math
import statistics
import time

import torch

from . import clocks, fused, plain, spec
from .model import Model, init_weights

STYLES = ("reference", "pytorch")


class MixedPrecisionAdam:
    """Flat buffers as Megatron-LM keeps them: every bf16 parameter is a view into one bf16
    buffer, its fp32 main gradient a view into one fp32 buffer, and fused AdamW steps one fp32
    master copy of the whole buffer (then one copy back to bf16 and one zeroing of the grads).
    `pad_to`: buffer lengths rounded up to a multiple (for sharding over data-parallel ranks)."""

    def __init__(self, model, lr=1e-4, weight_decay=0.1, pad_to=1):
        seen = set()
        self.params = []
        for p in model.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                self.params.append(p)
        total = sum(p.numel() for p in self.params)
        self.numel = (total + pad_to - 1) // pad_to * pad_to
        device = self.params[0].device
        self.flat_param = torch.zeros(self.numel, dtype=self.params[0].dtype, device=device)
        self.flat_grad = torch.zeros(self.numel, dtype=torch.float32, device=device)
        self.hooks = []
        self.use_hooks = hasattr(torch.Tensor, "register_post_accumulate_grad_hook")
        offset = 0
        with torch.no_grad():
            for p in self.params:
                n = p.numel()
                view = self.flat_param[offset:offset + n].view_as(p)
                view.copy_(p)
                p.data = view  # the parameter now lives in the flat buffer
                p.main_grad = self.flat_grad[offset:offset + n].view_as(p)
                offset += n
                if self.use_hooks:
                    self.hooks.append(p.register_post_accumulate_grad_hook(self._accumulate))
        self.fused = True
        self.opt = self.make_optimizer(lr, weight_decay)

    def make_optimizer(self, lr, weight_decay):
        self.master = torch.empty(self.numel, dtype=torch.float32, device=self.flat_param.device)
        self.master.copy_(self.flat_param)
        self.master.grad = self.flat_grad
        return self.adamw([self.master], lr, weight_decay)

    def adamw(self, params, lr, weight_decay):
        try:
            return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True)
        except (RuntimeError, TypeError, ValueError):
            self.fused = False
            return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)

    @staticmethod
    def _accumulate(p):
        p.main_grad.add_(p.grad)
        p.grad = None

    def after_backward(self):
        """Without post-accumulate hooks (torch < 2.1) the bf16 gradients are added here."""
        if self.use_hooks:
            return
        for p in self.params:
            if p.grad is not None:
                p.main_grad.add_(p.grad)
                p.grad = None

    def step(self):
        self.opt.step()
        with torch.no_grad():
            self.flat_param.copy_(self.master)
        self.flat_grad.zero_()

    def close(self):
        for h in self.hooks:
            h.remove()


def build_model(info, device, **kw):
    """The model in bf16 on `device`, allocated directly in bf16 (built on the meta device first,
    so that no fp32 copy ever exists) and initialised."""
    if not hasattr(torch.device, "__enter__"):  # torch < 2.0 (CPU tests only)
        model = Model(info, **kw).to(device=device, dtype=torch.bfloat16)
        init_weights(model)
        return model
    with torch.device("meta"):
        model = Model(info, **kw)
    model = model.to(dtype=torch.bfloat16).to_empty(device=device)
    init_weights(model)
    return model


class Device:
    """CUDA timing and memory statistics; on the CPU (tests of the harness only) wall-clock times
    and no memory figures."""

    def __init__(self, device):
        self.device = device
        self.cuda = device.type == "cuda"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def allocated(self):
        return torch.cuda.memory_allocated() if self.cuda else 0

    def reset_peak(self):
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()

    def peaks(self):
        if not self.cuda:
            return 0, 0
        return torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()

    def empty_cache(self):
        if self.cuda:
            torch.cuda.empty_cache()

    def timed_step(self, step, start, stop):
        """One step between a timer's two marks (on the CPU the marks are the wall clock, so
        the step is waited for first)."""
        start()
        step()
        if not self.cuda:
            self.sync()
        stop()

    def timer(self):
        """(start, stop, seconds): CUDA events, or the wall clock after a sync."""
        if self.cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            return a.record, b.record, lambda: a.elapsed_time(b) / 1e3
        marks = []
        return (lambda: marks.append(time.perf_counter()),
                lambda: marks.append(time.perf_counter()), lambda: marks[1] - marks[0])


def expected_parameters(info, tp):
    """hetplan's count with the vocabulary padded as the harness pads it."""
    layers = info["layers"]
    pad = info.get("vocab_pad_multiple", 128)
    extra_rows = spec.padded_vocab(layers[0]["vocab"], tp, pad) - layers[0]["vocab"]
    head = layers[-1]
    h = layers[0]["hidden"]
    extra = extra_rows * h
    if not head["tied"]:
        extra += extra_rows * head["hidden"]
    if head["output_bias"]:
        extra += extra_rows
    return info["parameters"] + extra


def distribution(samples):
    s = sorted(samples)

    def pct(q):
        pos = q * (len(s) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    return {"count": len(s), "median_s": pct(0.5), "min_s": s[0], "max_s": s[-1],
            "p10_s": pct(0.1), "p90_s": pct(0.9), "mean_s": statistics.fmean(s),
            "stddev_s": statistics.stdev(s) if len(s) > 1 else 0.0}


def sdpa_context(flash):
    """Prefer FlashAttention (what hetplan's attention efficiency describes) over cuDNN's."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return None
    if not flash:
        return None
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION])


class Config:
    """One (model, strategy) to run: the model-info document, the strategy, names for the file."""

    def __init__(self, info, strategy, model_name, cluster="", label="", style="reference"):
        if style not in STYLES:
            raise ValueError(f"style: expected one of {', '.join(STYLES)}, found {style!r}")
        self.style = style
        self.info = info
        self.strategy = strategy
        self.model_name = model_name
        self.cluster = cluster
        self.label = label or f"{model_name} mb{strategy['micro_batch']} " \
                              f"gb{strategy['global_batch']} s{info['seq_len']} " \
                              f"recompute {strategy['recompute']}"


def run_single_gpu(cfg, warmup, iters, budget_s, seed=0, log=print, device=None):
    """Runs one configuration on the current GPU (or `device`); returns a measurement dict
    (docs/formats.md)."""
    s, info = cfg.strategy, cfg.info
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device())
    dev = Device(device)
    result = {"model": cfg.model_name, "strategy": s, "source": "measured:pytorch", "oom": False,
              "notes": ""}
    if cfg.cluster:
        result["cluster"] = cfg.cluster
    notes = []
    pytorch = cfg.style == "pytorch"
    if s.get("grad_accumulation_fusion", True):
        # Eager PyTorch cannot make the weight-gradient GEMMs add into fp32 main gradients: the
        # harness adds them with kernels of their own, and says so in the strategy it ran.
        result["strategy"] = s = dict(s, grad_accumulation_fusion=False)
        notes.append("gradients accumulated into fp32 .grad by autograd" if pytorch else
                     "gradients added into the fp32 main gradients by kernels of their own "
                     "(grad_accumulation_fusion false)")
    if pytorch:
        notes.append("plain PyTorch: fp32 parameters, forward under torch.autocast(bfloat16), "
                     "eager RMSNorm, SwiGLU and rotary, F.cross_entropy on fp32 logits, .grad "
                     "accumulated by autograd")
    elif any("rmsnorm" in (layer.get("norm"), layer.get("final_norm"))
             or layer.get("activation") == "swiglu" or layer.get("rotary")
             for layer in info["layers"]):
        notes.append(fused.implementation(device))
    model = opt = data = None
    gc.collect()
    dev.empty_cache()
    baseline = dev.allocated()
    try:
        torch.manual_seed(seed)
        build = plain.build_model if pytorch else build_model
        model = build(info, device, flash=s["flash_attention"], recompute=s["recompute"])
        built = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
        expected = expected_parameters(info, 1)
        if built != expected:
            raise RuntimeError(f"the harness built {built} parameters, hetplan counts {expected} "
                               "(with the padded vocabulary): not the model hetplan predicts")
        opt = plain.AdamW(model) if pytorch else MixedPrecisionAdam(model)
        forward_context = (lambda: plain.autocast(device)) if pytorch else contextlib.nullcontext
        model.train()
        m = spec.microbatches(s)
        vocab = info["layers"][0]["vocab"]
        seq = info["seq_len"]
        gen = torch.Generator(device=device).manual_seed(seed)
        data = [(torch.randint(0, vocab, (s["micro_batch"], seq), device=device, generator=gen),
                 torch.randint(0, vocab, (s["micro_batch"], seq), device=device, generator=gen))
                for _ in range(m)]
        first_loss = []

        def step():
            for tokens, target in data:
                with forward_context():
                    loss = model(tokens, target) / m
                loss.backward()
                opt.after_backward()
                if not first_loss:
                    first_loss.append(loss.detach() * m)
            opt.step()

        # Plain PyTorch leaves SDPA its own choice of backend.
        ctx = sdpa_context(s["flash_attention"]) if dev.cuda and not pytorch else None
        if ctx is not None:
            ctx.__enter__()
        try:
            # Verify before timing: the first loss is finite and near ln(vocab) for random data.
            t0 = time.perf_counter()
            step()
            dev.sync()
            first_step_s = time.perf_counter() - t0
            loss0 = float(first_loss[0])
            if not math.isfinite(loss0) or not (0.5 * math.log(vocab) < loss0 < 2 * math.log(vocab)):
                raise RuntimeError(f"first loss {loss0:.3f} is not near ln(vocab) = "
                                   f"{math.log(vocab):.3f}: the training step is wrong")
            for _ in range(max(0, warmup - 1)):
                step()
            dev.sync()
            # Fewer timed iterations when they are slow (each configuration has a time budget).
            t0 = time.perf_counter()
            step()
            dev.sync()
            one_s = time.perf_counter() - t0
            n = max(3, min(iters, int(budget_s / max(one_s, 1e-6))))
            dev.reset_peak()
            timers = [dev.timer() for _ in range(n)]
            # The SM clock while the timed steps run (scripts/reference/clocks.py).
            with clocks.StepClocks(torch, device) as clock:
                wall0 = time.perf_counter()
                for start, stop, _ in timers:
                    dev.timed_step(step, start, stop)
                dev.sync()
                wall_s = (time.perf_counter() - wall0) / n
            if clock.record:
                result["clocks"] = clock.record
            elif clock.note:
                notes.append(clock.note)
        finally:
            if ctx is not None:
                ctx.__exit__(None, None, None)
        samples = [seconds() for _, _, seconds in timers]
        peak_allocated, reserved = dev.peaks()
        peak = peak_allocated - baseline
        result["iteration_s"] = distribution(samples)
        result["iteration_samples_s"] = samples
        result["warmup_iterations"] = warmup + 1
        if dev.cuda:
            result["peak_memory_bytes"] = [peak]
            result["peak_memory_kind"] = "allocated"
        else:
            notes.append("CPU test run: times of the CPU, memory not measured")
        notes += [f"reserved peak {reserved / 2**30:.2f} GiB",
                  f"wall-clock per iteration {wall_s * 1e3:.2f} ms",
                  f"first step {first_step_s:.2f} s", f"first loss {loss0:.3f}",
                  f"{m} micro-batches", "fused AdamW" if opt.fused else "AdamW (not fused)"]
        if not pytorch:
            notes.append("fp32 main grads by post-accumulate hooks" if opt.use_hooks
                         else "fp32 main grads added after each backward (torch < 2.1)")
        log(f"  {cfg.label}: {result['iteration_s']['median_s'] * 1e3:.1f} ms "
            f"(p10 {result['iteration_s']['p10_s'] * 1e3:.1f}, "
            f"p90 {result['iteration_s']['p90_s'] * 1e3:.1f}, {n} timed), "
            f"peak allocated {peak / 2**30:.2f} GiB")
    except torch.cuda.OutOfMemoryError as e:
        result["oom"] = True
        notes.append("out of memory: " + str(e).splitlines()[0][:200])
        log(f"  {cfg.label}: out of memory")
    except Exception as e:  # noqa: BLE001 (one failed configuration must not end the sweep)
        text = str(e).splitlines()[0][:300] if str(e) else ""
        result["error"] = f"{type(e).__name__}: {text}"
        log(f"  {cfg.label}: failed: {result['error']}")
    finally:
        if opt is not None:
            opt.close()
        model = opt = data = None
        gc.collect()
        dev.empty_cache()
    result["notes"] = "; ".join(notes)
    return result
