#!/usr/bin/env bash
# scripts/test-slurm.sh: the real cluster test of builds in parts. It installs Slurm, munge and
# strace from Debian's packages, starts a single-node Slurm cluster on this machine (munged,
# slurmctld and slurmd as children of this script, listening on loopback only, state in a
# temporary folder), and, with scripts/slurm/submit.sh as `packer cluster slurm -o` writes it, builds Debian's Fashion-MNIST test split
# as 4 parts and merges it twice, the parts cut as the scripts cut them by default
# (--cut-inputs auto) and merged by hard links:
#   1. without a plan (PACKER_PLAN=0: every task lists the source itself): a 4-task array plus
#      the dependent merge job; the merged dataset is compared byte for byte with a one-machine
#      build with --cut-inputs auto, and every shard of it is checked to be a part's file (the
#      same inode: linked, not rewritten);
#   2. the default, from a plan, and the documented retry: submit.sh makes OUT.parts/plan
#      (packer plan, --cut-inputs auto resolved there) and submits a 4-task array building from
#      it, in which task 2 is killed (SIGKILL at its first rename, injected by strace), so the
#      merge job never runs; a resubmission of index 1 with another part count (sbatch
#      --array=1, PACKER_PARTS=3) is refused and leaves every part as it was; the resubmission of
#      index 2 alone (PACKER_ARRAY=2 submit.sh: sbatch --array=2) reuses the plan (the same
#      bytes, packer plan not run again), builds part 2 of 4 from it, leaves parts 0, 1 and 3 as
#      they were, and its merge job writes the one-machine build's bytes. Every packer command
#      of this run is logged: one plan, and every build's source is the plan.
# It stops every daemon it started.
#
#   bash scripts/test-slurm.sh            # needs root (apt, daemons); about 30 s
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
need=()
for p in slurmctld slurmd slurm-client munge strace; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
go build -o bin/packer ./cmd/packer  # this checkout's: its scripts are the ones run below
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
# Start jobs as they come (the default defers each scheduling pass by up to 3 s).
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
MailProg=/bin/true
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$d/slurm.conf"
for i in $(seq 300); do [ -S "$d/munge.sock" ] && break; sleep 0.1; done
[ -S "$d/munge.sock" ] || fail "munged did not start"
slurmctld -D -f "$SLURM_CONF" > "$d/log/slurmctld.stdout.log" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" > "$d/log/slurmd.stdout.log" 2>&1 &
pids+=($!)
for i in $(seq 300); do
  state=$(sinfo -h -o %T 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "$state" = idle ] || fail "the node did not come up (state '$state')"
echo "test-slurm: Slurm $(slurmctld -V | awk '{print $2}') single-node cluster up on $host (port $port)"

# wait_jobs waits until the queue is empty (Slurm forgets a job soon after it ends). The waits
# here end at the event; their limits are guards for a loaded machine, not timings.
wait_jobs() {
  for i in $(seq 1500); do
    [ -z "$(squeue -h 2>/dev/null)" ] && return 0
    sleep 0.2
  done
  fail "jobs still queued after 300 s: $(squeue -h)"
}
# sums DIR...: the SHA-256 of every file under the folders, to show that they did not change.
sums() { find "$@" -type f -print0 | sort -z | xargs -0 sha256sum; }

# The scripts run below are the ones the binary writes (packer cluster slurm: what a pip or
# binary user has), checked to be scripts/slurm's bytes.
bin/packer cluster slurm -o "$d/slurm" >/dev/null
for f in scripts/slurm/*; do
  case "$f" in *.go) continue ;; esac
  cmp "$f" "$d/slurm/$(basename "$f")" || fail "packer cluster slurm wrote $(basename "$f") unlike $f"
done
slurm=$d/slurm

# linked OUT PARTS: every shard of OUT is a file of one of the parts (same device and inode),
# as a merge by link leaves them, and part 0's first shard is OUT's first.
linked() {
  local f n
  pshards() { find "$2" -regextype posix-extended -regex '.*/part-[0-9]+/shard-[0-9]+\.pks' "${@:3}"; }
  n=$(pshards "$1" "$2" -printf '%D:%i\n' | sort -u | wc -l)
  for f in "$1"/shard-*.pks; do
    pshards "$1" "$2" -samefile "$f" | grep -q . || fail "$f is not a part's file: the merge rewrote it"
  done
  [ "$(stat -c %D:%i "$1/shard-00000.pks")" = "$(stat -c %D:%i "$2/part-0/shard-00000.pks")" ] ||
    fail "$1/shard-00000.pks is not part 0's first shard"
  [ "$n" = "$(ls "$1"/shard-*.pks | wc -l)" ] || fail "OUT has $(ls "$1"/shard-*.pks | wc -l) shards, the parts $n"
}

# 1. The one-machine reference, then the cluster build: 4 parts as an array, then the merge.
# 16x16 records of 256 bytes in shards of 256 KiB: --cut-inputs auto is K = 1024, 10 chunks.
args=(--split test --resize 20 --crop 16 --shard-size 256KiB)
bin/packer build "$src" -o "$d/work/ref" "${args[@]}" --cut-inputs auto 2>"$d/work/ref.err" >/dev/null
grep -q 'K = 1024 ' "$d/work/ref.err" || fail "--cut-inputs auto did not resolve to 1024: $(cat "$d/work/ref.err")"
grep -q '"cut_inputs": 1024' "$d/work/ref/manifest.json" || fail "the reference records no cut_inputs 1024"
PACKER="$repo/bin/packer" PACKER_PLAN=0 bash "$slurm/submit.sh" "$src" "$d/work/out" 4 "${args[@]}"
wait_jobs
[ ! -e "$d/work/out.parts/plan" ] || fail "PACKER_PLAN=0 made a plan"
# Judge by packer's own manifests, not by Slurm's memory of the jobs.
for p in 0 1 2 3; do
  [ -f "$d/work/out.parts/part-$p/manifest.json" ] || fail "part $p has no manifest"
done
[ -f "$d/work/out/manifest.json" ] || fail "the merge job wrote no dataset"
diff -r "$d/work/ref" "$d/work/out" || fail "the merged dataset differs from the one-machine build"
linked "$d/work/out" "$d/work/out.parts"
bin/packer verify "$d/work/out" >/dev/null || fail "verify of the merged dataset"
echo "test-slurm: ok: without a plan, 4 array tasks (--cut-inputs auto) + 1 dependent merge job; OUT byte-identical to the one-machine build with --cut-inputs auto and linked to the parts' files ($(ls "$d/work/out" | tr '\n' ' '))"

# 2. From a plan (submit.sh's default), a task killed part-way, then the retry recipe of
# docs/cluster.md. The packer of task 2 is SIGKILLed at its first rename (before it can publish
# anything); the other tasks are plain. Every packer command is logged to $d/commands, one a line.
renames=$(for s in rename renameat renameat2; do strace -qq -o /dev/null -e trace="$s" true 2>/dev/null && echo "$s"; done | paste -sd, -)
[ -n "$renames" ] || fail "strace knows no rename syscall"
cat > "$d/logged" <<LOGGED
#!/usr/bin/env bash
echo "\$*" >>"$d/commands"
exec "$repo/bin/packer" "\$@"
LOGGED
cat > "$d/killer" <<KILLER
#!/usr/bin/env bash
echo "\$*" >>"$d/commands"
if [ "\${SLURM_ARRAY_TASK_ID:-}" = 2 ]; then
  exec strace -f -qq -o /dev/null -e inject=$renames:signal=KILL:when=1 "$repo/bin/packer" "\$@"
fi
exec "$repo/bin/packer" "\$@"
KILLER
chmod +x "$d/killer" "$d/logged"
out="$d/work/retry"
PACKER="$d/killer" bash "$slurm/submit.sh" "$src" "$out" 4 "${args[@]}" >/dev/null
[ -f "$out.parts/plan" ] || fail "submit.sh made no plan $out.parts/plan"
grep -q '"cut-inputs":"1024"' "$out.parts/plan" || fail "the plan does not record --cut-inputs 1024: $(head -c 400 "$out.parts/plan")"
plan_sum=$(sha256sum <"$out.parts/plan")
wait_jobs
for p in 0 1 3; do
  [ -f "$out.parts/part-$p/manifest.json" ] || fail "part $p has no manifest"
done
[ ! -e "$out.parts/part-2/manifest.json" ] || fail "task 2 was not killed before it published part 2"
[ ! -e "$out" ] || fail "the merge job ran although task 2 failed"
before=$(sums "$out.parts"/part-[013])
# A resubmission with another part count (here by hand, as docs/cluster.md shows) is refused
# by packer, naming both parts, and changes nothing.
sbatch --parsable --chdir="$out.parts" --array=1 --output="$out.parts/wrong-count-%a.out" \
  --export=ALL,PACKER="$d/logged",PACKER_SRC="$out.parts/plan",PACKER_PARTS_DIR="$out.parts",PACKER_PARTS=3,PACKER_ARGS="${args[*]}" \
  "$slurm/build-parts.sbatch" >/dev/null
wait_jobs
grep -q "holds part 1/4 .*this build is part 1/3: a part is replaced only by a build of the same part" "$out.parts/wrong-count-1.out" ||
  fail "the resubmission with another count was not refused as such: $(cat "$out.parts/wrong-count-1.out")"
[ "$(sums "$out.parts"/part-[013])" = "$before" ] || fail "the refused resubmission changed a finished part"
# The retry: the same command with the failed index alone (sbatch --array=2), then the merge.
PACKER="$d/logged" PACKER_ARRAY=2 bash "$slurm/submit.sh" "$src" "$out" 4 "${args[@]}" 2>"$d/retry.err" >/dev/null
grep -q "reusing the plan $out.parts/plan" "$d/retry.err" || fail "the retry did not say it reuses the plan: $(cat "$d/retry.err")"
[ "$(sha256sum <"$out.parts/plan")" = "$plan_sum" ] || fail "the retry changed the plan"
wait_jobs
[ -f "$out.parts/part-2/manifest.json" ] || fail "the retry of task 2 wrote no part 2"
grep -q '"index": 2,' "$out.parts/part-2/manifest.json" && grep -q '"count": 4,' "$out.parts/part-2/manifest.json" ||
  fail "the retry did not build part 2/4: $(grep -A3 '"part"' "$out.parts/part-2/manifest.json")"
[ "$(sums "$out.parts"/part-[013])" = "$before" ] || fail "the retry of task 2 changed another part"
[ -f "$out/manifest.json" ] || fail "the merge job after the retry wrote no dataset"
diff -r "$d/work/ref" "$out" || fail "the dataset merged after the retry differs from the one-machine build"
linked "$out" "$out.parts"
# One listing: packer plan ran once (the first submit.sh, not the retry), and every part's build,
# the killed one and the retries included, read the plan, not the source.
[ "$(grep -c '^plan ' "$d/commands")" = 1 ] || fail "packer plan ran other than once: $(cat "$d/commands")"
[ "$(grep -c '^build ' "$d/commands")" = 6 ] || fail "not the 6 builds (4 tasks, 2 retries): $(cat "$d/commands")"
grep '^build ' "$d/commands" | grep -v "^build $out.parts/plan " && fail "a part was built from the source, not the plan"
echo "test-slurm: ok: from a plan (made once, reused by the retry), task 2 of 4 killed, the merge held back; a resubmission of index 1 as a part of 3 refused with every part unchanged; index 2 resubmitted alone rebuilt part 2/4 only, and the merge is byte-identical to the one-machine build"
