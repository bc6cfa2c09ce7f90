#!/usr/bin/env python3
"""Cold shuffled passes (reading order v2) against fio random reads of the same size at the
same queue depth, on the same shard files, for 224x224x3 and CIFAR-sized (32x32x3) records,
and what the CRC-32C check of each ~1 MiB checksum block costs a cold shuffled first epoch.

    scripts/bench_cold.sh [--gb 1] [--cifar-records 100000] [--repeat 2] [--batch 256]
                          [--depth 8] [--bench-dir /tmp/packer-bench-order] [--no-go] [--no-python]
                          [--checksum-block BYTES]

Needs fio (Debian: apt-get install fio). The datasets are the ones scripts/bench_order.sh
generates (generated here if missing). Every pass reads the whole dataset once, shuffled, in a
process of its own (internal/tools/orderdump -pass for the Go Loader); the page cache is dropped
before each pass that reads through it (the CRC-checked ones, the Python reader's) where the
process may (root: /proc/sys/vm/drop_caches), and the report says whether it could. Rows:

- fio qdD: fio randread, libaio, O_DIRECT, bs = the record size, iodepth D, as many bytes as
  the dataset, over the shard files;
- go qdD: the Go Loader, Direct, Depth D, SkipCRC (fio checks nothing), its ratio to fio qdD;
- go qdD crc: the same with the CRC check on (the default), the cache dropped first: the
  cold first epoch, with the bytes it read from the disk and through read calls per data byte;
- py qd1 / py qdD: the Python reader, direct=True, shuffle=True, verify_crc=False (fio checks
  nothing), with 1 and D O_DIRECT reads in flight (packer_reader._segment._DIRECT_DEPTH), its
  ratio to fio at the same depth (a batch's reads are one call of packer's C library, native
  asynchronous I/O, where it is built: scripts/build-crc.sh);
- py qdD thr: the same with the C library's batch reads turned off: D threads, each read a
  Python call (the reader's path without the library);
- py qdD crc: the same with the CRC check on (the default), the cache dropped first: the cold
  first epoch;
- py cache crc: the Python reader without direct (through the page cache, one read at a time),
  CRC on, the cache dropped first: each checksum block read brings the block's other records
  into the page cache (for a dataset that fits in memory);
- go qdD crc cbN (with --checksum-block N): "go qdD crc" on a copy of the dataset written with
  checksum blocks of max(1, floor(N / record size)) records (packer build --checksum-block N),
  run in the same rounds.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))


def drop_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def shard_files(d):
    return [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".pks")]


def fio(d, bs, qd, nbytes):
    files = ":".join(f.replace(":", "\\:") for f in shard_files(d))
    out = subprocess.run(["fio", "--name=r", "--filename=" + files, "--rw=randread", "--bs=%d" % bs,
                          "--iodepth=%d" % qd, "--ioengine=libaio", "--direct=1", "--io_size=%d" % nbytes,
                          "--group_reporting", "--output-format=json"], capture_output=True, text=True, check=True).stdout
    job = json.loads(out)["jobs"][0]["read"]
    return job["io_bytes"] / (job["runtime"] / 1000) / 1e9  # runtime in ms


def go_pass(tool, d, batch, depth, crc):
    opts = {"BatchSize": batch, "Shuffle": True, "Seed": 1, "Direct": True, "Depth": depth, "SkipCRC": not crc}
    out = json.loads(subprocess.run([tool, "-pass", d, json.dumps(opts)], capture_output=True, text=True, check=True).stdout)
    # From the Loader's creation on: it computes the epoch's order and maps (and, on Linux,
    # faults in) its ring of buffers, which a pass into fresh buffers pays for.
    secs = out["seconds"] - out.get("dataset_seconds", out["open_seconds"])
    return out["bytes"] / secs / 1e9, out.get("read_bytes", 0) / out["bytes"], out.get("rchar", 0) / out["bytes"], bool(out.get("direct"))


def proc_io():
    d = {}
    with open("/proc/self/io") as f:
        for line in f:
            k, v = line.split(": ")
            d[k] = int(v)
    return d


def py_pass(d, batch, depth, crc, direct=True, aio=True):
    """One Python pass in a process of its own (the reader's read pool is per process)."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--py-pass", d, str(batch), str(depth), str(int(crc)), str(int(direct)),
                          str(int(aio))], capture_output=True, text=True, check=True).stdout
    r = json.loads(out)
    return r["gbps"], r["disk"], r["rchar"]


def py_pass_here(d, batch, depth, crc, direct, aio):
    import packer_reader
    from packer_reader import _segment

    _segment._DIRECT_DEPTH = depth
    if not aio:
        _segment._AIO = None  # the thread pool, as without packer's C library
    elif direct and _segment._aio_batch() is None:
        sys.exit("bench_cold: packer's C library with packer_pread_batch not built (bash scripts/build-crc.sh)")
    io0 = proc_io()
    with packer_reader.open(d, direct=direct, verify_crc=crc) as ds:
        t = time.perf_counter()
        nbytes = 0
        for x, _ in ds.batches(batch, shuffle=True, seed=1, copy=False, prefetch=0):
            nbytes += x.nbytes
        secs = time.perf_counter() - t
    io1 = proc_io()
    print(json.dumps({"gbps": nbytes / secs / 1e9, "disk": (io1["read_bytes"] - io0["read_bytes"]) / nbytes,
                      "rchar": (io1["rchar"] - io0["rchar"]) / nbytes}))


def main():
    if len(sys.argv) == 8 and sys.argv[1] == "--py-pass":
        return py_pass_here(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1", sys.argv[6] == "1",
                            sys.argv[7] == "1")
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--cifar-records", type=int, default=100000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--bench-dir", default="/tmp/packer-bench-order")
    ap.add_argument("--no-python", action="store_true")
    ap.add_argument("--no-go", action="store_true")
    ap.add_argument("--checksum-block", type=int, default=0,
                    help="also time the cold CRC-checked Go pass on a copy written with checksum blocks of this many bytes")
    a = ap.parse_args()
    if shutil.which("fio") is None:
        sys.exit("bench_cold: fio not found (Debian: apt-get install fio)")
    import bench_order

    tool = os.path.join(ROOT, "bin", "orderdump")
    if not a.no_go:
        subprocess.run(["go", "build", "-o", tool, "./internal/tools/orderdump"], cwd=ROOT, check=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    print("# scripts/bench_cold.sh %s" % " ".join(sys.argv[1:]))
    print("# date: %s UTC   commit: %s   CPUs: %d   load average: %s   page cache dropped: %s" % (
        time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), commit, os.cpu_count(),
        " ".join(open("/proc/loadavg").read().split()[:3]), drop_caches()))
    sets = [("224x224x3", (224, 224, 3), int(a.gb * (1 << 30)) // (224 * 224 * 3)),
            ("32x32x3", (32, 32, 3), a.cifar_records)]
    print("%-8s %-10s %-14s %8s %8s %8s %10s %8s   (best of %d, its ratio to fio's best; median ratio: medians; "
          "disk/rchar: bytes read from the disk / through read calls per record byte)" % (
              "reader", "records", "pass", "GB/s", "vs fio", "median", "disk", "rchar", a.repeat))
    for name, shape, n in sets:
        d = os.path.join(a.bench_dir, name)
        bench_order.generate(d, shape, n)
        rs = shape[0] * shape[1] * shape[2]
        nbytes = rs * n
        best = {}
        small = None
        if a.checksum_block and not a.no_go:
            small = "%s-cb%d" % (d, a.checksum_block)
            bench_order.generate(small, shape, n, block_records=max(1, a.checksum_block // rs))
        for _ in range(a.repeat):
            for qd in (1, a.depth):
                # No cache drop before these two: both read with O_DIRECT, and a drop makes the
                # other processes of a shared machine read their files again, from the same disk.
                best.setdefault(("fio", qd), []).append((fio(d, rs, qd, nbytes),))
                if not a.no_go:
                    best.setdefault(("go", qd), []).append(go_pass(tool, d, a.batch, qd, False))
            if not a.no_go:
                drop_caches()
                best.setdefault(("gocrc", a.depth), []).append(go_pass(tool, d, a.batch, a.depth, True))
                if small:
                    drop_caches()
                    best.setdefault(("gocrcsmall", a.depth), []).append(go_pass(tool, small, a.batch, a.depth, True))
            if not a.no_python:
                for qd in (1, a.depth):
                    best.setdefault(("py", qd), []).append(py_pass(d, a.batch, qd, False))
                best.setdefault(("pythr", a.depth), []).append(py_pass(d, a.batch, a.depth, False, aio=False))
                drop_caches()
                best.setdefault(("pycrc", a.depth), []).append(py_pass(d, a.batch, a.depth, True))
                drop_caches()
                best.setdefault(("pybuf", 1), []).append(py_pass(d, a.batch, 1, True, direct=False))
        for (kind, qd), runs in best.items():
            top = max(runs, key=lambda r: r[0])
            passes = " ".join("%.3f" % r[0] for r in runs)
            label = {"fio": "fio qd%d", "go": "go qd%d", "gocrc": "go qd%d crc", "py": "py qd%d", "pycrc": "py qd%d crc",
                     "pythr": "py qd%d thr", "pybuf": "py cache crc",
                     "gocrcsmall": "go qd%d crc cb" + str(a.checksum_block)}[kind] % ((qd,) if kind != "pybuf" else ())
            ref = max(r[0] for r in best[("fio", qd)])
            ratio = "" if kind == "fio" else "%.2f" % (top[0] / ref)
            med = "" if kind == "fio" else "%.2f" % (statistics.median(r[0] for r in runs) /
                                                     statistics.median(r[0] for r in best[("fio", qd)]))
            disk = "%.2f" % top[1] if len(top) > 1 else ""
            rchar = "%.2f" % top[2] if len(top) > 2 else ""
            print("%-8s %-10s %-14s %8.3f %8s %8s %10s %8s   passes %s" % (
                kind.replace("crcsmall", "").replace("crc", "").replace("buf", "").replace("thr", ""), name, label, top[0], ratio, med, disk, rchar,
                passes))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
