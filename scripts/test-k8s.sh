#!/usr/bin/env bash
# scripts/test-k8s.sh: the container image and the Kubernetes manifests, as far as they run
# without a cluster.
#
#   1. Reproducible image: scripts/build-oci.sh packages the release binary twice, the second
#      time from a copy with another modification time and mode, under umask 077: the two image
#      layouts must be the same bytes (same manifest digest); with another SOURCE_DATE_EPOCH the
#      digest must change (the time is in the image, so the first check can fail).
#   2. Manifests: scripts/k8s/render.sh fills the templates, and packer cluster k8s (the same
#      templates embedded in the binary) must print the same bytes; the output must pass
#      kubernetes-validate --strict (PyPI; it carries the Kubernetes JSON schemas, so it runs
#      offline) for Kubernetes 1.29 and 1.37, and scripts/k8s/check.py (completions equal to
#      PACKER_PARTS, read-only source, ReadWriteMany output); so must the parts Job rendered
#      without a plan (PACKER_PLAN=0, packer cluster k8s parts --no-plan: the pods read the
#      source). A misspelled field and a count that disagrees with completions must each be
#      refused.
#   3. The pods in a container runtime: podman (Debian's, rootful, its own storage under a
#      temporary folder, runtime runc) loads the image and runs the containers of the rendered
#      Jobs as Kubernetes would: each part's pod with the Job's args and env, $(JOB_COMPLETION_INDEX)
#      expanded to its index, as user 65532, read-only root file system, no capabilities, the
#      source folder mounted read-only at /data, the output folder at /out, a tmpfs at /tmp:
#      first the plan Job's container (packer plan into /out/ds.plan, K resolved there), then
#      the parts', which build from that plan, then the merge Job's container, then packer verify. The parts are cut as the Job cuts
#      them (--cut-inputs auto), so the merged dataset must be byte-identical to a one-machine
#      build of the host's binary with --cut-inputs auto, and each of its shards a part's file
#      (the same inode: merged by link, not rewritten). Skipped, saying why, when
#      PACKER_K8S_SKIP_RUN=1 (a machine without a usable container runtime).
#
# Needs root (or sudo) for apt-get and podman. About 30 s once the packages are installed.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
need=()
for p in podman runc python3-yaml ca-certificates; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ] && [ "${PACKER_K8S_SKIP_RUN:-}" != 1 ]; then
  echo "test-k8s: installing ${need[*]}"
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
# podman names an image pulled from oci:PATH after PATH, which must then be lowercase.
tmp=$(mktemp -d | tr '[:upper:]' '[:lower:]')
mkdir -p "$tmp"
store=$tmp/podman
cleanup() {
  if [ -d "$store" ]; then
    $SUDO podman --root "$store/root" --runroot "$store/run" rm -a -f >/dev/null 2>&1 || true
    $SUDO podman --root "$store/root" --runroot "$store/run" system reset -f >/dev/null 2>&1 || true
  fi
  $SUDO rm -rf "$tmp"
}
trap cleanup EXIT

# 1. The image, twice from the same inputs, once with another time.
bash scripts/build-release.sh "$tmp/packer" >/dev/null
version=$("$tmp/packer" --version | awk '{print $2}')
unset SOURCE_DATE_EPOCH
a=$(bash scripts/build-oci.sh "$tmp/packer" "$tmp/oci-a" | tail -1)
mkdir "$tmp/copy"
cp "$tmp/packer" "$tmp/copy/packer"
chmod 0700 "$tmp/copy/packer"
touch -d '2001-02-03 04:05:06' "$tmp/copy/packer"
b=$( (umask 077 && bash scripts/build-oci.sh "$tmp/copy/packer" "$tmp/oci-b") | tail -1)
c=$(SOURCE_DATE_EPOCH=86400 bash scripts/build-oci.sh "$tmp/packer" "$tmp/oci-c" | tail -1)
echo "test-k8s: image $a (again: $b; with SOURCE_DATE_EPOCH=86400: $c)"
[ "$a" = "$b" ] || { echo "test-k8s: FAILED: the same inputs gave two images, $a and $b" >&2; diff -r "$tmp/oci-a" "$tmp/oci-b" >&2 || true; exit 1; }
diff -r "$tmp/oci-a" "$tmp/oci-b" >/dev/null || { echo "test-k8s: FAILED: the two layouts differ" >&2; exit 1; }
[ "$a" != "$c" ] || { echo "test-k8s: FAILED: SOURCE_DATE_EPOCH did not change the image" >&2; exit 1; }
[[ "$a" =~ ^sha256:[0-9a-f]{64}$ ]] || { echo "test-k8s: FAILED: build-oci.sh printed $a, not a digest" >&2; exit 1; }

# 2. The manifests: rendered, schema-validated, checked.
export PACKER_IMAGE="registry.example/packer@$a" PACKER_NAME=ds PACKER_PARTS=3 \
  PACKER_SRC_CLAIM=source PACKER_SRC=/data/train PACKER_STORAGE_CLASS=nfs-client PACKER_OUT_SIZE=1Gi \
  PACKER_CPU=1 PACKER_MEMORY=512Mi PACKER_BUILD_ARGS="--resize 20 --crop 16 --shard-size 4KiB"
m=$tmp/manifests
mkdir "$m"
for w in pvc plan parts merge; do bash scripts/k8s/render.sh "$w" >"$m/$w.yaml" 2>"$tmp/render.log" || { cat "$tmp/render.log" >&2; exit 1; }; done
# What the binary prints (packer cluster k8s, the templates embedded in it: what a pip or binary
# user has) is these manifests, byte for byte, for the same values as flags; and with the
# optional values left to their defaults.
for w in pvc plan parts merge; do
  "$tmp/packer" cluster k8s "$w" --name "$PACKER_NAME" --image "$PACKER_IMAGE" --parts "$PACKER_PARTS" \
    --src-claim "$PACKER_SRC_CLAIM" --src "$PACKER_SRC" --storage-class "$PACKER_STORAGE_CLASS" \
    --out-size "$PACKER_OUT_SIZE" --cpu "$PACKER_CPU" --memory "$PACKER_MEMORY" --build-args "$PACKER_BUILD_ARGS" >"$tmp/printed-$w.yaml"
  cmp "$m/$w.yaml" "$tmp/printed-$w.yaml" || { echo "test-k8s: FAILED: packer cluster k8s $w differs from scripts/k8s/render.sh $w" >&2; diff "$m/$w.yaml" "$tmp/printed-$w.yaml" >&2; exit 1; }
  (unset PACKER_CPU PACKER_MEMORY PACKER_BUILD_ARGS; PACKER_PARALLELISM=2 PACKER_RETRIES=4 bash scripts/k8s/render.sh "$w" 2>/dev/null) >"$tmp/defaults-$w.yaml"
  "$tmp/packer" cluster k8s "$w" --name "$PACKER_NAME" --image "$PACKER_IMAGE" --parts "$PACKER_PARTS" --parallelism 2 --retries 4 \
    --src-claim "$PACKER_SRC_CLAIM" --src "$PACKER_SRC" --storage-class "$PACKER_STORAGE_CLASS" --out-size "$PACKER_OUT_SIZE" |
    cmp - "$tmp/defaults-$w.yaml" || { echo "test-k8s: FAILED: packer cluster k8s $w with defaults differs from render.sh" >&2; exit 1; }
done
# The parts Job without a plan (PACKER_PLAN=0): built from the source, the same from both.
PACKER_PLAN=0 bash scripts/k8s/render.sh parts >"$tmp/parts-noplan.yaml" 2>"$tmp/render.log" || { cat "$tmp/render.log" >&2; exit 1; }
"$tmp/packer" cluster k8s parts --no-plan --name "$PACKER_NAME" --image "$PACKER_IMAGE" --parts "$PACKER_PARTS" \
  --src-claim "$PACKER_SRC_CLAIM" --src "$PACKER_SRC" --cpu "$PACKER_CPU" --memory "$PACKER_MEMORY" --build-args "$PACKER_BUILD_ARGS" |
  cmp - "$tmp/parts-noplan.yaml" || { echo "test-k8s: FAILED: packer cluster k8s parts --no-plan differs from PACKER_PLAN=0 render.sh parts" >&2; exit 1; }
grep -q "args: \[build, \"$PACKER_SRC\", -o," "$tmp/parts-noplan.yaml" || { echo "test-k8s: FAILED: the parts Job without a plan does not build from $PACKER_SRC" >&2; exit 1; }
venv=${XDG_CACHE_HOME:-$HOME/.cache}/packer/k8s-validate-venv-1
if ! "$venv/bin/kubernetes-validate" --version >/dev/null 2>&1; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: "kubernetes-validate==1.37.0"
fi
for k in 1.29 1.37; do
  "$venv/bin/kubernetes-validate" --strict --quiet -k "$k" "$m/pvc.yaml" "$m/plan.yaml" "$m/parts.yaml" "$m/merge.yaml" "$tmp/parts-noplan.yaml" ||
    { echo "test-k8s: FAILED: the manifests do not validate against Kubernetes $k" >&2; exit 1; }
done
/usr/bin/python3 scripts/k8s/check.py "$m"/*.yaml
/usr/bin/python3 scripts/k8s/check.py "$tmp/parts-noplan.yaml" "$m/merge.yaml"
sed 's/readOnly: true}/readOnly: true, readonly: true}/' "$m/parts.yaml" >"$tmp/bad-field.yaml"
if "$venv/bin/kubernetes-validate" --strict --quiet -k 1.37 "$tmp/bad-field.yaml" >/dev/null 2>&1; then
  echo "test-k8s: FAILED: the validator passed a misspelled field" >&2; exit 1
fi
sed 's/^  completions: 3$/  completions: 4/' "$m/parts.yaml" >"$tmp/bad-count.yaml"
if /usr/bin/python3 scripts/k8s/check.py "$tmp/bad-count.yaml" >/dev/null 2>&1 || cmp -s "$m/parts.yaml" "$tmp/bad-count.yaml"; then
  echo "test-k8s: FAILED: check.py passed completions 4 with PACKER_PARTS 3" >&2; exit 1
fi
echo "test-k8s: manifests valid for Kubernetes 1.29 and 1.37 (strict), with a plan and without, part count checked"

# 3. The Jobs' containers in podman.
if [ "${PACKER_K8S_SKIP_RUN:-}" = 1 ]; then
  echo "test-k8s: PACKER_K8S_SKIP_RUN=1: the containers were not run"
  echo "test-k8s: ok, without the container run ($(($(date +%s) - start)) s)"
  exit 0
fi
go run ./internal/tools/mkimages -n 45 -classes 3 -dir "$tmp/data/train" >/dev/null
mkdir "$tmp/out"
$SUDO chown 65532:65532 "$tmp/out"
# Kubernetes sets no rlimits; podman's defaults raise them, which root without CAP_SYS_RESOURCE
# (a container or VM) may not: set them below the usual limits instead.
pm=($SUDO podman --root "$store/root" --runroot "$store/run" --runtime runc --cgroup-manager cgroupfs --events-backend none)
"${pm[@]}" pull -q "oci:$tmp/oci-a:$version" >/dev/null
image=$("${pm[@]}" images -q | head -1)
# pod FILE INDEX: the packer container of the Job in FILE as pod INDEX would run it, one word a
# line: podman flags for its env (--env=K=V) and volumes (--volume=HOST:PATH[:ro], --tmpfs=PATH;
# the claims map to the folders below), then a line "--", then its args with $(VAR) expanded.
pod() {
  /usr/bin/python3 - "$1" "$2" "$tmp" <<'PYEOF'
import re, sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
spec = job["spec"]["template"]["spec"]
c = [c for c in spec["containers"] if c["name"] == "packer"][0]
env = {}
for e in c.get("env", []):
    if "value" in e:
        env[e["name"]] = e["value"]
    elif "completion-index" in e["valueFrom"]["fieldRef"]["fieldPath"]:
        env[e["name"]] = sys.argv[2]
if job["spec"].get("completionMode") == "Indexed":
    env["JOB_COMPLETION_INDEX"] = sys.argv[2]
for k, v in sorted(env.items()):
    print("--env=%s=%s" % (k, v))
hosts = {"source": sys.argv[3] + "/data", "packer-out": sys.argv[3] + "/out"}
vols = {v["name"]: v for v in spec["volumes"]}
for m in c["volumeMounts"]:
    v = vols[m["name"]]
    if "emptyDir" in v:
        print("--tmpfs=" + m["mountPath"])
    else:
        ro = m.get("readOnly") or v["persistentVolumeClaim"].get("readOnly")
        print("--volume=%s:%s%s" % (hosts[v["persistentVolumeClaim"]["claimName"]], m["mountPath"], ":ro" if ro else ""))
print("--")
for a in c["args"]:
    print(re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], str(a)))
PYEOF
}
# run_pod LOG FILE INDEX [ARGS...]: runs pod INDEX of the Job in FILE (its args, or ARGS) with the
# pod's security settings.
run_pod() {
  local log=$1 words flags=() args=() seen=
  mapfile -t words < <(pod "$2" "$3")
  shift 3
  for w in "${words[@]}"; do
    if [ -n "$seen" ]; then args+=("$w"); elif [ "$w" = -- ]; then seen=1; else flags+=("$w"); fi
  done
  [ $# -eq 0 ] || args=("$@")
  "${pm[@]}" run --rm --network none --user 65532:65532 --read-only --cap-drop all \
    --security-opt no-new-privileges --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 \
    "${flags[@]}" "$image" "${args[@]}" >"$log" 2>&1 ||
    { cat "$log" >&2; echo "test-k8s: FAILED: podman run ${flags[*]} ${args[*]}" >&2; exit 1; }
}
run_pod "$tmp/plan.log" "$m/plan.yaml" 0
grep -q '"cut-inputs":"5"' "$tmp/out/ds.plan" || { echo "test-k8s: FAILED: the plan Job's plan does not record --cut-inputs 5" >&2; exit 1; }
echo "test-k8s: ds-plan: $(head -1 "$tmp/plan.log")"
for i in 0 1 2; do
  run_pod "$tmp/part-$i.log" "$m/parts.yaml" "$i"
  echo "test-k8s: pod $i of ds-parts: $(tail -1 "$tmp/part-$i.log")"
done
# A pod retried (backoffLimitPerIndex) rebuilds its own part over the first attempt, the same bytes.
sums() { (cd "$tmp/out/ds.parts/part-1" && $SUDO find . -type f -exec sha256sum {} + | sort -k2); }
before=$(sums)
run_pod "$tmp/retry.log" "$m/parts.yaml" 1
[ "$(sums)" = "$before" ] || { echo "test-k8s: FAILED: pod 1 run again changed part-1" >&2; exit 1; }
echo "test-k8s: pod 1 run again: part-1 replaced with the same bytes"
run_pod "$tmp/merge.log" "$m/merge.yaml" 0
echo "test-k8s: ds-merge: $(tail -1 "$tmp/merge.log")"
run_pod "$tmp/verify.log" "$m/merge.yaml" 0 verify /out/ds
echo "test-k8s: verify (in the merge pod's setting): $(tail -1 "$tmp/verify.log")"
# The source is read-only in the pod: a build that tries to write there fails.
if "${pm[@]}" run --rm --network none --user 65532:65532 --read-only --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 \
  -v "$tmp/data:/data:ro" --tmpfs /tmp "$image" build /data/train -o /data/out >"$tmp/ro.log" 2>&1 ||
  ! grep -q 'read-only file system' "$tmp/ro.log"; then
  cat "$tmp/ro.log" >&2
  echo "test-k8s: FAILED: a build into the read-only source did not fail for that reason" >&2; exit 1
fi
# The merged dataset is the one-machine build.
# 16x16 RGB records of 768 bytes in 4 KiB shards: --cut-inputs auto is K = 5 (9 chunks of 45).
"$tmp/packer" build "$tmp/data/train" -o "$tmp/host" --resize 20 --crop 16 --shard-size 4KiB --cut-inputs auto >/dev/null 2>"$tmp/host.err"
grep -q 'K = 5 ' "$tmp/host.err" || { cat "$tmp/host.err" >&2; echo "test-k8s: FAILED: --cut-inputs auto did not resolve to 5" >&2; exit 1; }
n=0
while read -r f; do
  $SUDO cmp "$tmp/host/$f" "$tmp/out/ds/$f" || { echo "test-k8s: FAILED: $f of the merged dataset differs from the one-machine build" >&2; exit 1; }
  n=$((n + 1))
done < <(cd "$tmp/host" && find . -type f | sort)
[ "$(cd "$tmp/out/ds" && find . -type f | wc -l)" -eq "$n" ] || { echo "test-k8s: FAILED: the merged dataset has other files than the one-machine build" >&2; exit 1; }
[ "$n" -gt 2 ] || { echo "test-k8s: FAILED: the one-machine build wrote $n files" >&2; exit 1; }
# Merged by link: every shard of the merged dataset is a file of a part (same inode).
for f in "$tmp/out/ds"/shard-*.pks; do
  $SUDO find "$tmp/out/ds.parts" -samefile "$f" | grep -q /part- ||
    { echo "test-k8s: FAILED: $f is not a part's file: the merge rewrote it" >&2; exit 1; }
done
echo "test-k8s: the merged dataset ($n files) is byte-identical to the one-machine build with --cut-inputs auto, its shards linked to the parts'"
echo "test-k8s: ok ($(($(date +%s) - start)) s)"
