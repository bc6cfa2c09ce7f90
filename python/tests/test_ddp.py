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
        # ORDER.md v2: every record once, plus the padding of the last batch (N is odd: one
        # record repeated so that both ranks' last batches have the same size)
        assert sorted(set(a + b)) == list(range(N)), "%s workers: not every record" % ctx
        assert len(a) == len(b) == (N + 1) // 2, "%s workers: ranks read %d and %d records" % (ctx, len(a), len(b))
        assert res[0][e]["batches"] == res[1][e]["batches"], "%s workers: the ranks' batch counts differ" % ctx
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


def _ids_dataset(d, n):
    imgs = np.zeros((n, 4, 5, 3), dtype=np.uint8)
    imgs.reshape(n, -1)[:, 0] = np.arange(n) & 255
    shardwriter.write_dataset(d, list(imgs), make_labels(n), CLASSES, SPEC, shard_size=30 * 60, block_records=7)
    return d


def torchrun_ranks(tmp_path, n, nproc, drop_last, workers, order_version=2, timeout=120):
    """Run ddp_even_worker.py under torchrun on gloo; returns each rank's result, or None when
    the job did not finish in time (a rank waiting for the others)."""
    import shutil
    import subprocess
    import sys

    require_torch()
    data = _ids_dataset(str(tmp_path / ("data%d" % n)), n)
    out = tmp_path / ("out-%d-%d-%d-%d" % (n, nproc, drop_last, workers))
    out.mkdir()
    # --redirects/--tee 1: this torch's torchrun cannot parse their default, "0", here
    cmd = [shutil.which("torchrun") or "torchrun", "--redirects", "1", "--tee", "1", "--nproc_per_node", str(nproc),
           "--master_port", str(_free_port()),
           os.path.join(os.path.dirname(__file__), "ddp_even_worker.py"), data, str(out), "1" if drop_last else "0",
           str(workers), str(order_version)]
    if shutil.which("torchrun") is None:
        cmd = [sys.executable, "-m", "torch.distributed.run"] + cmd[1:]
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None
    if res.returncode != 0:
        return None
    return [json.load(open(out / ("rank%d.json" % r))) for r in range(nproc)]


@pytest.mark.parametrize("n,drop_last", [(65, False), (63, True)])
@pytest.mark.parametrize("nproc", [2, 3])
def test_torchrun_ranks_stay_in_step(tmp_path, n, drop_last, nproc):
    """Issue 24: with 65 records, batch 32 and 2 ranks, rank 1 had one batch more than rank 0
    and waited forever in its allreduce (63 records with drop_last: 0 and 1 batches). Under
    ORDER.md v2 every rank of a torchrun job yields the same number of batches, of the same
    sizes, and len() says how many, with and without DataLoader workers."""
    for workers in (0, 2):
        res = torchrun_ranks(tmp_path, n, nproc, drop_last, workers)
        assert res is not None, "torchrun job with %d ranks and %d workers failed or hung" % (nproc, workers)
        sizes = [r["sizes"] for r in res]
        assert all(s == sizes[0] for s in sizes), sizes
        assert all(r["len"] == len(r["sizes"]) for r in res)
        G = 32 * nproc
        if drop_last:
            assert len(sizes[0]) == n // G
        else:
            assert len(sizes[0]) == -(-n // G) and sum(sizes[0]) * nproc - n < nproc
