#!/usr/bin/env python3
"""Checks packer's Kubernetes manifests for what a schema cannot: scripts/k8s/check.py FILE...

- nothing left unfilled (an @NAME@ of the templates);
- in an Indexed Job whose packer container runs `build ... --part auto`, the part count the pods
  get (the PACKER_PARTS env value, or --parts N) equals the Job's completions: the count is the
  whole build's, and a Job of 8 pods building parts of 6 would leave parts missing or refused;
- a volume mounted at /data (the source) is mounted read-only, and its claim is read-only;
- a claim defined among the files and mounted at /out is ReadWriteMany;
- a merge Job given with its parts Job merges exactly part-0 .. part-(completions-1).
Prints one line per Job checked; exits 1 naming the file and the object on the first fault.
"""
import re
import sys

import yaml


def fail(where, msg):
    sys.exit("check: %s: %s" % (where, msg))


def packer_container(spec):
    for c in spec.get("containers", []):
        if c.get("name") == "packer":
            return c
    return None


def main(paths):
    docs = []
    for path in paths:
        with open(path) as f:
            text = f.read()
        m = re.search(r"@[A-Z_]+@", text)
        if m:
            fail(path, "%s is not filled in (render the templates with scripts/k8s/render.sh)" % m.group(0))
        docs += [(path, d) for d in yaml.safe_load_all(text) if d]
    claims = {d["metadata"]["name"]: d for _, d in docs if d.get("kind") == "PersistentVolumeClaim"}
    parts_jobs, merges = {}, []
    for path, d in docs:
        if d.get("kind") != "Job":
            continue
        name = d["metadata"]["name"]
        where = "%s: Job %s" % (path, name)
        pod = d["spec"]["template"]["spec"]
        c = packer_container(pod)
        if c is None:
            fail(where, "no container named packer")
        args = [str(a) for a in c.get("args", [])]
        vols = {v["name"]: v for v in pod.get("volumes", [])}
        for m in c.get("volumeMounts", []):
            claim = vols.get(m["name"], {}).get("persistentVolumeClaim")
            if m["mountPath"] == "/data" and not (m.get("readOnly") and claim and claim.get("readOnly")):
                fail(where, "the source volume at /data is not mounted read-only (volumeMounts and claim)")
            if m["mountPath"] == "/out" and claim and claim["claimName"] in claims:
                modes = claims[claim["claimName"]]["spec"].get("accessModes", [])
                if "ReadWriteMany" not in modes:
                    fail(where, "claim %s at /out is %s, not ReadWriteMany" % (claim["claimName"], modes))
        if args[:1] == ["merge"]:
            merges.append((where, args))
            print("check: %s: merge of %d parts" % (where, sum(1 for a in args if "/part-" in a)))
            continue
        if args[:1] != ["build"] or "--part" not in args or args[args.index("--part") + 1] != "auto":
            continue
        if d["spec"].get("completionMode") != "Indexed":
            fail(where, "--part auto needs completionMode: Indexed (the index is JOB_COMPLETION_INDEX)")
        completions = d["spec"].get("completions")
        counts = []
        if "--parts" in args:
            counts.append(("--parts", args[args.index("--parts") + 1]))
        for e in c.get("env", []):
            if e["name"] == "PACKER_PARTS":
                if "value" not in e:
                    fail(where, "PACKER_PARTS must be a value (equal to completions), not %s" % e)
                counts.append(("PACKER_PARTS", e["value"]))
        if not counts:
            fail(where, "no part count: set PACKER_PARTS to completions (%s)" % completions)
        for what, n in counts:
            if str(n) != str(completions):
                fail(where, "%s is %s but completions is %s: they must be the same number" % (what, n, completions))
        out = args[args.index("-o") + 1]
        parts_jobs[out.rsplit("/", 1)[0]] = completions
        print("check: %s: %s parts, PACKER_PARTS = completions" % (where, completions))
    for where, args in merges:
        listed = [a for a in args if "/part-" in a]
        folder = listed[0].rsplit("/", 1)[0] if listed else ""
        if folder in parts_jobs:
            want = ["%s/part-%d" % (folder, i) for i in range(parts_jobs[folder])]
            if sorted(listed) != sorted(want):
                fail(where, "merges %d parts of %s, the parts Job builds %d" % (len(listed), folder, parts_jobs[folder]))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
