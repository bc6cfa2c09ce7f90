"""Random-access batches against sequential reads and h5py, on the same records.

    scripts/bench_read_many.sh [--dir /tmp/packer-bench-read-many] [--batch 256] [--repeat 3]
                               [--cold-repeat 2] [--big 10000] [--small 50000] [--h5-batches 4]

Builds (once, with bin/packer) two datasets from a generated CIFAR-10 folder of random pixels:
"32x32x3" (the train split, --small records, 3 KiB each) and "224x224x3" (the test split
resized with --size 224x224, --big records, 147 KiB each), each as shards and as HDF5 (packer
build --format hdf5, the same records). Then times full passes over every record, each in a
fresh process:

  seq            ds.batches(B): the sequential iterator (one contiguous read a batch)
  read_many      ds.read_many(batch) over random batches (a seeded permutation of all the
                 records cut into batches of B): reads sorted, runs merged, every block's CRC
  read_many nocrc  the same with open(verify_crc=False)
  shuffled       ds.batches(B, shuffle=True): packer's shuffled iterator (the same kind of reads)
  h5py fancy     h5py fancy indexing of the HDF5 output, the same random batches: each batch's
                 indices sorted (h5py needs increasing ones), read with dset[sorted], and put back
                 in the batch's order; the first --h5-batches batches only (h5py's selection of
                 a list of indices is slow: seconds a batch of 224x224x3 records)
  h5py loop      the same batches read a record at a time (dset[i], stacked): h5py's faster way

warm: the files read once beforehand (in the page cache); cold: the page cache dropped before
the pass (sync; echo 1 > /proc/sys/vm/drop_caches; skipped, and said so, when not root). Prints
GB/s of record bytes and each pass's ratio to the sequential iterator's and to h5py's, and GB
per CPU-second of the pass's process (all its threads), which other jobs on a shared machine
disturb much less than the wall clock.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cifar_folder(d, n_train, n_test):
    """A CIFAR-10 binary folder of random pixels: data_batch_1..5 (n_train records), test_batch."""
    if os.path.exists(os.path.join(d, "batches.meta.txt")):
        return
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(0)

    def write(name, n):
        rec = np.empty((n, 3073), dtype=np.uint8)
        rec[:, 0] = np.arange(n) % 10
        rec[:, 1:] = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        rec.tofile(os.path.join(d, name))
    per = -(-n_train // 5)
    for i in range(5):
        write("data_batch_%d.bin" % (i + 1), max(0, min(per, n_train - i * per)))
    write("test_batch.bin", n_test)
    with open(os.path.join(d, "batches.meta.txt"), "w") as f:
        f.write("\n".join("c%d" % i for i in range(10)) + "\n\n")


def build(src, out, split, fmt, extra):
    if os.path.exists(os.path.join(out, "manifest.json")):
        return
    cmd = [os.path.join(ROOT, "bin", "packer"), "build", src, "--from", "cifar10", "--split", split, "-o", out,
           "--format", fmt] + extra
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def drop_caches():
    subprocess.run(["sync"], check=False)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
        return True
    except OSError:
        return False


def warm(d):
    for f in sorted(os.listdir(d)):
        p = os.path.join(d, f)
        if os.path.isfile(p):
            with open(p, "rb") as fh:
                while fh.read(16 << 20):
                    pass


PASS = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import packer_reader
kind, d, B, seed = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
if kind.startswith("h5py"):
    import h5py, glob
    f = h5py.File(glob.glob(d + "/*.h5")[0], "r")
    dset = f["images"]
    perm = np.random.default_rng(seed).permutation(dset.shape[0])
    n = min(dset.shape[0], B * int(sys.argv[6]))
    t, c = time.perf_counter(), time.process_time()
    for a in range(0, n, B):
        idx = perm[a:a + B]
        order = np.argsort(idx)
        if kind == "h5py_fancy":
            got = dset[idx[order]]
        else:
            got = np.stack([dset[i] for i in idx[order].tolist()])
        out = np.empty_like(got)
        out[order] = got
    dt, cpu = time.perf_counter() - t, time.process_time() - c
    print(n, dt, out.nbytes // out.shape[0], cpu)
    sys.exit(0)
ds = packer_reader.open(d, verify_crc=(kind != "read_many_nocrc"))
n = len(ds)
perm = np.random.default_rng(seed).permutation(n)
t, c = time.perf_counter(), time.process_time()
if kind == "seq":
    for x, y in ds.batches(B):
        pass
elif kind == "shuffled":
    for x, y in ds.batches(B, shuffle=True, seed=seed):
        pass
else:
    for a in range(0, n, B):
        x, y = ds.read_many(perm[a:a + B])
dt, cpu = time.perf_counter() - t, time.process_time() - c
print(n, dt, ds.record_size, cpu)
"""


def one_pass(kind, d, batch, seed, h5_batches):
    out = subprocess.run([sys.executable, "-c", PASS, os.path.join(ROOT, "python"), kind, d, str(batch), str(seed),
                          str(h5_batches)],
                         check=True, capture_output=True, text=True).stdout.split()
    n, dt, rs, cpu = int(out[0]), float(out[1]), int(out[2]), float(out[3])
    return n * rs / dt / 1e9, n * rs / cpu / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/packer-bench-read-many")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cold-repeat", type=int, default=2)
    ap.add_argument("--big", type=int, default=10000)
    ap.add_argument("--small", type=int, default=50000)
    ap.add_argument("--h5-batches", type=int, default=4)
    a = ap.parse_args()
    src = os.path.join(a.dir, "cifar")
    cifar_folder(src, a.small, a.big)
    sets = [("32x32x3", "train", [], a.small), ("224x224x3", "test", ["--size", "224x224"], a.big)]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    can_drop = os.geteuid() == 0 and drop_caches()
    print("# scripts/bench_read_many.sh %s" % " ".join(sys.argv[1:]))
    print("# date: %s UTC   commit: %s   CPUs: %d   load average: %s   batch: %d   cold passes: %s" % (
        time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), commit, os.cpu_count(),
        " ".join(open("/proc/loadavg").read().split()[:3]), a.batch,
        "page cache dropped before each" if can_drop else "NOT RUN (not root: warm only)"))
    print("%-10s %-5s %-16s %8s %8s %8s %8s %8s %9s %8s   (GB/s of record bytes, wall clock: best of the passes, "
          "median beside, ratios of the bests; GB per CPU-second of the pass's process, best, and its ratio to seq's)"
          % ("records", "cache", "pass", "GB/s", "median", "vs seq", "vs fancy", "vs loop", "GB/CPU-s", "vs seq"))
    kinds = ["seq", "read_many", "read_many_nocrc", "shuffled", "h5py_fancy", "h5py_loop"]
    for name, split, extra, n in sets:
        shards = os.path.join(a.dir, name + "-shards")
        h5 = os.path.join(a.dir, name + "-hdf5")
        build(src, shards, split, "shards", extra)
        build(src, h5, split, "hdf5", extra)
        for cache in ("warm", "cold"):
            if cache == "cold" and not can_drop:
                continue
            runs = {k: [] for k in kinds}
            for r in range(a.repeat if cache == "warm" else a.cold_repeat):
                for k in kinds:  # alternating within a round
                    d = h5 if k.startswith("h5py") else shards
                    if cache == "warm":
                        warm(d)
                    else:
                        drop_caches()
                    runs[k].append(one_pass(k, d, a.batch, r, a.h5_batches))
            wall = {k: [r[0] for r in v] for k, v in runs.items()}
            cpu = {k: max(r[1] for r in v) for k, v in runs.items()}
            for k in kinds:
                best = max(wall[k])
                print("%-10s %-5s %-16s %8.3f %8.3f %8.2f %8.2f %8.2f %9.3f %8.2f   passes %s" % (
                    name, cache, k.replace("_nocrc", " nocrc").replace("_", " "), best, statistics.median(wall[k]),
                    best / max(wall["seq"]), best / max(wall["h5py_fancy"]), best / max(wall["h5py_loop"]),
                    cpu[k], cpu[k] / cpu["seq"], " ".join("%.3f" % x for x in wall[k])))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
