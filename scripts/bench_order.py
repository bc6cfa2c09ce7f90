#!/usr/bin/env python3
"""Shuffled full passes under reading order v2 against v1 (shard/ORDER.md), side by side in one
run, warm page cache, for 224x224x3 records and CIFAR-sized (32x32x3) records, through the Go
Loader (internal/tools/orderdump -pass, a process per pass; `packer bench --shuffle --order N`
does the same pass next to a raw-read pass) and the Python reader (`Dataset.batches`).

    scripts/bench_order.sh [--gb 1] [--cifar-records 100000] [--repeat 3] [--batch 256]
                           [--bench-dir /tmp/packer-bench-order]

The datasets are generated once in --bench-dir with the test writer of python/tests (random
bytes, 256 MiB shards, 10 classes). Each pass reads the whole dataset once with shuffle=True and
the CRC-32C check on (the default). Passes of v1 and v2 alternate; the best of --repeat is kept.
The ratio is v2 GB/s over v1 GB/s of the same reader in the same run. On a shared machine the
wall-clock figures move with the other jobs' load; the GB per CPU-second of the reading process
moves much less, and is printed too."""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))


def generate(d, shape, n, block_records=None):
    import numpy as np

    import packer_reader._crc32c as fast
    import shardwriter as w

    if os.path.exists(os.path.join(d, "manifest.json")):
        return
    w.crc32c = fast.crc32c  # the test writer's own CRC is byte-at-a-time: too slow for GBs
    os.makedirs(d, exist_ok=True)
    rs = int(np.prod(shape))
    per = (256 << 20) // rs
    spec = {"shape": list(shape), "dtype": "uint8", "layout": "hwc"}
    rng = np.random.default_rng(0)
    files, labels, first, s, t = [], [], 0, 0, time.time()
    while first < n:
        k = min(per, n - first)
        recs = rng.integers(0, 256, (k,) + tuple(shape), dtype=np.uint8)
        lab = (np.arange(first, first + k) % 10).tolist()
        rel = "shard-%05d.pks" % s
        w.write_shard(os.path.join(d, rel), recs, lab, spec, shard_index=s, block_records=block_records)
        files.append(w._file_entry(d, rel, k, first))
        labels += lab
        first += k
        s += 1
    w._manifest(d, "shards", n, ["c%d" % i for i in range(10)], labels, spec, [], files)
    print("generated %d records of %s in %d shards in %.1fs" % (n, shape, len(files), time.time() - t))


def warm(d):
    for f in sorted(os.listdir(d)):
        with open(os.path.join(d, f), "rb") as fh:
            while fh.read(16 << 20):
                pass


def go_pass(tool, d, order, batch):
    """One Go Loader pass in a process of its own (internal/tools/orderdump -pass): wall GB/s
    and GB per CPU-second of that process."""
    import resource

    opts = json.dumps({"BatchSize": batch, "Shuffle": True, "Seed": 1, "Order": order})
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = json.loads(subprocess.run([tool, "-pass", d, opts], capture_output=True, text=True, check=True).stdout)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return out["bytes"] / out["seconds"] / 1e9, out["bytes"] / cpu / 1e9


def py_pass(d, order, batch):
    import packer_reader

    with packer_reader.open(d) as ds:
        t, c = time.perf_counter(), time.process_time()
        nbytes = 0
        for x, _ in ds.batches(batch, shuffle=True, seed=1, order_version=order, copy=False, prefetch=0):
            nbytes += x.nbytes
        return nbytes / (time.perf_counter() - t) / 1e9, nbytes / (time.process_time() - c) / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--cifar-records", type=int, default=100000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--bench-dir", default="/tmp/packer-bench-order")
    a = ap.parse_args()
    packer = os.path.join(ROOT, "bin", "orderdump")
    subprocess.run(["go", "build", "-o", packer, "./internal/tools/orderdump"], cwd=ROOT, check=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    print("# scripts/bench_order.sh %s" % " ".join(sys.argv[1:]))
    print("# date: %s UTC   commit: %s   CPUs: %d   load average: %s" % (
        time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), commit, os.cpu_count(),
        " ".join(open("/proc/loadavg").read().split()[:3])))
    sets = [("224x224x3", (224, 224, 3), int(a.gb * (1 << 30)) // (224 * 224 * 3)),
            ("32x32x3", (32, 32, 3), a.cifar_records)]
    print("reader  records     order-1 GB/s  order-2 GB/s  ratio v2/v1   (shuffled, warm, CRC checked, best of %d)"
          % a.repeat)
    for name, shape, n in sets:
        d = os.path.join(a.bench_dir, name)
        generate(d, shape, n)
        warm(d)
        for reader in ("go", "python"):
            runs, cpu = {1: [], 2: []}, {1: [], 2: []}
            for _ in range(a.repeat):
                for order in (1, 2):
                    g, c = go_pass(packer, d, order, a.batch) if reader == "go" else py_pass(d, order, a.batch)
                    runs[order].append(g)
                    cpu[order].append(c)
            best = {k: max(v) for k, v in runs.items()}
            print("%-7s %-10s %8d %12.2f %13.2f %12.2f    passes v1 %s  v2 %s" % (
                reader, name, n, best[1], best[2], best[2] / best[1],
                " ".join("%.2f" % g for g in runs[1]), " ".join("%.2f" % g for g in runs[2])))
            if cpu[1][0] is not None:
                b1, b2 = max(cpu[1]), max(cpu[2])
                print("%-7s %-10s %8s %12.2f %13.2f %12.2f    (GB per CPU-second of the reading process)"
                      % (reader, name, "per CPU-s", b1, b2, b2 / b1))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
