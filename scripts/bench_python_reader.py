#!/usr/bin/env python3
"""Full-pass throughput of the Python reader (packer_reader) against dd on the same files.

    scripts/bench_python_reader.sh [DIR] [--gb 2] [--batch 256] [--prefetch 1 0] [--repeat 3]
                                   [--torch-workers 0 2]

DIR is a packer output directory (any format). Without DIR, a synthetic shard dataset of
--gb gigabytes of 224x224x3 uint8 records is generated once in --bench-dir (default
/tmp/packer-bench-py) with the test writer of python/tests.

Cold: the page cache is dropped (root only; otherwise the table says "NOT cold"), dd reads every
data file with bs=4M iflag=direct; the cache is dropped again before each reader pass (buffered,
then direct=True). Warm: the files are in the page cache; dd bs=4M against a reader pass, best of
--repeat, once per --prefetch value (cold passes use the first): with prefetch 1 a background
thread reads the next batch, which a training step hides but a bare full pass pays for in
thread hand-offs; prefetch 0 is the reader's own speed. Ratios are reader GB/s over dd GB/s
measured in the same run. --torch-workers adds warm shuffled passes through a torch DataLoader
(ratio against warm dd)."""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))


def generate(d, gb):
    import numpy as np

    import packer_reader._crc32c as fast
    import shardwriter as w

    w.crc32c = fast.crc32c  # the test writer's own CRC is byte-at-a-time: too slow for GBs
    os.makedirs(d, exist_ok=True)
    shape = (224, 224, 3)
    rs = int(np.prod(shape))
    n = int(gb * (1 << 30) // rs)
    per = (256 << 20) // rs
    spec = {"shape": list(shape), "dtype": "uint8", "layout": "hwc"}
    rng = np.random.default_rng(0)
    files, labels, first, t = [], [], 0, time.time()
    s = 0
    while first < n:
        k = min(per, n - first)
        recs = rng.integers(0, 256, (k,) + shape, dtype=np.uint8)
        lab = (np.arange(first, first + k) % 10).tolist()
        rel = "shard-%05d.pks" % s
        w.write_shard(os.path.join(d, rel), recs, lab, spec, shard_index=s)
        files.append(w._file_entry(d, rel, k, first))
        labels += lab
        first += k
        s += 1
    w._manifest(d, "shards", n, ["c%d" % i for i in range(10)], labels, spec, [], files)
    print("generated %d records in %d shards in %.1fs" % (n, len(files), time.time() - t))


def drop_caches():
    subprocess.run(["sync"], check=False)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def dd_pass(files, direct):
    t = time.perf_counter()
    for f in files:
        cmd = ["dd", "if=" + f, "of=/dev/null", "bs=4M", "status=none"] + (["iflag=direct"] if direct else [])
        subprocess.run(cmd, check=True)
    return time.perf_counter() - t


def reader_pass(d, batch, prefetch, direct):
    """Run in a fresh process (clean page-cache state, no warm Python objects)."""
    code = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import packer_reader
d, B, pf, direct = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
t = time.perf_counter()
n = 0
with packer_reader.open(d, direct=direct) as ds:
    for x, y in ds.batches(B, prefetch=pf, copy=False):
        n += len(x)
    rs = ds.record_size
print(time.perf_counter() - t, n, n * rs)
"""
    out = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "python"), d, str(batch), str(prefetch),
                          "1" if direct else "0"], check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), int(out[1]), int(out[2])


def torch_pass(d, batch, workers, prefetch):
    """A full warm pass through a torch DataLoader (batches built by the dataset)."""
    code = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import torch
from torch.utils.data import DataLoader
from packer_reader.torch import PackerIterableDataset
d, B, nw, pf = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
data = PackerIterableDataset(d, batch_size=B, shuffle=True, seed=1, prefetch=pf)
loader = DataLoader(data, batch_size=None, num_workers=nw)
t = time.perf_counter()
n = 0
nb = 0
for x, y in loader:
    n += len(x)
    nb += x.numel() * x.element_size()
print(time.perf_counter() - t, n, nb)
"""
    out = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "python"), d, str(batch), str(workers),
                          str(prefetch)], check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), int(out[1]), int(out[2])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--gb", type=float, default=2.0)
    ap.add_argument("--bench-dir", default="/tmp/packer-bench-py")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--prefetch", type=int, nargs="+", default=[1, 0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--torch-workers", type=int, nargs="*", default=[],
                    help="also time a warm shuffled pass through a torch DataLoader with these worker counts")
    a = ap.parse_args()
    d = a.dir
    if d is None:
        d = a.bench_dir
        if not os.path.exists(os.path.join(d, "manifest.json")):
            generate(d, a.gb)
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    files = [os.path.join(d, fe["path"]) for fe in m["files"] if not fe["path"].endswith(".jsonl")]
    total = sum(os.path.getsize(f) for f in files)
    pf0 = a.prefetch[0]
    print("dataset %s: %s, %.0f MB in %d files; batch %d, prefetch %s" % (
        d, m["format"], total / 1e6, len(files), a.batch, " ".join(map(str, a.prefetch))))

    cold = drop_caches()
    dd_cold = dd_pass(files, True)
    drop_caches()
    rc = reader_pass(d, a.batch, pf0, False)
    drop_caches()
    rd = reader_pass(d, a.batch, pf0, True)

    dd_pass(files, False)  # warm the cache
    dd_warm = min(dd_pass(files, False) for _ in range(a.repeat))
    rws = [(pf, min((reader_pass(d, a.batch, pf, False) for _ in range(a.repeat)), key=lambda r: r[0]))
           for pf in a.prefetch]

    ddc, ddw = total / dd_cold / 1e9, total / dd_warm / 1e9
    rows = [
        ("dd bs=4M iflag=direct (%s)" % ("cold" if cold else "NOT cold"), ddc, None, 1.0),
        ("packer_reader cold, buffered, pf %d" % pf0, rc[2] / rc[0] / 1e9, rc[1] / rc[0], rc[2] / rc[0] / 1e9 / ddc),
        ("packer_reader cold, direct=True, pf %d" % pf0, rd[2] / rd[0] / 1e9, rd[1] / rd[0], rd[2] / rd[0] / 1e9 / ddc),
        ("dd bs=4M (warm)", ddw, None, 1.0),
    ] + [("packer_reader warm, prefetch %d" % pf, rw[2] / rw[0] / 1e9, rw[1] / rw[0], rw[2] / rw[0] / 1e9 / ddw)
         for pf, rw in rws]
    print("%-36s %8s %11s %7s" % ("pass", "GB/s", "samples/s", "ratio"))
    for name, gbs, sps, ratio in rows:
        print("%-36s %8.2f %11s %7.2f" % (name, gbs, "-" if sps is None else "%.0f" % sps, ratio))
    for nw in a.torch_workers:
        t = torch_pass(d, a.batch, nw, pf0)
        print("%-36s %8.2f %11.0f %7.2f" % ("torch DataLoader, shuffle, %d workers" % nw, t[2] / t[0] / 1e9,
                                            t[1] / t[0], t[2] / t[0] / 1e9 / ddw))
    if not cold:
        print("note: the page cache could not be dropped (not root?): cold rows are not cold")


if __name__ == "__main__":
    main()
