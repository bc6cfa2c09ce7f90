"""One rank of the torchrun evenness test (test_ddp.py::test_torchrun_ranks_stay_in_step): a
training loop that does a gloo allreduce per batch, as DDP's backward does. A rank with an
extra batch would wait forever in it; the test's timeout catches that."""

import json
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

from packer_reader.torch import loader


def main(data_dir, out_dir, drop_last, workers, order_version):
    # The rendezvous and each allreduce wait up to this long for the slowest rank (the ranks
    # and their DataLoader workers share the machine's cores); a rank with an extra batch still
    # fails the job well within the test's 120 s.
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    ld = loader(data_dir, batch_size=32, shuffle=True, seed=3, drop_last=drop_last, device="cpu",
                num_workers=workers, order_version=order_version)
    sizes = []
    for x, _ in ld:
        t = torch.tensor([float(len(x))])
        dist.all_reduce(t)  # every rank must take part in each step
        sizes.append(len(x))
    dist.barrier()
    with open(os.path.join(out_dir, "rank%d.json" % rank), "w") as f:
        json.dump({"sizes": sizes, "len": len(ld), "world": world}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4]), int(sys.argv[5]))
