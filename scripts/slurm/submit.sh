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
# Before submitting, this script lists SRC once, here on the submitting node: packer plan SRC -o
# OUT.parts/plan with the flags among the build flags that a plan records (source options,
# --shuffle --seed, and --cut-inputs with the flags it is resolved from), and the array builds
# from OUT.parts/plan: each part opens only its own inputs (a WebDataset, TFRecord or Parquet part
# without a plan reads every file of the source; an s3:// part lists the whole prefix). A source
# packer cannot list fails here, before anything is submitted. PACKER_PLAN=0 submits without a
# plan: every part lists SRC itself.
#
# OUT may be s3://bucket/prefix: the parts then go to s3://bucket/prefix.parts/part-I (built and
# merged in the store, docs/storage.md), and PACKER_PLAN_DIR must name a folder on a shared file
# system for the plan (PACKER_PLAN_DIR/plan) and the jobs' logs; it is refused without one. For
# a local OUT, PACKER_PLAN_DIR is optional (default OUT.parts: the plan is OUT.parts/plan).
#
# To retry parts that failed, run the same command with PACKER_ARRAY set to their indices
# (PACKER_ARRAY=3,17 scripts/slurm/submit.sh SRC OUT N [flags]): it submits only those tasks,
# still as parts of N, and the merge after them. An existing OUT.parts/plan is reused, never made
# again (a new plan of a source changed since would make the retried parts unmergeable with the
# others); remove it, and every part, to start over from a new listing. A plan that lists another
# source than SRC is refused (exit 2, nothing submitted): OUT would be that source's dataset.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 SRC OUT N [packer build flags...]" >&2
  exit 2
fi
case "$1" in s3://*) src=$1 ;; *) src=$(realpath "$1") ;; esac
out=$2; n=$3; shift 3
here=$(cd "$(dirname "$0")" && pwd)
case "$out" in
s3://*)
  # The parts go into the bucket beside OUT; the plan and the jobs' logs need a folder that
  # every node reads, which a bucket is not.
  out=${out%/}
  parts="$out.parts"
  if [ -z "${PACKER_PLAN_DIR:-}" ]; then
    echo "submit: OUT $out is in a bucket (the parts go to $parts/part-I): set PACKER_PLAN_DIR to a folder on a shared file system, for the plan and the jobs' logs" >&2
    exit 2
  fi
  plandir=$(realpath -m "$PACKER_PLAN_DIR")
  ;;
*)
  out=$(realpath -m "$out")
  parts="$out.parts"
  mkdir -p "$parts"
  plandir=$parts
  [ -z "${PACKER_PLAN_DIR:-}" ] || plandir=$(realpath -m "$PACKER_PLAN_DIR")
  ;;
esac
mkdir -p "$plandir"
array=${PACKER_ARRAY:-0-$((n - 1))}
export PACKER="${PACKER:-$(command -v packer || echo packer)}"
build_args=("$@")
if [ "${PACKER_PLAN:-1}" != 0 ]; then
  plan="$plandir/plan"
  if [ -e "$plan" ]; then
    # Only a plan of this SRC: one of another source would build and merge that one into OUT.
    # Its header (line 1) names the source as JSON, as packer writes it: SRC is written so too.
    planned=$(head -n 1 "$plan" | sed -n 's/^{"packer_plan":[0-9]*,"packer":"[^"]*","kind":"[^"]*","source":"\(\([^"\\]\|\\.\)*\)".*/\1/p')
    want=${src//'\'/'\\'}; want=${want//'"'/'\"'}
    want=${want//'&'/'\u0026'}; want=${want//'<'/'\u003c'}; want=${want//'>'/'\u003e'}
    if [ "${planned%/}" != "${want%/}" ]; then
      shown=${planned//'\u0026'/'&'}; shown=${shown//'\u003c'/'<'}; shown=${shown//'\u003e'/'>'}; shown=${shown//'\"'/'"'}; shown=${shown//'\\'/'\'}
      echo "submit: the plan $plan lists the source $shown, not $src: remove it, and every part, to build $src; give the plan's source to retry its parts" >&2
      exit 2
    fi
    echo "submit: reusing the plan $plan (made before: remove it, and every part, to list $src again)" >&2
  else
    # The build flags packer plan takes (packer plan --help; a test keeps these lists equal to
    # packer's), and those of them that take no value.
    plan_flags=" from split classes image-column label-column image-key label-key fields images masks
      exif-orient max-pixels clip-len clip-stride short fps decode-timeout shuffle seed
      cut-inputs shard-size resize size max-size crop filter layout dtype mean std fast "
    plan_bools=" exif-orient shuffle fast "
    plan_args=()
    while [ $# -gt 0 ]; do
      a=$1; shift
      case "$a" in --*=*) name=${a%%=*} ;; --*) name=$a ;; *) continue ;; esac
      name=${name#--}
      case "$plan_flags" in *" $name "*) ;; *) continue ;; esac
      plan_args+=("$a")
      case "$a$plan_bools" in --*=* | *" $name "*) ;; *) [ $# -eq 0 ] || { plan_args+=("$1"); shift; } ;; esac
    done
    # --cut-inputs is decided here, once, and recorded in the plan; one in the flags wins.
    "$PACKER" plan "$src" -o "$plan" --cut-inputs "${PACKER_CUT_INPUTS:-auto}" ${plan_args[@]+"${plan_args[@]}"}
  fi
  src=$plan
fi
export PACKER_SRC="$src" PACKER_PARTS_DIR="$parts" PACKER_OUT="$out" PACKER_PARTS="$n" PACKER_ARGS="${build_args[*]}"
# shellcheck disable=SC2086
job=$(sbatch --parsable ${SBATCH_OPTS:-} --chdir="$plandir" --array="$array" --export=ALL "$here/build-parts.sbatch")
job=${job%%;*}
# shellcheck disable=SC2086
merge=$(sbatch --parsable ${SBATCH_OPTS:-} --chdir="$plandir" --dependency="afterok:$job" --kill-on-invalid-dep=yes --export=ALL "$here/merge.sbatch")
echo "parts: job $job (array $array of $n parts${plan:+, from the plan $plan}), merge: job ${merge%%;*}"
