#!/usr/bin/env bash
# scripts/k8s/render.sh WHAT: prints the Kubernetes manifests of a packer build in parts, with
# every value filled in from one place (the environment below), for kubectl apply -f -.
# WHAT is pvc (the output volume), plan (the Job that lists the source once, into /out/NAME.plan),
# parts (the Indexed Job of the parts, which build from that plan) or merge (the merge Job).
#
#   export PACKER_IMAGE=registry.example/packer@sha256:...   # the image (scripts/build-oci.sh)
#   export PACKER_NAME=in224 PACKER_PARTS=64                 # the dataset's name, the part count
#   export PACKER_SRC_CLAIM=imagenet PACKER_SRC=/data/train  # source claim (mounted read-only at /data), SRC
#   export PACKER_STORAGE_CLASS=nfs-client PACKER_OUT_SIZE=200Gi   # a ReadWriteMany class
#   export PACKER_BUILD_ARGS="--resize 256 --crop 224"
#   scripts/k8s/render.sh pvc | kubectl apply -f -
#   scripts/k8s/render.sh plan | kubectl apply -f -
#   kubectl wait --for=condition=complete --timeout=24h job/in224-plan
#   scripts/k8s/render.sh parts | kubectl apply -f -
#   kubectl wait --for=condition=complete --timeout=24h job/in224-parts
#   scripts/k8s/render.sh merge | kubectl apply -f -
#
# Optional: PACKER_OUT_CLAIM (default packer-out), PACKER_PARALLELISM (default PACKER_PARTS),
# PACKER_CPU (default 4), PACKER_MEMORY (default 8Gi), PACKER_MERGE_MEMORY (default 1Gi),
# PACKER_RETRIES (default 2: retries of each part, and of the merge).
# PACKER_PLAN=0 renders the parts Job without a plan: each pod lists PACKER_SRC itself (set it
# for parts then), and there is no plan Job (render.sh plan is refused).
# The part count is written once here into both the Job's completions and the pods'
# PACKER_PARTS; the output is checked with check.py (they agree, nothing left unfilled) before
# it is printed. Manifests changed afterwards (kustomize, an editor) can be checked the same way:
#   python3 scripts/k8s/check.py FILE...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
what=${1:-}
case "$what" in
pvc) tmpl=output-pvc.yaml ;;
plan) tmpl=plan-job.yaml ;;
parts) tmpl=parts-job.yaml ;;
merge) tmpl=merge-job.yaml ;;
*) echo "usage: $0 pvc|plan|parts|merge (values from the environment: see the header)" >&2; exit 2 ;;
esac
# need VAR WHY: VAR's value, which must be set; opt VAR DEFAULT: VAR's value or DEFAULT.
# Values are written into the YAML as they are, or double-quoted: no quotes, backslashes, spaces,
# | (sed's delimiter) or & (sed's whole match) in them.
need() {
  local v=${!1:-}
  [ -n "$v" ] || { echo "render: set $1 ($2)" >&2; exit 2; }
  word "$1" "$v"
}
opt() { word "$1" "${!1:-$2}"; }
word() {
  case "$2" in *[\"\\\'\|\&[:space:]]*)
    echo "render: $1=$2: quotes, backslashes, spaces, | and & are not allowed" >&2; exit 2 ;;
  esac
  printf '%s' "$2"
}
name=$(need PACKER_NAME "the dataset's name: Job names, /out/NAME")
out_claim=$(opt PACKER_OUT_CLAIM packer-out)
retries=$(opt PACKER_RETRIES 2)
case "$what" in
pvc)
  class=$(need PACKER_STORAGE_CLASS "a storage class whose volumes are ReadWriteMany")
  size=$(need PACKER_OUT_SIZE "the output volume's size: parts plus the merged dataset: about the dataset, its parts linked into it (--cut-inputs), twice without") ;;
*)
  image=$(need PACKER_IMAGE "the image, best by digest: registry/packer@sha256:...")
  if [ "$what" != plan ]; then
    parts=$(need PACKER_PARTS "the number of parts")
    [[ "$parts" =~ ^[1-9][0-9]*$ ]] || { echo "render: PACKER_PARTS=$parts: want a positive number" >&2; exit 2; }
    parallelism=$(opt PACKER_PARALLELISM "$parts")
  fi
  cpu=$(opt PACKER_CPU 4)
  memory=$(opt PACKER_MEMORY 8Gi)
  merge_memory=$(opt PACKER_MERGE_MEMORY 1Gi)
  ;;
esac
noplan=
if [ "${PACKER_PLAN:-1}" = 0 ]; then
  [ "$what" != plan ] || { echo "render: PACKER_PLAN=0: there is no plan Job (the parts Job lists PACKER_SRC itself)" >&2; exit 2; }
  [ "$what" != parts ] || noplan=1
fi
if [ "$what" = plan ] || [ -n "$noplan" ]; then
  src=$(need PACKER_SRC "the source's path in the pod (a folder or a file): under /data, where PACKER_SRC_CLAIM is mounted")
  case "$src" in /data | /data/*) ;; *) echo "render: PACKER_SRC=$src: want a path under /data" >&2; exit 2 ;; esac
fi
# The parts build from the plan the plan Job wrote, or with PACKER_PLAN=0 from the source.
parts_src=/out/$name.plan
[ -z "$noplan" ] || parts_src="\"$src\""
if [ "$what" = plan ] || [ "$what" = parts ]; then
  src_claim=$(need PACKER_SRC_CLAIM "the claim of the source's volume")
  # The plan Job takes the build args that packer plan takes (a test keeps these lists equal to
  # packer plan's flags, and those of them that take no value), the parts Job all of them.
  plan_flags=" from split classes image-column label-column image-key label-key fields images masks
    exif-orient max-pixels clip-len clip-stride short fps decode-timeout shuffle seed
    cut-inputs shard-size resize size max-size crop filter layout dtype mean std fast "
  plan_bools=" exif-orient shuffle fast "
  build_args= plan_args= value=
  for w in ${PACKER_BUILD_ARGS:-}; do
    w=", \"$(word PACKER_BUILD_ARGS "$w")\""
    build_args+=$w
    a=${w:3:${#w}-4}
    if [ -n "$value" ]; then plan_args+=$w; value=; continue; fi
    case "$a" in --*=*) fl=${a%%=*} ;; --*) fl=$a ;; *) continue ;; esac
    fl=${fl#--}
    case "$plan_flags" in *" $fl "*) ;; *) continue ;; esac
    plan_args+=$w
    case "$a$plan_bools" in --*=* | *" $fl "*) ;; *) value=1 ;; esac
  done
  [ "$what" = plan ] && build_args= || plan_args=
fi
merge_parts=
if [ "$what" = merge ]; then
  for ((i = 0; i < parts; i++)); do merge_parts+=", /out/$name.parts/part-$i"; done
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
sed -e "s|@NAME@|$name|g" -e "s|@OUT_CLAIM@|$out_claim|g" \
  -e "s|@STORAGE_CLASS@|${class:-}|g" -e "s|@OUT_SIZE@|${size:-}|g" \
  -e "s|@IMAGE@|${image:-}|g" -e "s|@PARTS@|${parts:-}|g" -e "s|@LAST@|$((${parts:-1} - 1))|g" \
  -e "s|@PARALLELISM@|${parallelism:-}|g" -e "s|@RETRIES@|$retries|g" \
  -e "s|@CPU@|${cpu:-}|g" -e "s|@MEMORY@|${memory:-}|g" -e "s|@MERGE_MEMORY@|${merge_memory:-}|g" \
  -e "s|@SRC@|${src:-}|g" -e "s|@SRC_CLAIM@|${src_claim:-}|g" -e "s|@PARTS_SRC@|$parts_src|g" \
  -e "s|@BUILD_ARGS@|${build_args:-}|g" -e "s|@PLAN_ARGS@|${plan_args:-}|g" -e "s|@MERGE_PARTS@|$merge_parts|g" \
  "$here/$tmpl" >"$out"
python3 "$here/check.py" "$out" >&2
cat "$out"
