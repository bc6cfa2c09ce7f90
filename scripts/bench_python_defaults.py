#!/usr/bin/env python3
"""Issue 15 row 5 with before/after side by side: the Python reader with default settings
(``ds.batches(256)``: copy=True, prefetch=1, record CRCs checked) in a fresh process, two epochs,
against ``dd bs=4M`` over the same page-cached files.

    /usr/bin/python3 scripts/bench_python_defaults.py DIR [DIR ...] [--before PATH] [--repeat 3]

Each DIR is a packer shard directory. --before is a directory holding another copy of the
``packer_reader`` package (for example a copy of main's python/); its passes alternate with this
checkout's and dd's in the same run, best of --repeat each. Prints GB/s and the ratio to dd for
the first epoch (every record's CRC checked) and the second (blocks already checked).

    ... --step-ms 4 [--repeat 3]

instead times later epochs of a loop with a training step of that many milliseconds that
releases the GIL (time.sleep), with prefetch None (the default), 0 and 1, alternating, best of
--repeat: the default must keep the read-ahead's overlap where there is a step to overlap."""

import argparse
import glob
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PASS = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
import packer_reader
ds = packer_reader.open(sys.argv[1])
ts = []
for epoch in range(2):
    t = time.perf_counter()
    for x, y in ds.batches(256):
        pass
    ts.append(time.perf_counter() - t)
print(ts[0], ts[1])
"""


STEP = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
import packer_reader
ds = packer_reader.open(sys.argv[1])
for x, y in ds.batches(256):
    pass
step, res = float(sys.argv[3]) / 1e3, {}
for r in range(int(sys.argv[4])):
    for pf in (None, 0, 1):
        t = time.perf_counter()
        for x, y in ds.batches(256, prefetch=pf):
            time.sleep(step)
        res.setdefault(pf, []).append(time.perf_counter() - t)
print(", ".join("prefetch=%s %.3f s" % (k, min(v)) for k, v in res.items()))
"""


def dd(files):
    t = time.perf_counter()
    for f in files:
        subprocess.run(["dd", "if=" + f, "of=/dev/null", "bs=4M", "status=none"], check=True)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--before", help="directory holding the packer_reader package to compare with")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--step-ms", type=float, help="time a loop with a step of this many ms instead")
    a = ap.parse_args()
    if a.step_ms is not None:
        for d in a.dirs:
            out = subprocess.run([sys.executable, "-c", STEP, d, os.path.join(ROOT, "python"),
                                  str(a.step_ms), str(a.repeat)], check=True, capture_output=True,
                                 text=True).stdout.strip()
            print("%s, step %g ms: %s" % (os.path.basename(d.rstrip("/")), a.step_ms, out))
        return
    who = [("after", os.path.join(ROOT, "python"))]
    if a.before:
        who.insert(0, ("before", a.before))
    for d in a.dirs:
        files = sorted(glob.glob(os.path.join(d, "*.pks")))
        nbytes = sum(os.path.getsize(f) for f in files)
        for f in files:  # into the page cache
            with open(f, "rb") as fh:
                while fh.read(8 << 20):
                    pass
        t_dd, res = [], {w: [] for w, _ in who}
        for _ in range(a.repeat):
            t_dd.append(dd(files))
            for w, path in who:
                out = subprocess.run([sys.executable, "-c", PASS, d, path], check=True,
                                     capture_output=True, text=True).stdout.split()
                res[w].append((float(out[0]), float(out[1])))
        best_dd = min(t_dd)
        print("%s: %.2f GB, dd warm %.2f GB/s" % (os.path.basename(d.rstrip("/")), nbytes / 1e9,
                                                   nbytes / best_dd / 1e9))
        for w, _ in who:
            e1 = min(r[0] for r in res[w])
            e2 = min(r[1] for r in res[w])
            print("  %-6s first epoch %.2f GB/s ratio %.2f | later epoch %.2f GB/s ratio %.2f"
                  % (w, nbytes / e1 / 1e9, best_dd / e1, nbytes / e2 / 1e9, best_dd / e2))
    print("# load average: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()
