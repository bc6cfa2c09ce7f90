"""Distributed training as people run it: torch.multiprocessing.spawn starts the ranks (gloo
backend), and each rank's DataLoader starts its workers with ``spawn`` or ``forkserver``, where
torch.distributed is not initialised inside the worker. Every record must still be read exactly
once per epoch over all ranks and workers, and len() must match what each rank yields."""

import json
import os
import socket

import numpy as np
import pytest

import shardwriter
from conftest import CLASSES, SPEC, make_labels, require_torch

N = 203


@pytest.fixture(scope="module")
def ddp_dir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("ddp"))
    imgs = np.zeros((N, 4, 5, 3), dtype=np.uint8)
    imgs.reshape(N, -1)[:, 0] = np.arange(N) & 255
    imgs.reshape(N, -1)[:, 1] = np.arange(N) >> 8
    imgs.reshape(N, -1)[:, 2:] = 7
    shardwriter.write_dataset(d, list(imgs), make_labels(N), CLASSES, SPEC, shard_size=30 * 60, block_records=7)
    return d


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(tmp_path, data_dir, contexts, env_only=False):
    torch = require_torch()
    import torch.multiprocessing as mp

    import ddp_worker

    out = str(tmp_path)
    mp.spawn(ddp_worker.rank_main, args=(2, _free_port(), data_dir, out, contexts, env_only), nprocs=2, join=True)
    res = [json.load(open(os.path.join(out, "rank%d.json" % r))) for r in range(2)]
    for e, ctx in enumerate(contexts):
        a, b = res[0][e]["ids"], res[1][e]["ids"]
        assert not set(a) & set(b), "%s workers: ranks read %d records both" % (ctx, len(set(a) & set(b)))
        assert sorted(a + b) == list(range(N)), "%s workers: not every record exactly once" % ctx
        for r in range(2):
            assert res[r][e]["len"] == res[r][e]["batches"], "rank %d: len() %d, yielded %d batches" % (
                r, res[r][e]["len"], res[r][e]["batches"])
    if len(contexts) > 1:
        assert res[0][0]["ids"] != res[0][1]["ids"], "set_epoch did not reach the workers"
    return torch


def test_ddp_spawn_and_forkserver_workers(tmp_path, ddp_dir):
    _run(tmp_path, ddp_dir, ["spawn", "forkserver"])


def test_env_rank_spawn_workers(tmp_path, ddp_dir):
    _run(tmp_path, ddp_dir, ["spawn"], env_only=True)
