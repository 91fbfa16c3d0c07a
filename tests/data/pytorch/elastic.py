# SPDX-License-Identifier: Apache-2.0
"""One worker of a tiny elastic training run, as torchrun starts it.

    elastic.py CHECKPOINT STEPS

Joins the process group torchrun set up (gloo, env://), loads CHECKPOINT
when there is one (the model, the optimizer, the steps done), trains
nn.Linear(4, 1) under DDP up to STEPS steps, a step every 0.3 s, rank 0
saving the checkpoint after each one (written aside, then renamed, so that
a worker killed mid-write leaves the last whole one). Prints
`rank R/W starts at step S restart N on HOST` (N: SLURM_RESTART_COUNT),
`step S` after each of rank 0's saves, and `rank R/W done at step STEPS`.
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def main():
    checkpoint, steps = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1)  # a few workers share two cores
    # A worker whose peer vanished fails in a minute, not in gloo's 30.
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    start = 0
    if os.path.exists(checkpoint):
        state = torch.load(checkpoint)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
    print(f"rank {rank}/{world} starts at step {start} "
          f"restart {os.environ.get('SLURM_RESTART_COUNT', '0')} on {os.uname().nodename}",
          flush=True)
    for step in range(start, steps):
        x = torch.randn(8, 4)
        loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 0:
            torch.save({"model": model.module.state_dict(),
                        "optimizer": optimizer.state_dict(), "step": step + 1},
                       checkpoint + ".part")
            os.replace(checkpoint + ".part", checkpoint)
            print(f"step {step + 1}", flush=True)
        time.sleep(0.3)
    dist.barrier()
    print(f"rank {rank}/{world} done at step {steps}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
