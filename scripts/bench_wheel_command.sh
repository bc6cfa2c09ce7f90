#!/usr/bin/env bash
# scripts/bench_wheel_command.sh [RUNS]
#
# The wheel's `packer` command against the bare release binary: builds the wheel, installs it
# into a fresh venv and times `packer --version` RUNS times (default 50) each way, alternating,
# printing the median of each and the difference (the issue's target: within 50 ms).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-50}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bash scripts/build-wheel.sh "$tmp/dist" >/dev/null
/usr/bin/python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$tmp"/dist/*.whl
go build -o "$tmp/packer" ./cmd/packer
/usr/bin/python3 - "$runs" "$tmp/venv/bin/packer" "$tmp/packer" <<'PYEOF'
import statistics, subprocess, sys, time
runs, wheel, bare = int(sys.argv[1]), sys.argv[2], sys.argv[3]
t = {wheel: [], bare: []}
for _ in range(runs):
    for cmd in (wheel, bare):
        t0 = time.perf_counter()
        subprocess.run([cmd, "--version"], check=True, stdout=subprocess.DEVNULL)
        t[cmd].append(time.perf_counter() - t0)
w, b = statistics.median(t[wheel]) * 1000, statistics.median(t[bare]) * 1000
print("packer --version, median of %d: wheel's command %.1f ms, bare binary %.1f ms, difference %.1f ms" % (runs, w, b, w - b))
PYEOF
