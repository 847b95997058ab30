"""Several GPUs under torchrun: data, tensor or pipeline parallelism (one of them at a time).

UNTESTED: written without a multi-GPU machine; the single-GPU path (train.py) is the measured one.
What each path does, and where it departs from what hetplan predicts:
  - dp (tp = pp = 1): the single-GPU precision layout on every rank; the flat fp32 gradient buffer
    is all-reduced after the last micro-batch (hetplan assumes the reduction overlaps the last
    backward, so this path measures an upper bound). ZeRO-1/2: reduce-scatter of the flat buffer,
    each rank steps its shard of fp32 master weights and moments, then all-gathers the bf16
    weights (ZeRO-2 keeps the full gradient buffer for gradient accumulation, as Megatron-LM's
    distributed optimizer does). ZeRO-3 is not supported.
  - tp (dp = pp = 1): torch.distributed.tensor.parallel, column-parallel QKV and fc1, row-parallel
    output projections and fc2; embedding and LM head replicated (hetplan splits them by
    vocabulary); bf16 weights with a plain fused AdamW on them (12 B per parameter, not 18).
  - pp (dp = tp = 1): torch.distributed.pipelining with the strategy's layer ranges (or an even
    split), schedules gpipe, 1f1b and interleaved; tied embeddings are untied across stages.
"""

import os

import torch
import torch.distributed as dist
from torch import nn

from . import spec
from .model import CrossEntropyFunction, Model, init_weights
from .train import MixedPrecisionAdam, build_model, distribution


def _setup():
    if not dist.is_initialized():
        dist.init_process_group("nccl")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    return dist.get_rank(), dist.get_world_size(), torch.device("cuda", local)


class ShardedAdam(MixedPrecisionAdam):
    """ZeRO-1/2 over the data-parallel group: each rank owns 1/dp of the flat buffer's fp32
    master weights and moments."""

    def __init__(self, model, world, rank):
        self.rank, self.world = rank, world
        super().__init__(model, pad_to=world)

    def make_optimizer(self, lr, weight_decay):
        self.shard = self.numel // self.world
        lo = self.rank * self.shard
        self.master = self.flat_param[lo:lo + self.shard].detach().float().clone()
        self.master.grad = torch.empty_like(self.master)
        return self.adamw([self.master], lr, weight_decay)

    def step(self):
        dist.reduce_scatter_tensor(self.master.grad, self.flat_grad, op=dist.ReduceOp.AVG)
        self.opt.step()
        lo = self.rank * self.shard
        with torch.no_grad():
            self.flat_param[lo:lo + self.shard].copy_(self.master)
        dist.all_gather_into_tensor(self.flat_param, self.flat_param[lo:lo + self.shard].clone())
        self.flat_grad.zero_()


def _data(info, s, device, seed, batch):
    gen = torch.Generator(device=device).manual_seed(seed)
    vocab, seq = info["layers"][0]["vocab"], info["seq_len"]
    return (torch.randint(0, vocab, (batch, seq), device=device, generator=gen),
            torch.randint(0, vocab, (batch, seq), device=device, generator=gen))


def _time(step, warmup, iters, budget_s):
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.reset_peak_memory_stats()
    samples = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        t = torch.tensor([start.elapsed_time(end) / 1e3], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank sets the iteration
        samples.append(float(t))
        if sum(samples) > budget_s and len(samples) >= 3:
            break
    return samples


def _data_parallel(cfg, device, rank, world, seed):
    s = cfg.strategy
    if s["zero"] >= 3:
        raise RuntimeError("ZeRO-3 is not supported by the reference harness")
    model = build_model(cfg.info, device, flash=s["flash_attention"], recompute=s["recompute"])
    opt = ShardedAdam(model, world, rank) if s["zero"] >= 1 else MixedPrecisionAdam(model)
    m = spec.microbatches(s)
    batches = [_data(cfg.info, s, device, seed + 1000 * rank + i, s["micro_batch"])
               for i in range(m)]

    def step():
        for tokens, target in batches:
            (model(tokens, target) / m).backward()
        if s["zero"] == 0:
            dist.all_reduce(opt.flat_grad, op=dist.ReduceOp.AVG)
        opt.step()

    return step


def _tensor_parallel(cfg, device, world, seed):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)
    s = cfg.strategy
    mesh = init_device_mesh("cuda", (world,))
    model = build_model(cfg.info, device, tp=world, flash=s["flash_attention"],
                        recompute=s["recompute"])
    for block in model.blocks:
        parallelize_module(block, mesh, {"attention.qkv": ColwiseParallel(),
                                         "attention.out": RowwiseParallel(),
                                         "mlp.fc1": ColwiseParallel(),
                                         "mlp.fc2": RowwiseParallel()})
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    m = spec.microbatches(s)
    batches = [_data(cfg.info, s, device, seed + i, s["micro_batch"]) for i in range(m)]

    def step():
        for tokens, target in batches:
            (model(tokens, target) / m).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


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


def _pipeline(cfg, device, rank, world, seed):
    from torch.distributed import pipelining as pl
    s = cfg.strategy
    n_layers = len(cfg.info["layers"])
    chunks = s["chunks"] if s["schedule"] == "interleaved" else 1
    virtual = world * chunks
    if s.get("stages") and chunks == 1:
        ranges = [tuple(st["layers"]) for st in s["stages"]]
    else:
        per = [n_layers // virtual + (i < n_layers % virtual) for i in range(virtual)]
        starts = [sum(per[:i]) for i in range(virtual)]
        ranges = [(starts[i], starts[i] + per[i] - 1) for i in range(virtual)]
    with torch.device("meta"):
        full = Model(cfg.info, flash=s["flash_attention"], recompute=s["recompute"])
    stages, params = [], []
    mb, seq, hidden = s["micro_batch"], cfg.info["seq_len"], cfg.info["layers"][0]["hidden"]
    for v in range(rank, virtual, world):
        module = _Stage(full, ranges[v][0], ranges[v][1], n_layers)
        module = module.to(dtype=torch.bfloat16).to_empty(device=device)
        init_weights(module)
        # An example input of one micro-batch (torch 2.4 needs it; later versions infer it).
        example = torch.zeros(mb, seq, dtype=torch.long, device=device) if ranges[v][0] == 0 \
            else torch.zeros(mb, seq, hidden, dtype=torch.bfloat16, device=device)
        stages.append(pl.PipelineStage(module, v, virtual, device, input_args=(example,)))
        params.append(module)
    holder = nn.ModuleList(params)
    opt = MixedPrecisionAdam(holder)
    m = spec.microbatches(s)

    def loss_fn(logits, target):
        return CrossEntropyFunction.apply(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))

    kinds = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B",
             "interleaved": "ScheduleInterleaved1F1B"}
    if s["schedule"] not in kinds:
        raise RuntimeError(f"schedule {s['schedule']} is not available in the reference harness "
                           "(gpipe, 1f1b, interleaved are)")
    schedule_cls = getattr(pl, kinds[s["schedule"]])
    schedule = schedule_cls(stages if chunks > 1 else stages[0], n_microbatches=m, loss_fn=loss_fn)
    tokens, target = _data(cfg.info, s, device, seed, m * s["micro_batch"])

    def step():
        if rank == 0:
            schedule.step(tokens)
        elif rank == world - 1:
            schedule.step(target=target)
        else:
            schedule.step()
        opt.step()

    return step


def run_distributed(cfg, warmup, iters, budget_s, seed=0):
    rank, world, device = _setup()
    # Gradients are added into fp32 main gradients by kernels of their own (as on one GPU).
    s = dict(cfg.strategy, grad_accumulation_fusion=False)
    result = {"model": cfg.model_name, "strategy": s, "source": "measured:pytorch",
              "oom": False, "notes": "multi-GPU path of the reference harness (untested)"}
    if cfg.cluster:
        result["cluster"] = cfg.cluster
    parallel = [k for k in ("dp", "tp", "pp") if s[k] > 1]
    try:
        if len(parallel) != 1:
            raise RuntimeError("the reference harness runs one kind of parallelism at a time "
                               f"(this strategy has {', '.join(parallel)})")
        torch.manual_seed(seed)
        if s["dp"] > 1:
            step = _data_parallel(cfg, device, rank, world, seed)
        elif s["tp"] > 1:
            step = _tensor_parallel(cfg, device, world, seed)
        else:
            step = _pipeline(cfg, device, rank, world, seed)
        samples = _time(step, warmup, iters, budget_s)
        peak = torch.tensor([float(torch.cuda.max_memory_allocated())], device="cuda")
        peaks = [torch.zeros_like(peak) for _ in range(world)]
        dist.all_gather(peaks, peak)
        result["iteration_s"] = distribution(samples)
        result["iteration_samples_s"] = samples
        result["warmup_iterations"] = warmup
        result["peak_memory_bytes"] = [float(p) for p in peaks]
        result["peak_memory_kind"] = "allocated"
    except torch.cuda.OutOfMemoryError:
        result["oom"] = True
    except Exception as e:  # noqa: BLE001 (recorded, as on one GPU)
        result["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
    # Every rank must agree on the outcome for the file rank 0 writes.
    flag = torch.tensor([1.0 if result["oom"] else 0.0], device="cuda")
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    if flag.item() > 0 and "iteration_s" in result:
        for key in ("iteration_s", "iteration_samples_s", "warmup_iterations",
                    "peak_memory_bytes", "peak_memory_kind"):
            result.pop(key, None)
        result["oom"] = True
    return result
