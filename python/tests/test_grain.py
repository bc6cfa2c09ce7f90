"""packer_reader.grain.Source under Grain's own IndexSampler and DataLoader, with JAX on the CPU,
in the venv of scripts/grain-venv.sh (pinned Grain and JAX from PyPI). Two processes read one
dataset: together they read every record exactly once per epoch, shuffled, each with the value
packer's own iterator reads (checked in grain_worker.py). The python/README.md example runs as
written."""

import json
import os
import re
import socket
import subprocess
import sys

import numpy as np
import pytest

import shardwriter
from conftest import CLASSES

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


@pytest.fixture(scope="module")
def grain_python():
    """The Grain venv's Python: PACKER_GRAIN_PYTHON (scripts/test.sh sets it from
    scripts/grain-venv.sh). Without it the tests skip, unless PACKER_REQUIRE_GRAIN=1."""
    py = os.environ.get("PACKER_GRAIN_PYTHON")
    if not py:
        if os.environ.get("PACKER_REQUIRE_GRAIN") == "1":
            pytest.fail("PACKER_REQUIRE_GRAIN=1 but PACKER_GRAIN_PYTHON is not set (PACKER_GRAIN_PYTHON=$(bash "
                        "scripts/grain-venv.sh))")
        pytest.skip("no Grain venv: PACKER_GRAIN_PYTHON=$(bash scripts/grain-venv.sh)")
    return py


def write(d, n, shape, shard_records, block_records, seed):
    rng = np.random.default_rng(seed)
    imgs = rng.integers(0, 256, (n,) + shape, dtype=np.uint8)
    spec = {"shape": list(shape), "dtype": "uint8", "layout": "hwc"}
    size = int(np.prod(shape))
    shardwriter.write_dataset(str(d), list(imgs), (np.arange(n) * 7 + 3) % len(CLASSES), CLASSES, spec,
                              shard_size=shard_records * size, block_records=block_records)
    return str(d)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_pair(py, path, tmp_path, mode):
    """Both processes at once (the JAX runtime needs both); their outputs."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", PACKER_GRAIN_COORDINATOR="127.0.0.1:%d" % free_port())
    procs, outs = [], []
    for k in range(2):
        out = str(tmp_path / ("%s-%d.json" % (mode, k)))
        outs.append(out)
        procs.append(subprocess.Popen([py, os.path.join(HERE, "grain_worker.py"), path, out, str(k), "2", mode],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("grain_worker.py did not finish in 240 s")
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log[-4000:]
    return [json.load(open(o)) for o in outs]


def check_exactly_once(results, epochs, dropped):
    """Each process reads its shard (Grain's ShardOptions: a contiguous share of the records;
    with drop_remainder, equal shares and the last n % 2 records in none) once per epoch,
    shuffled, another order each epoch; the two shards together are every record but the
    dropped ones."""
    n = results[0]["n"]
    per_epoch = [[] for _ in range(epochs)]
    for r in results:
        seen = r["seen"]
        assert len(seen) % epochs == 0
        m = len(seen) // epochs
        parts = [seen[e * m:(e + 1) * m] for e in range(epochs)]
        for e, part in enumerate(parts):
            assert sorted(part) == sorted(parts[0])  # the same records each epoch, each once
            assert part != sorted(part)  # shuffled
            per_epoch[e] += part
        assert parts[0] != parts[1]  # another order in the next epoch
    for e in range(epochs):
        assert sorted(per_epoch[e]) == list(range(n - dropped)), "epoch %d: not every record exactly once" % e
    assert sorted(results[0]["batched"] + results[1]["batched"]) == list(range(n - dropped))


def test_two_jax_processes_shard_by_process(grain_python, tmp_path):
    # 8x8x3 records (192 bytes, a multiple of 64: the source hands out views of its batch buffer)
    # 301 records: ShardByJaxProcess(drop_remainder=True) gives each process 150, record 300 to none
    path = write(tmp_path / "ds", 301, (8, 8, 3), 100, 16, seed=1)
    check_exactly_once(run_pair(grain_python, path, tmp_path, "jax"), 2, dropped=1)


def test_shard_options_worker_processes(grain_python, tmp_path):
    # 4x5x3 records (60 bytes: copied into 64-byte aligned memory); Grain worker processes
    # 202 records: ShardOptions(k, 2) without drop_remainder, 101 each
    path = write(tmp_path / "ds", 202, (4, 5, 3), 30, 7, seed=2)
    check_exactly_once(run_pair(grain_python, path, tmp_path, "options"), 2, dropped=0)


def readme_example():
    text = open(os.path.join(ROOT, "python", "README.md")).read()
    m = re.search(r"<!-- grain-example -->\s*```python\n(.*?)```", text, re.S)
    assert m, "python/README.md has no grain example"
    return m.group(1)


def test_readme_example_runs(grain_python, tmp_path):
    path = write(tmp_path / "out", 100, (8, 8, 3), 40, 8, seed=3)
    script = tmp_path / "example.py"
    script.write_text(readme_example())
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([grain_python, str(script)], cwd=str(tmp_path), env=env, capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "3 batches of 32 on cpu" in r.stdout, r.stdout


def test_source_without_grain(tmp_path):
    """The module needs neither Grain nor JAX: Debian's Python reads through it too, and a
    pickled source reopens the dataset."""
    import pickle
    import threading

    import packer_reader
    from packer_reader.grain import Source
    path = write(tmp_path / "ds", 50, (4, 5, 3), 20, 7, seed=4)
    src = Source(path)
    with packer_reader.open(path) as ds:
        want = [ds[i] for i in range(50)]
    assert len(src) == 50 and repr(src) == "packer_reader.grain.Source(%r, records=50, verify_crc=True, " \
                                           "direct=False)" % path
    got = src._getitems([49, 0, 0, 17])
    for r, i in zip(got, [49, 0, 0, 17]):
        assert np.array_equal(r["image"], want[i][0]) and r["label"] == want[i][1]
        assert r["image"].flags.c_contiguous and r["image"].ctypes.data % 64 == 0
    src2 = pickle.loads(pickle.dumps(src))
    assert src2._ds is None and len(src2) == 50 and np.array_equal(src2[7]["image"], want[7][0])
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(50):
            i = int(rng.integers(0, 50))
            if not np.array_equal(src2[i]["image"], want[i][0]):
                errors.append(i)
    threads = [threading.Thread(target=work, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with pytest.raises(IndexError):
        src[50]
