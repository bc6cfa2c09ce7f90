"""Writes the packer wheel: the packer_reader package from python/, the packer binary as the
wheel's script `packer` (PKG-VERSION.data/scripts/packer, which pip installs as bin/packer
itself: the command is the binary, with no Python start-up in front of it), and the CRC-32C
library (scripts/build-crc.sh) as packer_reader/_lib/libpackercrc.so when given. The metadata
(version, summary, requirements, extras, keywords, classifiers, project URLs, license) is read
from python/pyproject.toml, its one source; the long description is python/README.md. A
license is written only as pyproject.toml's `license` (License-Expression, with the
repository's licence files in the wheel); a licence file in the repository without it is an
error, so the wheel never claims a licence the owners did not name, nor omits one they did.

usage: make_wheel.py BINARY PLATFORM_TAG OUT_DIR [CRC_LIBRARY]

PLATFORM_TAG may be a compressed set, platform tags joined by dots.

Written with zipfile rather than a build backend so it needs nothing beyond the standard
library and the same inputs give the same wheel bytes (fixed timestamps, sorted entries)."""

import base64
import hashlib
import os
import sys
import tomllib
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = "packer_reader"
STAMP = (2020, 1, 1, 0, 0, 0)


def project():
    """The [project] table of python/pyproject.toml."""
    with open(os.path.join(ROOT, "python", "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def requirements(proj):
    """The METADATA lines of the dependencies and of every extra, as pyproject.toml lists them."""
    lines = ["Requires-Python: %s" % proj["requires-python"]]
    lines += ["Requires-Dist: %s" % d for d in proj.get("dependencies", [])]
    for extra, deps in sorted(proj.get("optional-dependencies", {}).items()):
        lines.append("Provides-Extra: %s" % extra)
        lines += ['Requires-Dist: %s; extra == "%s"' % (d, extra) for d in deps]
    return lines


def described(proj):
    """The METADATA lines of the summary, keywords, classifiers and project URLs."""
    lines = ["Summary: %s" % proj["description"]]
    if proj.get("keywords"):
        lines.append("Keywords: %s" % ",".join(proj["keywords"]))
    lines += ["Classifier: %s" % c for c in proj.get("classifiers", [])]
    lines += ["Project-URL: %s, %s" % (k, v) for k, v in proj.get("urls", {}).items()]
    return lines


def licensed(proj):
    """(metadata version, METADATA lines, [(file name, bytes)]) of the license: pyproject.toml's
    `license` expression with the repository's licence files, or nothing when it names none."""
    names = sorted(n for n in os.listdir(ROOT) if n.upper().startswith(("LICENSE", "LICENCE", "COPYING", "NOTICE")))
    expr = proj.get("license")
    if expr is None:
        if names:
            sys.exit("make_wheel: the repository has %s but python/pyproject.toml names no license" % ", ".join(names))
        return "2.1", [], []
    if not isinstance(expr, str):
        sys.exit("make_wheel: python/pyproject.toml: license must be an SPDX expression string")
    files = [(n, open(os.path.join(ROOT, n), "rb").read()) for n in names]
    return "2.4", ["License-Expression: %s" % expr] + ["License-File: %s" % n for n, _ in files], files


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def main():
    binary, plat, out_dir = sys.argv[1:4]
    proj = project()
    version = proj["version"]
    dist = "%s-%s" % (PKG, version)
    info = dist + ".dist-info"
    files = []  # (name in the wheel, bytes, executable)
    src = os.path.join(ROOT, "python", PKG)
    for name in sorted(os.listdir(src)):
        if name.endswith(".py"):
            with open(os.path.join(src, name), "rb") as f:
                files.append(("%s/%s" % (PKG, name), f.read(), False))
    with open(binary, "rb") as f:
        files.append(("%s.data/scripts/packer" % dist, f.read(), True))
    if len(sys.argv) > 4:
        with open(sys.argv[4], "rb") as f:
            files.append(("%s/_lib/libpackercrc.so" % PKG, f.read(), False))
    readme = open(os.path.join(ROOT, "python", "README.md"), encoding="utf-8").read()
    meta_version, license_lines, license_files = licensed(proj)
    files += [("%s/licenses/%s" % (info, n), d, False) for n, d in license_files]
    metadata = "\n".join([
        "Metadata-Version: %s" % meta_version,
        "Name: %s" % PKG,
        "Version: %s" % version,
        *described(proj),
        *license_lines,
        *requirements(proj),
        "Description-Content-Type: text/markdown",
        "",
        readme,
    ])
    # A compressed tag set (PEP 425: "manylinux_2_17_x86_64.manylinux2014_x86_64") names one tag
    # per platform in WHEEL, and the whole set in the file name.
    wheel = "\n".join(["Wheel-Version: 1.0", "Generator: packer scripts/make_wheel.py", "Root-Is-Purelib: false",
                        *["Tag: py3-none-%s" % p for p in plat.split(".")], ""])
    files += [(info + "/METADATA", metadata.encode(), False), (info + "/WHEEL", wheel.encode(), False),
              (info + "/top_level.txt", (PKG + "\n").encode(), False)]
    record = [record_line(n, d) for n, d, _ in files] + [info + "/RECORD,,"]
    files.append((info + "/RECORD", ("\n".join(record) + "\n").encode(), False))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "%s-py3-none-%s.whl" % (dist, plat))
    with zipfile.ZipFile(path + ".tmp", "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, exe in files:
            zi = zipfile.ZipInfo(name, STAMP)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = ((0o755 if exe else 0o644) | 0o100000) << 16
            z.writestr(zi, data)
    os.replace(path + ".tmp", path)
    print(path)


if __name__ == "__main__":
    main()
