"""packer_reader.grain.Source under Grain against packer's own iterators, on the same records.

    scripts/bench_grain.sh [--dir /tmp/packer-bench-read-many] [--batch 256] [--repeat 3]
                           [--big 10000] [--small 50000] [--threads 16]

Run by the Grain venv's Python (scripts/grain-venv.sh). Uses (or builds, with bin/packer) the
shards datasets of scripts/bench_read_many.py: "32x32x3" (--small records of 3 KiB) and
"224x224x3" (--big records of 147 KiB). Every pass reads every record once in batches of B,
warm (the files read once before each pass: page cache only), each pass in a fresh process with
the dataset opened fresh (so the first-touch CRC checks are in every pass):

  packer seq       ds.batches(B)
  packer shuffled  ds.batches(B, shuffle=True): packer's own shuffled iterator
  packer read_many ds.read_many over a seeded permutation cut into batches
  grain loader     grain.DataLoader(Source, IndexSampler(shuffle=True), Batch(B)), worker_count=0,
                   ReadOptions(num_threads=--threads): Grain's read threads call source[i]
  grain map        grain.MapDataset.source(Source).shuffle(seed).batch(B): one thread, source[i]
                   a record at a time (Grain 0.2.18 leaves its batch read pushdown off)
  grain getitems   grain.MapDataset.source(Source).shuffle(seed), each batch one _getitems call
                   (Grain's batched read: Source._getitems, i.e. read_many), stacked as Batch does
  source items     the source alone, no Grain code: source[i] for each record of a seeded
                   permutation, stacked into batches of B, one thread
  source getitems  the source alone: source._getitems(batch) over the same batches, stacked

Prints GB/s of record bytes (best of the passes, median beside) and ratios to packer's shuffled
iterator and to its sequential one. Warm only: a cold comparison of the reads themselves is
scripts/bench_read_many.sh's (the source's batched read is read_many).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

PASS = r"""
import os, sys, time
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, sys.argv[1])
import numpy as np
import packer_reader
kind, d, B, seed, threads = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
if kind.startswith("grain"):
    import grain
    from packer_reader.grain import Source
    src = Source(d)
    n, rs = len(src), src.dataset.record_size
    if kind == "grain_loader":
        sampler = grain.samplers.IndexSampler(num_records=n, shuffle=True, seed=seed, num_epochs=1)
        it = grain.DataLoader(data_source=src, sampler=sampler, worker_count=0,
                              operations=[grain.transforms.Batch(B, drop_remainder=False)],
                              read_options=grain.ReadOptions(num_threads=threads, prefetch_buffer_size=2 * B))
    elif kind.startswith("grain_source"):
        perm = np.random.default_rng(seed).permutation(n).tolist()

        def batches():
            for a in range(0, n, B):
                if kind == "grain_source_items":
                    recs = [src[i] for i in perm[a:a + B]]
                else:
                    recs = src._getitems(perm[a:a + B])
                yield {"image": np.stack([r["image"] for r in recs]), "label": np.asarray([r["label"] for r in recs])}
        it = batches()
    elif kind == "grain_map":
        it = grain.MapDataset.source(src).shuffle(seed=seed).batch(B)
    else:
        shuffled = grain.MapDataset.source(src).shuffle(seed=seed)

        def batches():
            for a in range(0, n, B):
                recs = shuffled._getitems(list(range(a, min(n, a + B))))
                yield {"image": np.stack([r["image"] for r in recs]), "label": np.asarray([r["label"] for r in recs])}
        it = batches()
    t, c = time.perf_counter(), time.process_time()
    got = 0
    for b in it:
        got += len(b["label"])
    dt, cpu = time.perf_counter() - t, time.process_time() - c
    assert got == n, (got, n)
else:
    ds = packer_reader.open(d)
    n, rs = len(ds), ds.record_size
    t, c = time.perf_counter(), time.process_time()
    if kind == "packer_seq":
        for x, y in ds.batches(B):
            pass
    elif kind == "packer_shuffled":
        for x, y in ds.batches(B, shuffle=True, seed=seed):
            pass
    else:
        perm = np.random.default_rng(seed).permutation(n)
        for a in range(0, n, B):
            x, y = ds.read_many(perm[a:a + B])
    dt, cpu = time.perf_counter() - t, time.process_time() - c
print(n, dt, rs, cpu)
"""


def one_pass(kind, d, batch, seed, threads):
    out = subprocess.run([sys.executable, "-c", PASS, os.path.join(ROOT, "python"), kind, d, str(batch), str(seed),
                          str(threads)], check=True, capture_output=True, text=True)
    n, dt, rs, cpu = out.stdout.split()[-4:]
    return int(n) * int(rs) / float(dt) / 1e9, int(n) * int(rs) / float(cpu) / 1e9


def main():
    import bench_read_many as brm

    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/packer-bench-read-many")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--big", type=int, default=10000)
    ap.add_argument("--small", type=int, default=50000)
    ap.add_argument("--threads", type=int, default=16)
    a = ap.parse_args()
    import grain
    import jax
    src = os.path.join(a.dir, "cifar")
    brm.cifar_folder(src, a.small, a.big)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    print("# scripts/bench_grain.sh %s" % " ".join(sys.argv[1:]))
    print("# date: %s UTC   commit: %s   CPUs: %d   load average: %s   batch: %d   grain %s, jax %s   warm only" % (
        time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), commit, os.cpu_count(),
        " ".join(open("/proc/loadavg").read().split()[:3]), a.batch, grain.__version__, jax.__version__))
    print("%-10s %-16s %8s %8s %10s %8s %9s %10s   (GB/s of record bytes, wall clock: best of the passes, median "
          "beside, ratios of the bests to packer's shuffled iterator and its sequential one; GB per CPU-second of the "
          "pass's process, all its threads, best, and its ratio to packer's shuffled iterator's)"
          % ("records", "pass", "GB/s", "median", "vs packer", "vs seq", "GB/CPU-s", "vs packer"))
    kinds = ["packer_seq", "packer_shuffled", "packer_read_many", "grain_loader", "grain_map", "grain_getitems",
             "grain_source_items", "grain_source_getitems"]
    for name, split, extra in (("32x32x3", "train", []), ("224x224x3", "test", ["--size", "224x224"])):
        d = os.path.join(a.dir, name + "-shards")
        brm.build(src, d, split, "shards", extra)
        runs = {k: [] for k in kinds}
        for r in range(a.repeat):
            for k in kinds:  # alternating within a round
                brm.warm(d)
                runs[k].append(one_pass(k, d, a.batch, r, a.threads))
        wall = {k: [r[0] for r in v] for k, v in runs.items()}
        cpu = {k: max(r[1] for r in v) for k, v in runs.items()}
        for k in kinds:
            best = max(wall[k])
            print("%-10s %-16s %8.3f %8.3f %10.2f %8.2f %9.3f %10.2f   passes %s" % (
                name, k.replace("grain_source", "source").replace("_", " "), best, statistics.median(wall[k]), best / max(wall["packer_shuffled"]),
                best / max(wall["packer_seq"]), cpu[k], cpu[k] / cpu["packer_shuffled"],
                " ".join("%.3f" % x for x in wall[k])))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
