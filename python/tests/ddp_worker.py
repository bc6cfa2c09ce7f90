"""One rank of the DDP test (test_ddp.py): a module of its own so that processes started by
``spawn`` can import it."""

import json
import os

import numpy as np


def record_ids(images):
    """Record i of the DDP fixture carries i in its first two bytes."""
    flat = images.reshape(len(images), -1).astype(np.int64)
    return (flat[:, 0] | (flat[:, 1] << 8)).tolist()


def rank_main(rank, world, port, data_dir, out_dir, contexts, env_only):
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    from packer_reader.torch import PackerIterableDataset

    if env_only:  # torchrun-style: RANK / WORLD_SIZE in the environment, no process group
        os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(world)
    else:
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        ds = PackerIterableDataset(data_dir, batch_size=8, shuffle=True, seed=5, num_workers=2)
        out = []
        for epoch, ctx in enumerate(contexts):
            ds.set_epoch(epoch)
            loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=ctx)
            ids, batches = [], 0
            for x, y in loader:
                ids += record_ids(x.numpy())
                batches += 1
            out.append({"context": ctx, "ids": ids, "batches": batches, "len": len(loader)})
        with open(os.path.join(out_dir, "rank%d.json" % rank), "w") as f:
            json.dump(out, f)
    finally:
        if not env_only:
            dist.destroy_process_group()
