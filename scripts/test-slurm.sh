#!/usr/bin/env bash
# scripts/test-slurm.sh: the real cluster test of builds in parts. It installs Slurm and munge
# from Debian's packages, starts a single-node Slurm cluster on this machine (munged, slurmctld
# and slurmd as children of this script, listening on loopback only, state in a temporary
# folder), submits with scripts/slurm/submit.sh a 4-task array building 4 parts of Debian's
# Fashion-MNIST test split plus the dependent merge job, waits for the merged dataset, compares
# it byte for byte with a one-machine build, and stops every daemon it started.
#
#   bash scripts/test-slurm.sh            # needs root (apt, daemons); about 30 s
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
need=()
for p in slurmctld slurmd slurm-client munge; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
[ -x bin/packer ] || go build -o bin/packer ./cmd/packer
src=/usr/share/datasets/fashion-mnist
[ -d "$src" ] || { echo "test-slurm: $src missing (apt-get install dataset-fashion-mnist)"; exit 1; }

# munged wants every parent of its socket world-executable: a folder of our own under /tmp.
d=$(mktemp -d /tmp/packer-slurm.XXXXXX)
chmod 755 "$d"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$d"
}
trap cleanup EXIT
fail() {
  echo "test-slurm: FAILED: $*"
  for f in "$d"/log/*.log "$d"/work/out.parts/*.out; do
    [ -f "$f" ] && { echo "--- $f"; tail -20 "$f"; }
  done
  exit 1
}
mkdir -p "$d/log" "$d/state" "$d/spool" "$d/work"

mungekey --create --keyfile="$d/munge.key" >/dev/null 2>&1 || mungekey -c -k "$d/munge.key"
chmod 600 "$d/munge.key"
munged -F --force --key-file="$d/munge.key" --socket="$d/munge.sock" --pid-file="$d/munged.pid" \
  --log-file="$d/log/munged.log" --seed-file="$d/munged.seed" > "$d/log/munged.stdout.log" 2>&1 &
pids+=($!)

host=$(hostname -s)
port=$((20000 + RANDOM % 20000))
cat > "$d/slurm.conf" <<CONF
ClusterName=packertest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$d/munge.sock
CryptoType=crypto/munge
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$d/slurm.conf"
for i in $(seq 50); do [ -S "$d/munge.sock" ] && break; sleep 0.1; done
[ -S "$d/munge.sock" ] || fail "munged did not start"
slurmctld -D -f "$SLURM_CONF" > "$d/log/slurmctld.stdout.log" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" > "$d/log/slurmd.stdout.log" 2>&1 &
pids+=($!)
for i in $(seq 100); do
  state=$(sinfo -h -o %T 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "$state" = idle ] || fail "the node did not come up (state '$state')"
echo "test-slurm: Slurm $(slurmctld -V | awk '{print $2}') single-node cluster up on $host (port $port)"

# The one-machine reference, then the cluster build: 4 parts as an array, then the merge.
args=(--split test --resize 20 --crop 16 --format npy)
bin/packer build "$src" -o "$d/work/ref" "${args[@]}" >/dev/null
PACKER="$repo/bin/packer" bash scripts/slurm/submit.sh "$src" "$d/work/out" 4 "${args[@]}"
for i in $(seq 600); do
  [ -z "$(squeue -h 2>/dev/null)" ] && break
  sleep 0.2
done
[ -z "$(squeue -h)" ] || fail "jobs still queued after 120 s: $(squeue -h)"
# Judge by packer's own manifests, not by Slurm's memory of the jobs.
for p in 0 1 2 3; do
  [ -f "$d/work/out.parts/part-$p/manifest.json" ] || fail "part $p has no manifest"
done
[ -f "$d/work/out/manifest.json" ] || fail "the merge job wrote no dataset"
diff -r "$d/work/ref" "$d/work/out" || fail "the merged dataset differs from the one-machine build"
bin/packer verify "$d/work/out" >/dev/null || fail "verify of the merged dataset"
echo "test-slurm: ok: 4 array tasks + 1 dependent merge job; OUT byte-identical to the one-machine build ($(ls "$d/work/out" | tr '\n' ' '))"
