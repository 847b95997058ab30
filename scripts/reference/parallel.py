"""Several GPUs under torchrun: data, tensor or pipeline parallelism (one of them at a time).

Each rank is one process (torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT). On GPUs the
ranks talk over NCCL; with `--device cpu` over Gloo, which is how the tests run these paths on a
machine without GPUs (tests/python/test_parallel_harness.py: dp with ZeRO 0-2 trains to the same
weights as one process on the union of the ranks' batches). What each path does, and where it
departs from what hetplan predicts:
  - dp (tp = pp = 1): the single-GPU precision layout on every rank, rank 0's initial weights
    broadcast; the flat fp32 gradient buffer is all-reduced after the last micro-batch (hetplan
    assumes the reduction overlaps the last backward, so this path measures an upper bound).
    ZeRO-1/2: reduce-scatter of the flat buffer, each rank steps its shard of fp32 master weights
    and moments, then all-gathers the bf16 weights (ZeRO-2 keeps the full gradient buffer for
    gradient accumulation, as Megatron-LM's distributed optimizer does). ZeRO-3 is not supported.
  - tp (dp = pp = 1): torch.distributed.tensor.parallel (torch >= 2.2), column-parallel QKV and
    fc1, row-parallel output projections and fc2; embedding and LM head replicated (hetplan splits
    them by vocabulary); bf16 weights with a plain AdamW on them (12 B per parameter, not 18).
  - pp (dp = tp = 1): torch.distributed.pipelining (torch >= 2.4) with the strategy's layer ranges
    (or an even split), schedules gpipe, 1f1b and interleaved; tied embeddings are untied across
    stages.
Every path times its steps as the slowest rank's, and keeps the SM clock record of the slowest-
clocked rank (clocks.StepClocks on each, clocks.slowest_rank over them).
The dp path runs in the tests wherever torch has Gloo; tp and pp need the newer torch and have
not run yet (their tests skip on older ones); none of the three has run on several GPUs.
"""

import os
import time

import torch
import torch.distributed as dist
from torch import nn

from . import clocks, spec
from .model import CrossEntropyFunction, Model, init_weights
from .train import Device, MixedPrecisionAdam, build_model, distribution


class Group:
    """The collectives the paths need, over the default process group. NCCL runs them as they
    are; Gloo (the CPU) has no reduce-scatter, no all-gather into one tensor, no AVG and no bf16,
    so there the same results come from an all-reduce and an all-gather of byte views."""

    def __init__(self, device):
        self.nccl = device.type == "cuda"
        self.device = device
        self.rank, self.world = dist.get_rank(), dist.get_world_size()

    def _bytes(self, t):
        return t if self.nccl or t.dtype not in (torch.bfloat16, torch.float16) \
            else t.view(torch.uint8)

    def mean_all_reduce(self, t):
        if self.nccl:
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
        else:
            dist.all_reduce(t)
            t.div_(self.world)

    def mean_reduce_scatter(self, out, full):
        """out = this rank's 1/world of the mean of `full` over the ranks."""
        if self.nccl:
            dist.reduce_scatter_tensor(out, full, op=dist.ReduceOp.AVG)
            return
        total = full.clone()
        dist.all_reduce(total)
        n = out.numel()
        out.copy_(total[self.rank * n:(self.rank + 1) * n]).div_(self.world)

    def all_gather(self, full, part):
        """full = the ranks' parts one after the other (part may be a view into full: copied
        first, so that no input aliases the output)."""
        part = part.clone()
        if self.nccl:
            dist.all_gather_into_tensor(full, part)
            return
        dist.all_gather(list(self._bytes(full).chunk(self.world)), self._bytes(part))

    def broadcast(self, t, src=0):
        dist.broadcast(self._bytes(t), src)

    def maximum(self, value):
        t = torch.tensor([float(value)], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t)

    def gather_floats(self, value):
        t = torch.tensor([float(value)], dtype=torch.float64, device=self.device)
        out = [torch.zeros_like(t) for _ in range(self.world)]
        dist.all_gather(out, t)
        return [float(x) for x in out]


def setup(device_kind="cuda"):
    """Joins the process group torchrun describes; returns (rank, world, device)."""
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device_kind == "cuda" else "gloo")
    if device_kind != "cuda":
        return dist.get_rank(), dist.get_world_size(), torch.device("cpu")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    return dist.get_rank(), dist.get_world_size(), torch.device("cuda", local)


class ShardedAdam(MixedPrecisionAdam):
    """ZeRO-1/2 over the data-parallel group: each rank owns 1/dp of the flat buffer's fp32
    master weights and moments (the buffers are padded to a multiple of dp)."""

    def __init__(self, model, group, **kw):
        self.group = group
        super().__init__(model, pad_to=group.world, **kw)

    def shard_bounds(self):
        n = self.numel // self.group.world
        return self.group.rank * n, (self.group.rank + 1) * n

    def make_optimizer(self, lr, weight_decay):
        lo, hi = self.shard_bounds()
        self.master = self.flat_param[lo:hi].detach().float().clone()
        self.master.grad = torch.empty_like(self.master)
        return self.adamw([self.master], lr, weight_decay)

    def step(self):
        self.group.mean_reduce_scatter(self.master.grad, self.flat_grad)
        self.opt.step()
        lo, hi = self.shard_bounds()
        with torch.no_grad():
            self.flat_param[lo:hi].copy_(self.master)
        self.group.all_gather(self.flat_param, self.flat_param[lo:hi])
        self.flat_grad.zero_()


def batch(info, device, seed, size):
    """Random tokens and targets of `size` sequences, from a generator seeded with `seed`."""
    gen = torch.Generator(device=device).manual_seed(seed)
    vocab, seq = info["layers"][0]["vocab"], info["seq_len"]
    return (torch.randint(0, vocab, (size, seq), device=device, generator=gen),
            torch.randint(0, vocab, (size, seq), device=device, generator=gen))


def rank_batches(info, strategy, device, seed, rank):
    """The micro-batches data-parallel rank `rank` trains on in every step."""
    return [batch(info, device, seed + 1000 * rank + i, strategy["micro_batch"])
            for i in range(spec.microbatches(strategy))]


def _time(step, warmup, iters, budget_s, dev, group):
    """(samples, clock): iteration seconds of the slowest rank, after `warmup` steps; at least 3,
    at most `iters`, fewer once their sum passes `budget_s`; and this rank's SM clock while they
    ran (clocks.StepClocks)."""
    for _ in range(warmup):
        step()
    dev.sync()
    dist.barrier()
    dev.reset_peak()
    samples = []
    with clocks.StepClocks(torch, dev.device) as clock:
        for _ in range(iters):
            start, stop, seconds = dev.timer()
            dev.timed_step(step, start, stop)
            dev.sync()
            samples.append(group.maximum(seconds()))  # the slowest rank sets the iteration
            if sum(samples) > budget_s and len(samples) >= 3:
                break
    return samples, clock


class DataParallel:
    """dp ranks, each with the whole model and its own micro-batches; gradients averaged."""

    def __init__(self, cfg, device, group, seed, lr=1e-4):
        s = cfg.strategy
        if s["zero"] >= 3:
            raise RuntimeError("ZeRO-3 is not supported by the reference harness")
        self.model = build_model(cfg.info, device, flash=s["flash_attention"],
                                 recompute=s["recompute"])
        self.group = group
        self.zero = s["zero"]
        self.opt = ShardedAdam(self.model, group, lr=lr) if self.zero >= 1 \
            else MixedPrecisionAdam(self.model, lr=lr)
        group.broadcast(self.opt.flat_param)  # every rank starts from rank 0's weights
        if self.zero == 0:
            self.opt.master.copy_(self.opt.flat_param)
        else:
            lo, hi = self.opt.shard_bounds()
            self.opt.master.copy_(self.opt.flat_param[lo:hi])
        self.batches = rank_batches(cfg.info, s, device, seed, group.rank)

    def step(self):
        m = len(self.batches)
        for tokens, target in self.batches:
            (self.model(tokens, target) / m).backward()
            self.opt.after_backward()
        if self.zero == 0:
            self.group.mean_all_reduce(self.opt.flat_grad)
        self.opt.step()

    def master_weights(self):
        """The fp32 master weights of the whole model, on every rank (for the tests)."""
        if self.zero == 0:
            return self.opt.master.clone()
        full = torch.empty(self.opt.numel, dtype=torch.float32, device=self.opt.master.device)
        self.group.all_gather(full, self.opt.master)
        return full

    def close(self):
        self.opt.close()


class TensorParallel:
    """tp ranks sharing every block's GEMMs (Megatron-LM's column/row split)."""

    def __init__(self, cfg, device, group, seed):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                       parallelize_module)
        s = cfg.strategy
        mesh = init_device_mesh(device.type, (group.world,))
        self.model = build_model(cfg.info, device, tp=group.world, flash=s["flash_attention"],
                                 recompute=s["recompute"])
        for block in self.model.blocks:
            parallelize_module(block, mesh, {"attention.qkv": ColwiseParallel(),
                                             "attention.out": RowwiseParallel(),
                                             "mlp.fc1": ColwiseParallel(),
                                             "mlp.fc2": RowwiseParallel()})
        # The replicated embedding and head start equal on every rank.
        for p in list(self.model.embedding.parameters()) + list(self.model.head.parameters()):
            group.broadcast(p.data)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4,
                                     fused=device.type == "cuda")
        self.batches = [batch(cfg.info, device, seed + i, s["micro_batch"])
                        for i in range(spec.microbatches(s))]

    def step(self):
        m = len(self.batches)
        for tokens, target in self.batches:
            (self.model(tokens, target) / m).backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def close(self):
        pass


class _Stage(nn.Module):
    """A contiguous range of hetplan's layers; the last stage returns logits for the loss."""

    def __init__(self, full, first, last, n_layers):
        super().__init__()
        self.embedding = full.embedding if first == 0 else None
        self.blocks = nn.ModuleList(full.blocks[i - 1] for i in range(max(first, 1),
                                                                      min(last, n_layers - 2) + 1))
        self.head = full.head if last == n_layers - 1 else None
        if self.head is not None and self.embedding is None and self.head.output is None:
            rows, hidden = full.embedding.word.weight.shape
            with torch.device("meta"):  # untied across stages: the last stage gets its own table
                self.head.output = nn.Linear(hidden, rows, bias=False)
        self.recompute = full.recompute

    def forward(self, x):
        if self.embedding is not None:
            x = self.embedding(x)
        for block in self.blocks:
            x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False) \
                if self.recompute == "full" else block(x)
        if self.head is not None:
            h = self.head.final_norm(x)
            x = nn.functional.linear(h, self.head.weight(), self.head.output_bias)
        return x


def stage_ranges(strategy, n_layers, world):
    """[(first, last)] layer indices of every virtual stage: the strategy's own ranges, or as
    even as the layer count allows (the earlier stages one layer more)."""
    chunks = strategy["chunks"] if strategy["schedule"] == "interleaved" else 1
    if strategy.get("stages") and chunks == 1:
        return [tuple(st["layers"]) for st in strategy["stages"]]
    virtual = world * chunks
    per = [n_layers // virtual + (i < n_layers % virtual) for i in range(virtual)]
    starts = [sum(per[:i]) for i in range(virtual)]
    return [(starts[i], starts[i] + per[i] - 1) for i in range(virtual)]


SCHEDULES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B",
             "interleaved": "ScheduleInterleaved1F1B"}


class Pipeline:
    """pp ranks, each with its stages (round robin over the virtual stages when interleaved)."""

    def __init__(self, cfg, device, group, seed):
        from torch.distributed import pipelining as pl
        s = cfg.strategy
        if s["schedule"] not in SCHEDULES:
            raise RuntimeError(f"schedule {s['schedule']} is not available in the reference "
                               f"harness ({', '.join(SCHEDULES)} are)")
        rank, world = group.rank, group.world
        n_layers = len(cfg.info["layers"])
        ranges = stage_ranges(s, n_layers, world)
        virtual = len(ranges)
        if virtual % world:
            raise RuntimeError(f"{virtual} pipeline stages do not go evenly onto {world} ranks")
        with torch.device("meta"):
            full = Model(cfg.info, flash=s["flash_attention"], recompute=s["recompute"])
        stages, modules = [], []
        mb, seq, hidden = s["micro_batch"], cfg.info["seq_len"], cfg.info["layers"][0]["hidden"]
        for v in range(rank, virtual, world):
            module = _Stage(full, ranges[v][0], ranges[v][1], n_layers)
            module = module.to(dtype=torch.bfloat16).to_empty(device=device)
            init_weights(module)
            # An example input of one micro-batch (torch 2.4 needs it; later versions infer it).
            example = torch.zeros(mb, seq, dtype=torch.long, device=device) if ranges[v][0] == 0 \
                else torch.zeros(mb, seq, hidden, dtype=torch.bfloat16, device=device)
            stages.append(pl.PipelineStage(module, v, virtual, device, input_args=(example,)))
            modules.append(module)
        self.opt = MixedPrecisionAdam(nn.ModuleList(modules))
        m = spec.microbatches(s)

        def loss_fn(logits, target):
            return CrossEntropyFunction.apply(logits.reshape(-1, logits.shape[-1]),
                                              target.reshape(-1))

        schedule_cls = getattr(pl, SCHEDULES[s["schedule"]])
        self.schedule = schedule_cls(stages if s["schedule"] == "interleaved" else stages[0],
                                     n_microbatches=m, loss_fn=loss_fn)
        self.tokens, self.target = batch(cfg.info, device, seed, m * s["micro_batch"])
        # Rank 0 feeds the first stage; the rank holding the last stage computes the loss.
        self.first, self.last = rank == 0, (virtual - 1) % world == rank

    def step(self):
        kw = {}
        if self.last:
            kw["target"] = self.target
        if self.first:
            self.schedule.step(self.tokens, **kw)
        else:
            self.schedule.step(**kw)
        self.opt.after_backward()
        self.opt.step()

    def close(self):
        self.opt.close()


def make_run(cfg, device, group, seed):
    """The one kind of parallelism the strategy uses, built and ready to step."""
    s = cfg.strategy
    parallel = [k for k in ("dp", "tp", "pp") if s[k] > 1]
    if len(parallel) != 1:
        raise RuntimeError("the reference harness runs one kind of parallelism at a time "
                           f"(this strategy has {', '.join(parallel) or 'none'})")
    if s[parallel[0]] != group.world:
        raise RuntimeError(f"{parallel[0]} = {s[parallel[0]]} but this run has {group.world} "
                           "ranks")
    torch.manual_seed(seed)
    kinds = {"dp": DataParallel, "tp": TensorParallel, "pp": Pipeline}
    return kinds[parallel[0]](cfg, device, group, seed)


def run_distributed(cfg, warmup, iters, budget_s, seed=0, device_kind="cuda"):
    """Runs one configuration over the torchrun ranks; every rank returns the same measurement
    dict (rank 0 writes it)."""
    rank, world, device = setup(device_kind)
    group = Group(device)
    dev = Device(device)
    # Gradients are added into fp32 main gradients by kernels of their own (as on one GPU), and
    # reduced over the data-parallel ranks after the last micro-batch's backward.
    s = dict(cfg.strategy, grad_accumulation_fusion=False, overlap_grad_reduce=False)
    cfg.strategy = s
    notes = [f"{world} ranks over {'NCCL' if group.nccl else 'Gloo'}",
             "multi-GPU path of the reference harness (not yet run on several GPUs)"]
    result = {"model": cfg.model_name, "strategy": s, "source": "measured:pytorch", "oom": False}
    if cfg.cluster:
        result["cluster"] = cfg.cluster
    run = None
    oom = False
    try:
        run = make_run(cfg, device, group, seed)
        wall0 = time.perf_counter()
        samples, clock = _time(run.step, warmup, iters, budget_s, dev, group)
        # Every rank's clock record; the measurement keeps the slowest-clocked one.
        records = [None] * world
        dist.all_gather_object(records, clock.record)
        record, clock_note = clocks.slowest_rank(records)
        if record:
            result["clocks"] = record
            notes.append(clock_note)
        elif clock.note:
            notes.append(clock.note)
        notes.append(f"wall-clock {(time.perf_counter() - wall0) * 1e3:.0f} ms for warm-up and "
                     f"{len(samples)} timed steps")
        result["iteration_s"] = distribution(samples)
        result["iteration_samples_s"] = samples
        result["warmup_iterations"] = warmup
        if dev.cuda:
            # Gathered as float64 (exact below 2**53 bytes), written as whole bytes.
            result["peak_memory_bytes"] = [int(b) for b in group.gather_floats(dev.peaks()[0])]
            result["peak_memory_kind"] = "allocated"
        else:
            notes.append("CPU test run: times of the CPU, memory not measured")
    except torch.cuda.OutOfMemoryError:
        oom = True
    except Exception as e:  # noqa: BLE001 (recorded, as on one GPU)
        text = str(e).splitlines()[0][:300] if str(e) else ""
        result["error"] = f"{type(e).__name__}: {text}"
    finally:
        if run is not None:
            run.close()
    # Every rank must agree on the outcome for the file rank 0 writes: one rank out of memory
    # makes the configuration out of memory.
    if group.maximum(1.0 if oom else 0.0) > 0:
        for key in ("iteration_s", "iteration_samples_s", "warmup_iterations",
                    "peak_memory_bytes", "peak_memory_kind"):
            result.pop(key, None)
        result["oom"] = True
        notes.append("out of memory on at least one rank")
    result["notes"] = "; ".join(notes)
    return result
