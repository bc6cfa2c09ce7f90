#!/usr/bin/env bash
# scripts/slurm/submit.sh SRC OUT N [packer build flags...]
#
# Submits a packer build of SRC as a Slurm job array of N parts (build-parts.sbatch), written to
# OUT.parts/part-0 .. part-(N-1), and a merge job (merge.sbatch) that runs after every part
# succeeded (--dependency=afterok) and writes OUT. Prints the two job ids. Extra sbatch options
# for both jobs (partition, time, CPUs) go in SBATCH_OPTS, for example
#   SBATCH_OPTS="--partition=cpu --cpus-per-task=16 --time=4:00:00" scripts/slurm/submit.sh ...
# PACKER names the packer binary the jobs run (default: packer on PATH).
# The parts are built with --cut-inputs auto (PACKER_CUT_INPUTS=K or 0 to change it; see
# build-parts.sbatch) and merged by hard links.
#
# To retry parts that failed, run the same command with PACKER_ARRAY set to their indices
# (PACKER_ARRAY=3,17 scripts/slurm/submit.sh SRC OUT N [flags]): it submits only those tasks,
# still as parts of N, and the merge after them.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 SRC OUT N [packer build flags...]" >&2
  exit 2
fi
src=$(realpath "$1"); out=$(realpath -m "$2"); n=$3; shift 3
here=$(cd "$(dirname "$0")" && pwd)
parts="$out.parts"
mkdir -p "$parts"
array=${PACKER_ARRAY:-0-$((n - 1))}
export PACKER_SRC="$src" PACKER_PARTS_DIR="$parts" PACKER_OUT="$out" PACKER_PARTS="$n" PACKER_ARGS="$*"
export PACKER="${PACKER:-$(command -v packer || echo packer)}"
# shellcheck disable=SC2086
job=$(sbatch --parsable ${SBATCH_OPTS:-} --chdir="$parts" --array="$array" --export=ALL "$here/build-parts.sbatch")
job=${job%%;*}
# shellcheck disable=SC2086
merge=$(sbatch --parsable ${SBATCH_OPTS:-} --chdir="$parts" --dependency="afterok:$job" --kill-on-invalid-dep=yes --export=ALL "$here/merge.sbatch")
echo "parts: job $job (array $array of $n parts), merge: job ${merge%%;*}"
