# SPDX-License-Identifier: Apache-2.0
"""One rank of a tiny PyTorch DDP job on CPU (gloo), as srun or torchrun starts it.

Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT (env://),
all-reduces rank+1, trains nn.Linear(4, 1) a few SGD steps under DDP from a
different initial model on every rank, and checks that every rank ends with
rank 0's parameters. Prints `rank R/W local L ok allreduce=S` and exits 0, or
says what differs and exits 1.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

STEPS = 3


def main():
    torch.set_num_threads(1)  # a few ranks share two cores
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    # A rank that never meets the others fails in a minute, not in gloo's 30.
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=60))
    problems = []
    if (dist.get_rank(), dist.get_world_size()) != (rank, world):
        problems.append(f"process group says rank {dist.get_rank()}/{dist.get_world_size()}")

    total = torch.tensor([rank + 1.0])
    dist.all_reduce(total)
    expected = world * (world + 1) // 2
    if int(total.item()) != expected:
        problems.append(f"allreduce={total.item():g}, not {expected}")

    # A different initial model on every rank: DDP must start them all from
    # rank 0's, then keep them equal while each rank trains on its own data.
    torch.manual_seed(rank)
    model = DistributedDataParallel(nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    initial = [p.detach().clone() for p in model.parameters()]
    for _ in range(STEPS):
        x = torch.randn(8, 4)
        loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    if torch.equal(params, torch.cat([p.flatten() for p in initial])):
        problems.append("training did not change the parameters")
    reference = params.clone()
    dist.broadcast(reference, src=0)
    if not torch.equal(params, reference):
        problems.append(f"parameters {params.tolist()} differ from rank 0's {reference.tolist()}")

    dist.barrier()
    dist.destroy_process_group()
    verdict = f"MISMATCH: {'; '.join(problems)}" if problems else f"ok allreduce={int(total.item())}"
    say(f"rank {rank}/{world} local {local} {verdict}")
    return 1 if problems else 0


def say(line):
    """Writes LINE whole: the workers of one torchrun share its stdout, and
    print() under PYTHONUNBUFFERED writes the newline apart from the text."""
    os.write(sys.stdout.fileno(), (line + "\n").encode())


if __name__ == "__main__":
    sys.exit(main())
