"""One rank of tests/python/test_parallel_harness.py: trains a model data-parallel on the CPU
(Gloo) for a few steps at each ZeRO level asked for, and saves what the test compares.

  RANK=r WORLD_SIZE=n MASTER_ADDR=... MASTER_PORT=... \\
      python3 parallel_worker.py MODEL_INFO STRATEGY STEPS OUT ZERO [ZERO ...]

Writes OUT.rank<r>.pt: {zero: {"master": fp32 master weights of the whole model,
"param": the bf16 weights as fp32}} (the padding the ZeRO shards need cut off).
"""

import os
import sys

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from reference import parallel, spec, train  # noqa: E402


def main(info_path, strategy_path, steps, out, *zeros):
    info = spec.load_model_info(info_path)
    base = spec.load_strategy(strategy_path)
    rank, world, device = parallel.setup("cpu")
    group = parallel.Group(device)
    total = train.expected_parameters(info, 1)
    saved = {}
    for zero in zeros:
        cfg = train.Config(info, dict(base, zero=int(zero)), "test")
        run = parallel.make_run(cfg, device, group, seed=0)
        for _ in range(int(steps)):
            run.step()
        saved[int(zero)] = {"master": run.master_weights()[:total],
                            "param": run.opt.flat_param[:total].float()}
        run.close()
    torch.save(saved, f"{out}.rank{rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
