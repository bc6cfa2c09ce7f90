"""manifest.json: read and check a dataset's manifest (its seal, its fields, its file
paths), and find the files it lists, in a local folder or below an s3:// prefix."""

import hashlib
import json
import os
import re

import numpy as np

from . import _s3
from ._errors import FormatError
from ._shard import parse_sample_spec

MANIFEST = "manifest.json"
MAX_MANIFEST = 1 << 30
FORMATS = ("shards", "npy", "hdf5")


# The manifest's last member is its own checksum (shard/FORMAT.md, "Dataset"): the file ends with
# _SUM_OPEN + 64 lower-case hex digits + _SUM_CLOSE, the SHA-256 of the file with that member
# replaced by "\n}\n". Checked on the bytes, so no JSON re-encoding is involved.
_SUM_OPEN = b',\n  "manifest_sha256": "'
_SUM_CLOSE = b'"\n}\n'
_HEX = frozenset(b"0123456789abcdef")


def _check_seal(path, raw):
    n = len(_SUM_OPEN) + 64 + len(_SUM_CLOSE)
    tail = raw[-n:]
    if len(raw) < n or not tail.startswith(_SUM_OPEN) or not tail.endswith(_SUM_CLOSE):
        raise FormatError(path, "has no manifest_sha256: written by packer < 0.2 or edited; rebuild")
    want = tail[len(_SUM_OPEN):len(_SUM_OPEN) + 64]
    got = hashlib.sha256(raw[:-n] + b"\n}\n").hexdigest().encode()
    if not set(want) <= _HEX or want != got:
        raise FormatError(path, "checksum mismatch: the manifest was edited or damaged")

# A replacing build to a bucket (packer build -o s3://... --force) writes its files under a
# generation sub-prefix, and its manifest names them so: ".packer-gen-<16 hex>/shard-00000.pks".
_GENERATION = re.compile(r"^\.packer-gen-[0-9a-fA-F]{16}$")


_HEX64 = re.compile(r"[0-9a-f]{64}")


def valid_file_path(p):
    """A manifest file path: one name (no '.', '..', backslash), or one name under a generation
    sub-prefix .packer-gen-<16 hex digits>/. Nothing else (absolute paths, other folders)."""
    if not isinstance(p, str) or not p or "\\" in p or "\x00" in p:
        return False
    parts = p.split("/")
    if len(parts) == 2 and _GENERATION.match(parts[0]):
        parts = parts[1:]
    return len(parts) == 1 and parts[0] not in ("", ".", "..")


def load_manifest(directory, store=None):
    """Read and sanity-check directory/manifest.json (or the manifest.json of a bucket's prefix,
    through store); return the dict. A manifest whose manifest_sha256 is missing or does not
    match its bytes is refused (FormatError)."""
    if store is None and _s3.is_url(str(directory)):
        store = _s3.S3Store(str(directory))
        try:
            return load_manifest(directory, store)
        finally:
            store.close()
    if store is not None:
        path = store.object_url(MANIFEST)
        raw = store.get_small(MANIFEST, MAX_MANIFEST)
    else:
        path = os.path.join(str(directory), MANIFEST)
        try:
            size = os.stat(path).st_size
        except OSError as e:
            raise FormatError(path, "cannot open manifest: %s" % e.strerror)
        if size > MAX_MANIFEST:
            raise FormatError(path, "manifest larger than %d bytes" % MAX_MANIFEST)
        with open(path, "rb") as f:
            raw = f.read()
    _check_seal(path, raw)
    try:
        m = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise FormatError(path, "invalid manifest JSON: %s" % e)
    if not isinstance(m, dict):
        raise FormatError(path, "manifest is not a JSON object")
    if m.get("format") not in FORMATS:
        raise FormatError(path, "unknown format %r" % (m.get("format"),))
    count = m.get("count")
    if not isinstance(count, int) or count < 0:
        raise FormatError(path, "invalid count %r" % (count,))
    parse_sample_spec(m.get("sample"), path)
    classes = m.get("classes") or []
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        raise FormatError(path, "classes must be a list of names")
    cc = m.get("class_counts") or []
    if not isinstance(cc, list) or not all(isinstance(c, int) and not isinstance(c, bool) for c in cc):
        raise FormatError(path, "class_counts must be a list of integers")
    files = m.get("files") or []
    if not isinstance(files, list):
        raise FormatError(path, "files is not a list")
    for fe in files:
        p = fe.get("path") if isinstance(fe, dict) else None
        if not valid_file_path(p):
            raise FormatError(path, "file path %r is not a local relative path (a name, or a name under "
                              ".packer-gen-<16 hex digits>/)" % (p,))
        if not isinstance(fe.get("size", 0), int) or fe.get("size", 0) < 0:
            raise FormatError(path, "file %s: invalid size" % p)
        pin = fe.get("index_sha256")
        if pin is not None and not (isinstance(pin, str) and _HEX64.fullmatch(pin)):
            raise FormatError(path, "file %s: index_sha256 %r is not 64 lower-case hex digits" % (p, pin))
    _check_cuts(path, m, files)
    label = m.get("label") or {}
    aux = (label.get("aux") or []) if isinstance(label, dict) else []
    if not isinstance(aux, list) or not all(isinstance(a, str) and a and "/" not in a for a in aux):
        raise FormatError(path, "label.aux must be a list of column names")
    return m


def _check_cuts(path, m, files):
    """shard/FORMAT.md "Dataset": in a dataset cut at fixed input positions (cut_inputs) every
    shard entry names its chunk and piece, chunks do not decrease and a chunk's pieces are 0, 1, ...
    in order; without cut_inputs no entry names one."""
    cut = m.get("cut_inputs", 0)
    if not isinstance(cut, int) or isinstance(cut, bool) or cut < 0:
        raise FormatError(path, "cut_inputs %r is not a count" % (cut,))
    prev = None
    for fe in files:
        p, c = fe.get("path"), fe.get("shard")
        if m.get("format") != "shards" or not str(p).endswith(".pks"):
            continue
        if not cut:
            if c is not None:
                raise FormatError(path, "file %s has a chunk and piece, and the manifest no cut_inputs" % p)
            continue
        ok = isinstance(c, dict) and set(c) == {"chunk", "piece"} and all(
            isinstance(c[k], int) and not isinstance(c[k], bool) and c[k] >= 0 for k in c)
        if not ok:
            raise FormatError(path, "cut_inputs %d, and file %s has no valid chunk and piece (%r)" % (cut, p, c))
        if (c["piece"] != 0 if prev is None or c["chunk"] != prev["chunk"] else c["piece"] != prev["piece"] + 1) \
                or prev is not None and c["chunk"] < prev["chunk"]:
            raise FormatError(path, "file %s is chunk %d piece %d, out of order after %r" % (p, c["chunk"], c["piece"], prev))
        prev = c


def _join(directory, rel):
    """The file rel (a manifest path, slash-separated) of a local folder or a bucket prefix."""
    if _s3.is_url(directory):
        return directory.rstrip("/") + "/" + rel
    return os.path.join(directory, *rel.split("/"))


def _listed(m, name):
    """The manifest path of the dataset file called name: "name", or ".packer-gen-<hex>/name"
    in a dataset that replaced another one in a bucket."""
    for fe in m.get("files") or []:
        p = fe.get("path")
        if p == name or (isinstance(p, str) and p.endswith("/" + name)):
            return p
    return name


def _entry(m, rel):
    for fe in m.get("files") or []:
        if fe.get("path") == rel:
            return fe
    return {}


def _check_listed_size(m, directory, rel):
    """The file rel must have the size the manifest lists for it (when listed)."""
    for fe in m.get("files") or []:
        if fe.get("path") == rel and "size" in fe:
            p = os.path.join(directory, rel)
            try:
                size = os.stat(p).st_size
            except OSError as e:
                raise FormatError(p, "cannot open: %s" % (e.strerror or e))
            if size != fe["size"]:
                raise FormatError(p, "file is %d bytes, the manifest says %d" % (size, fe["size"]))


def _canon(v):
    """v as a comparable JSON value: numbers by value, null lists as empty ones."""
    v = json.loads(json.dumps(v))
    return [] if v is None else v


def dataset_meta_diff(meta, m):
    """The keys of the dataset description stored in a data file (a shard header's "dataset"
    meta, an HDF5 file's "spec" attribute) that differ from the manifest's."""
    if not isinstance(meta, dict):
        return ["packer", "source", "transform", "classes"]
    return [k for k in ("packer", "source", "transform", "classes")
            if k not in meta or _canon(meta[k]) != _canon(m.get(k))]


def check_label_counts(m, labels, where):
    """Refuse a label column (of a format without checksums: npy, HDF5) that disagrees with
    the manifest: a label outside its classes (or negative; -1 is a record without a class in
    a dataset with fields), or counts per class other than its class_counts. Any single
    changed label is caught: a class loses a record and another gains one."""
    classes = m.get("classes") or []
    bad = labels < 0
    if classes:
        bad |= labels >= len(classes)
    if m.get("fields"):
        bad &= labels != -1
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise FormatError(where, "%d labels outside the manifest's %d classes, the first at record %d (label %d): "
                          "the labels are damaged (packer verify checks their SHA-256)"
                          % (int(bad.sum()), len(classes), i, int(labels[i])))
    cc = m.get("class_counts") or []
    if classes and len(cc) == len(classes):
        got = np.bincount(labels[labels >= 0], minlength=len(classes)).tolist()
        if got != list(cc):
            k = next(j for j in range(len(cc)) if got[j] != cc[j])
            raise FormatError(where, "the labels hold %d records of class %d (%r), the manifest's class_counts say %d: "
                              "the labels are damaged (packer verify checks their SHA-256)"
                              % (got[k], k, classes[k], cc[k]))
