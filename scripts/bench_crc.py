#!/usr/bin/env python3
"""Cost of the default record CRC-32C check, both readers, warm page cache, side by side.

    scripts/bench_crc.sh [--dir /tmp/packer-bench-crc] [--gb 1] [--repeat 3] [--batch 256]
                         [--backend NAME] [--rates-only | --epochs]

First, the speed of every CRC-32C implementation importable here on one core (GB/s over a
64 MiB buffer, and over it in 3 KiB pieces, a CIFAR record per call: the per-call cost shows):
packer's C library (packer-hw: SSE4.2, three streams; packer-c: its portable tables), the crc32c
and google_crc32c modules, the NumPy fallback. --rates-only stops there. --backend NAME makes
the reader use that one (as named in the rates table) for what follows.

Two synthetic shard datasets of --gb gigabytes each are generated once in --dir with the test
writer of python/tests: CIFAR-sized records (32x32x3 uint8, 3 KiB) and ImageNet-sized ones
(224x224x3 uint8, 147 KiB), 1 MiB checksum blocks as packer writes them. The files are read
once to be in the page cache. Then, per dataset, --repeat rounds alternate a pass with the CRC
check off and one with it on, and the best of each is reported with their ratio:

- Python: packer_reader, one full pass of ds.batches(batch, prefetch=P, copy=False) for P in 0 and 1
  (prefetch=0 is the reader's own speed, where a cost shows most; 1 is the default). Each pass
  opens the dataset afresh, because a dataset remembers the blocks it has checked (a trainer
  pays the check in its first epoch only): every measured pass checks every block.
- Go: `packer bench --repeat 1` (CRC checked, the default) against `packer bench --repeat 1
  --no-crc`, each a fresh process (one reader pass; same reason). Its "packer reader" line.
- Later epochs: "python p=0, epoch 2+" is the best of 2 passes over a dataset already read
  once (checked blocks are not checked again), "go bench --repeat 3" is packer bench's own
  best of 3 passes over one open dataset (the first pass checks, the others find the blocks
  checked).

Rates are record bytes handed out per second.

--epochs replaces that table with scripts/bench_vs_limits.sh's row 5 on these datasets: first
and second epoch of the reader with default settings (batches(256), prefetch 1) in one process
against `dd bs=4M` over the same files from the page cache, best of --repeat, as ratios."""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))


def generate(d, shape, gb):
    import numpy as np

    import packer_reader._crc32c as fast
    import shardwriter as w

    if os.path.exists(os.path.join(d, "manifest.json")):
        return
    w.crc32c = fast.crc32c  # the test writer's own CRC is byte-at-a-time: too slow for GBs
    os.makedirs(d, exist_ok=True)
    rs = int(np.prod(shape))
    n = int(gb * (1 << 30) // rs)
    per = (256 << 20) // rs
    spec = {"shape": list(shape), "dtype": "uint8", "layout": "hwc"}
    rng = np.random.default_rng(0)
    files, labels, first, s = [], [], 0, 0
    while first < n:
        k = min(per, n - first)
        recs = rng.integers(0, 256, (k,) + tuple(shape), dtype=np.uint8)
        lab = (np.arange(first, first + k) % 10).tolist()
        rel = "shard-%05d.pks" % s
        w.write_shard(os.path.join(d, rel), recs, lab, spec, shard_index=s)
        files.append(w._file_entry(d, rel, k, first))
        labels += lab
        first += k
        s += 1
    w._manifest(d, "shards", n, ["c%d" % i for i in range(10)], labels, spec, [], files)


def warm(d):
    for f in sorted(os.listdir(d)):
        with open(os.path.join(d, f), "rb") as fh:
            while fh.read(8 << 20):
                pass


def py_pass(d, batch, prefetch, crc):
    import packer_reader

    t = time.perf_counter()
    nbytes = 0
    with packer_reader.open(d, verify_crc=crc) as ds:
        for x, _ in ds.batches(batch, prefetch=prefetch, copy=False):
            nbytes += x.nbytes
    return nbytes / (time.perf_counter() - t) / 1e9


def py_later_epochs(d, batch, prefetch, crc, repeat):
    """Best of `repeat` passes over one open dataset after a first, untimed pass: what a trainer
    pays from its second epoch on (checked blocks are remembered)."""
    import packer_reader

    best = 0
    with packer_reader.open(d, verify_crc=crc) as ds:
        for x, _ in ds.batches(batch, prefetch=prefetch, copy=False):
            pass
        for _ in range(repeat):
            t = time.perf_counter()
            nbytes = 0
            for x, _ in ds.batches(batch, prefetch=prefetch, copy=False):
                nbytes += x.nbytes
            best = max(best, nbytes / (time.perf_counter() - t) / 1e9)
    return best


def backends():
    """Every CRC-32C implementation importable here: name -> crc32c(data, crc=0)."""
    import packer_reader._crc32c as c

    out = {}
    if c._lib is not None:
        out["packer-hw" if c._lib.packer_crc32c_hw() else "packer-c"] = c._ctypes_crc(c._lib.packer_crc32c, None)
        out["packer-c"] = c._ctypes_crc(c._lib.packer_crc32c_portable, None)
    try:
        import crc32c

        out["crc32c"] = lambda d, crc=0: crc32c.crc32c(d, crc)
    except ImportError:
        pass
    try:
        import google_crc32c

        out["google_crc32c"] = lambda d, crc=0: google_crc32c.extend(crc, bytes(d))
    except ImportError:
        pass
    out["numpy"] = c._crc32c_numpy
    return out


def rates(repeat):
    import numpy as np

    buf = bytearray(np.random.default_rng(1).integers(0, 256, 64 << 20, dtype=np.uint8).tobytes())
    mv = memoryview(buf)
    print("%-14s %12s %14s" % ("CRC-32C", "64 MiB GB/s", "3 KiB calls GB/s"))
    for name, fn in backends().items():
        whole, pieces = [], []
        for _ in range(repeat):
            t = time.perf_counter()
            fn(mv)
            whole.append(len(buf) / (time.perf_counter() - t) / 1e9)
            t = time.perf_counter()
            crc = 0
            for p in range(0, len(buf), 3072):
                crc = fn(mv[p:p + 3072], crc)
            pieces.append(len(buf) / (time.perf_counter() - t) / 1e9)
        print("%-14s %12.2f %14.2f" % (name, max(whole), max(pieces)))
        sys.stdout.flush()


def epochs(d, repeat, batch):
    """(dd warm, reader first epoch, reader second epoch) in GB/s, best of repeat."""
    import packer_reader

    fs = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".pks"))
    size = sum(os.path.getsize(f) for f in fs)
    dd, first, second = [], [], []
    for _ in range(repeat):
        t = time.perf_counter()
        for f in fs:
            subprocess.run(["dd", "if=" + f, "of=/dev/null", "bs=4M", "status=none"], check=True)
        dd.append(size / (time.perf_counter() - t) / 1e9)
        ts = []
        with packer_reader.open(d) as ds:
            for _ in range(2):
                t = time.perf_counter()
                for x, y in ds.batches(batch):
                    pass
                ts.append(time.perf_counter() - t)
        first.append(size / ts[0] / 1e9)
        second.append(size / ts[1] / 1e9)
    return max(dd), max(first), max(second)


def go_pass(packer, d, batch, crc, repeat=1):
    cmd = [packer, "bench", "--json", "--repeat", str(repeat), "--batch", str(batch), d] + ([] if crc else ["--no-crc"])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["reader_gb_per_second"]  # GB/s (10^9), like the Python passes here


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/packer-bench-crc")
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--packer", default=os.path.join(ROOT, "bin", "packer"))
    ap.add_argument("--backend", help="the reader's CRC-32C, as named in the rates table")
    ap.add_argument("--rates-only", action="store_true")
    ap.add_argument("--epochs", action="store_true")
    a = ap.parse_args()
    import packer_reader._crc32c as c

    if a.backend:
        c.crc32c, c.BACKEND = backends()[a.backend], a.backend
    print("CRC-32C backend (Python): %s; load average %s; %d CPUs" % (
        c.BACKEND, " ".join(open("/proc/loadavg").read().split()[:3]), os.cpu_count()))
    rates(a.repeat)
    if a.rates_only:
        return
    if a.epochs:
        print("%-10s %10s %12s %12s %12s %12s" % ("dataset", "dd GB/s", "epoch1 GB/s", "epoch2 GB/s",
                                                  "epoch1/dd", "epoch2/dd"))
        for name, shape in (("cifar", (32, 32, 3)), ("224", (224, 224, 3))):
            d = os.path.join(a.dir, name)
            generate(d, shape, a.gb)
            warm(d)
            dd, e1, e2 = epochs(d, a.repeat, a.batch)
            print("%-10s %10.2f %12.2f %12.2f %12.3f %12.3f" % (name, dd, e1, e2, e1 / dd, e2 / dd))
            sys.stdout.flush()
        return
    print("%-10s %-22s %10s %10s %7s" % ("dataset", "reader", "off GB/s", "on GB/s", "on/off"))
    for name, shape in (("cifar", (32, 32, 3)), ("224", (224, 224, 3))):
        d = os.path.join(a.dir, name)
        generate(d, shape, a.gb)
        warm(d)
        runs = [("python prefetch=0", lambda crc: py_pass(d, a.batch, 0, crc)),
                ("python prefetch=1", lambda crc: py_pass(d, a.batch, 1, crc)),
                ("go packer bench", lambda crc: go_pass(a.packer, d, a.batch, crc)),
                ("python p=0, epoch 2+", lambda crc: py_later_epochs(d, a.batch, 0, crc, 2)),
                ("go bench --repeat 3", lambda crc: go_pass(a.packer, d, a.batch, crc, 3))]
        for label, fn in runs:
            off, on = [], []
            for _ in range(a.repeat):
                off.append(fn(False))
                on.append(fn(True))
            print("%-10s %-22s %10.3f %10.3f %7.3f" % (name, label, max(off), max(on), max(on) / max(off)))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
