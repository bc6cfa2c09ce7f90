"""packer_reader.verify: the integrity checks of ``packer verify``, in Python."""

import collections
import hashlib
import json
import os
import struct

import numpy as np

from . import _s3, _staging
from ._errors import CorruptionError, FormatError, PackerError
from ._fields import Schema
from ._hdf5 import _h5_json_attr, field_dataset, field_raw
from ._manifest import MANIFEST, _canon, _listed, dataset_meta_diff, load_manifest
from ._npy import _NpyField, read_npy_header
from ._shard import ShardFile, parse_sample_spec

CHUNK = 8 << 20


class Fault:
    """One problem found by verify. ``kind`` is one of: manifest, missing, extra, size, sha256,
    structure (including non-zero padding), checksum, shape, count, labels. ``record_range`` is
    numbered across the dataset, as the readers and ``packer verify --json`` (``first_record``,
    ``records``) number records; ``shard_range`` is the same range inside the shard
    (``shard_first_record``)."""

    def __init__(self, kind, path, reason, record_range=None, offset=None, file_first=0):
        self.kind = kind
        self.path = path
        self.reason = reason
        self.record_range = record_range  # dataset-wide record numbers, half-open
        self.offset = offset
        self.file_first = file_first  # the dataset-wide number of the first record of path

    @property
    def shard_range(self):
        """The record range numbered inside the file (a shard), or None."""
        if not self.record_range:
            return None
        a, b = self.record_range
        return a - self.file_first, b - self.file_first

    def to_dict(self, root=None):
        """The fault as ``packer verify --json`` writes it (file relative to the dataset)."""
        f = self.path
        if root is not None:
            try:
                rel = os.path.relpath(self.path, root)
                if not rel.startswith(".."):
                    f = rel.replace(os.sep, "/")
            except ValueError:
                pass
        a, b = self.record_range if self.record_range else (-1, -1)
        return {"file": f, "kind": self.kind, "first_record": a, "records": b - a if a >= 0 else 0,
                "shard_first_record": self.shard_range[0] if self.record_range else -1,
                "offset": -1 if self.offset is None else self.offset, "message": self.reason}

    def __str__(self):
        s = str(self.path)
        if self.record_range:
            # dataset-wide record numbers, then, for a shard, the same range inside the shard
            s += ": " + _records(*self.record_range)
            if str(self.path).endswith(".pks"):
                s += " (%s %s)" % (os.path.basename(self.path), _records(*self.shard_range))
        s += ": " + self.reason
        if self.offset is not None:
            s += " (offset %d)" % self.offset
        return "%s: %s" % (self.kind, s)

    __repr__ = __str__


def _records(a, b):
    return "records %d-%d" % (a, b - 1) if b - a > 1 else "record %d" % a


class Report:
    """What verify found: ``ok`` (no faults), ``faults`` (list of Fault), ``warnings`` (list of
    Fault: files the manifest does not list, kind ``extra``, which no reader opens; faults
    instead with ``strict``), ``notes`` (checks that
    could not run, e.g. h5py missing), ``format``, ``count`` (manifest), ``files``, ``records`` and
    ``bytes`` checked, ``skipped_inputs`` (inputs the build skipped, listed in the manifest).
    ``to_dict()`` has the shape of ``packer verify --json``."""

    def __init__(self, path, strict=False):
        self.path = path
        self.strict = strict
        self.faults = []
        self.warnings = []
        self.notes = []
        self.files = 0
        self.records = 0
        self.bytes = 0
        self.pending_sha = {}  # rel -> (path, wanted hex): hashed during a format's own pass
        self.format = None
        self.count = 0
        self.skipped_inputs = 0
        self.file_first = {}  # shard path -> dataset-wide number of its first record

    def check_sha(self, full, want, got):
        self.bytes += os.path.getsize(full)
        if got != want:
            self.add("sha256", full, "SHA-256 %s, manifest says %s" % (got, want or "nothing"))

    @property
    def ok(self):
        return not self.faults

    def add(self, kind, path, reason, record_range=None, offset=None):
        f = Fault(kind, path, reason, record_range, offset, self.file_first.get(path, 0))
        (self.warnings if kind == "extra" and not self.strict else self.faults).append(f)

    def add_error(self, err, kind=None):
        if isinstance(err, CorruptionError):
            self.add(kind or "checksum", err.path, err.reason, err.record_range, err.offset)
        elif isinstance(err, FormatError):
            self.add(kind or "structure", err.path, err.reason, None, err.offset)
        else:
            self.add(kind or "structure", self.path, str(err))

    def to_dict(self):
        """The report in the shape of ``packer verify --json`` (plus ``notes``)."""
        return {"dir": self.path, "format": self.format, "count": self.count, "files": self.files,
                "bytes": self.bytes, "ok": self.ok, "faults": [f.to_dict(self.path) for f in self.faults],
                "warnings": [f.to_dict(self.path) for f in self.warnings],
                "skipped_inputs": self.skipped_inputs, "notes": list(self.notes)}

    def __str__(self):
        lines = ["%s: %s (%d files, %d records, %d bytes checked)" % (
            self.path, "OK" if self.ok else "%d fault(s)" % len(self.faults), self.files, self.records, self.bytes)]
        lines += ["  " + str(f) for f in self.faults]
        lines += ["  warning: " + str(f) for f in self.warnings]
        lines += ["  note: " + n for n in self.notes]
        return "\n".join(lines)


def _sha256(path):
    h = hashlib.sha256()
    buf = bytearray(CHUNK)
    mv = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(mv)
            if not n:
                break
            h.update(mv[:n])
    return h.hexdigest()


def verify(path, strict=False):
    """Check a packer output directory against its manifest.json and return a :class:`Report`.

    Checks: manifest well-formed; every listed file present with the listed size and SHA-256;
    unlisted (extra) files, reported as warnings (``strict=True``: as faults); shards: magic, version, flags, limits, header/footer/index CRC,
    every data block CRC (naming its record range), zero padding, record counts and sample spec
    against the manifest; npy: headers, shapes, dtypes and sizes; hdf5: dataset shapes and
    dtypes (when h5py is importable); labels within the class list and matching class_counts.
    Every fault is reported, not only the first.

    ``s3://bucket/prefix``: every object below the prefix is first copied to a temporary folder
    (ranged GETs pinned to the ETag of a HEAD), which is then checked as a local dataset; the
    report names the objects by their URLs."""
    if _s3.is_url(str(path)):
        return _verify_bucket(str(path))
    root = str(path)
    if os.path.isfile(root) and os.path.basename(root) == MANIFEST:
        root = os.path.dirname(root) or "."
    rep = Report(root, strict)
    try:
        m = load_manifest(root)
    except FormatError as e:
        rep.add_error(e, "manifest")
        return rep
    mpath = os.path.join(root, MANIFEST)
    rep.format = m["format"]
    rep.count = m["count"]
    rep.skipped_inputs = len(m.get("skipped") or [])

    # files: presence, size, sha256
    listed = {}
    present = {}
    for fe in m.get("files") or []:
        rel = fe["path"]
        listed[rel] = fe
        full = os.path.join(root, *rel.split("/"))
        try:
            st = os.stat(full)
        except OSError:
            rep.add("missing", full, "listed in the manifest but missing")
            continue
        rep.files += 1
        present[rel] = full
        if "size" in fe and st.st_size != fe["size"]:
            rep.add("size", full, "size %d, manifest says %d" % (st.st_size, fe["size"]))
        # hashed even when the size is wrong, so both faults are reported (as packer verify does)
        rep.pending_sha[rel] = (full, str(fe.get("sha256", "")).lower())
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if rel != MANIFEST and rel not in listed:
                rep.add("extra", full, "file not listed in the manifest")

    _check_manifest(rep, m, mpath)
    fmt = m["format"]
    try:
        if fmt == "shards":
            labels = _verify_shards(rep, m, root, present, listed)
        elif fmt == "npy":
            labels = _verify_npy(rep, m, root, present)
        else:
            labels = _verify_hdf5(rep, m, root, present)
    except PackerError as e:  # never a crash: anything unexpected is a fault
        rep.add_error(e)
        labels = None
    for rel, (full, want) in sorted(rep.pending_sha.items()):  # files no format check has read
        rep.check_sha(full, want, _sha256(full))
    rep.pending_sha = {}
    if labels is not None:
        _check_labels(rep, m, mpath, labels)
    return rep


KNOWN_VERSIONS = (1, 2, 3, 4)  # shard format versions (shard/FORMAT.md) verify accepts


def _check_manifest(rep, m, mpath):
    """The manifest's own consistency, beyond what load_manifest refuses."""
    classes = m.get("classes") or []
    seen = {}
    for i, c in enumerate(classes):
        if not isinstance(c, str):
            rep.add("manifest", mpath, "class name %d is not a string" % i)
        elif c in seen:
            rep.add("manifest", mpath, "class names %d and %d are both %r" % (seen[c], i, c))
        else:
            seen[c] = i
    cc = m.get("class_counts") or []
    if not isinstance(cc, list) or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cc):
        rep.add("manifest", mpath, "class_counts must be a list of non-negative integers")
    label = m.get("label") if isinstance(m.get("label"), dict) else {}
    if label.get("dtype") != "int64":
        rep.add("manifest", mpath, "label dtype is %r; packer writes int64 labels" % (label.get("dtype"),))
    aux = label.get("aux") or []
    if len(set(aux)) != len(aux):
        rep.add("manifest", mpath, "label aux names %r repeat" % (aux,))
    if m.get("format_version") not in KNOWN_VERSIONS or isinstance(m.get("format_version"), bool):
        rep.add("manifest", mpath, "format_version %r is not a known shard format version %r" % (
            m.get("format_version"), KNOWN_VERSIONS))
    try:
        schema = Schema(m.get("fields"), mpath, m["sample"])
    except FormatError as e:
        rep.add("manifest", mpath, e.reason)
        schema = None
    if m.get("format_version") == 3 and (m["format"] != "shards" or not schema):
        rep.add("manifest", mpath, "format_version 3 is a shards dataset with fields (shard/FORMAT.md \"Fields\")")
    paths = collections.Counter(fe.get("path") for fe in m.get("files") or [])
    for p in sorted(p for p, k in paths.items() if k > 1):
        rep.add("manifest", mpath, "file %s is listed twice" % p)
    _check_inputs(rep, m, mpath)
    if m["format"] != "shards":
        for fe in m.get("files") or []:
            if fe.get("first_record", 0) != 0 or fe.get("records", 0) not in (0, m["count"]):
                rep.add("manifest", mpath, "file %s: records %r from %r, but a %s file holds all %d records" % (
                    fe["path"], fe.get("records"), fe.get("first_record", 0), m["format"], m["count"]))


def _check_inputs(rep, m, mpath):
    """Every enumerated input is packed or skipped: video sources (video, frames) pack one or
    more records per input, every other source exactly one."""
    inputs = m.get("inputs")
    skipped = len(m.get("skipped") or [])
    count = m.get("count")
    kind = (m.get("source") or {}).get("kind") if isinstance(m.get("source"), dict) else None
    if not isinstance(inputs, int) or isinstance(inputs, bool) or inputs < skipped:
        rep.add("manifest", mpath, "inputs is %r, fewer than the %d skipped" % (inputs, skipped))
    elif kind in ("video", "frames"):
        if inputs - skipped > count:
            rep.add("manifest", mpath, "inputs %d less %d skipped leaves %d packed inputs, more than the %d records" % (
                inputs, skipped, inputs - skipped, count))
    elif inputs != count + skipped:
        rep.add("manifest", mpath, "inputs is %d, but %d records and %d skipped inputs account for %d" % (
            inputs, count, skipped, count + skipped))


def _check_labels(rep, m, mpath, labels):
    classes = m.get("classes") or []
    if labels.size:
        bad = (labels < 0) | (labels >= len(classes)) if classes else labels < 0
        if m.get("fields"):  # a dataset with fields: -1 is the label of a record without a class
            bad &= labels != -1
        bad = np.flatnonzero(bad)
        if bad.size:
            rng = "outside [0, %d)" % len(classes) if classes else "negative"
            rep.add("labels", mpath, "%d label(s) %s, first at record %d" % (
                bad.size, rng, int(bad[0])), (int(bad[0]), int(bad[0]) + 1))
    cc = m.get("class_counts")
    if cc and classes and len(cc) == len(classes):
        ok = labels[(labels >= 0) & (labels < len(classes))]
        got = np.bincount(ok, minlength=len(classes)).tolist()
        if got != list(cc):
            rep.add("labels", mpath, "class_counts %s do not match the labels %s" % (list(cc), got))
    elif cc and len(cc) != len(classes):
        rep.add("manifest", mpath, "class_counts has %d entries for %d classes" % (len(cc), len(classes)))


def _verify_shards(rep, m, root, present, listed):
    shape, dtype, _ = parse_sample_spec(m["sample"], os.path.join(root, "manifest.json"))
    shard_entries = [fe for fe in m.get("files") or [] if fe["path"].endswith(".pks")]
    first = 0
    total = 0
    all_labels = []
    versions = []
    complete = True
    for pos, fe in enumerate(shard_entries):
        rel = fe["path"]
        declared_first = fe.get("first_record", first if pos else 0) or 0
        if declared_first != first and complete:
            rep.add("count", os.path.join(root, rel), "first_record %d, expected %d" % (declared_first, first))
        if rel not in present:
            complete = False
            first = declared_first + (fe.get("records") or 0)
            continue
        full = present[rel]
        rep.file_first[full] = declared_first
        try:
            sf = ShardFile(full, declared_first)
        except CorruptionError as e:  # header, footer or index CRC: no record range, as packer verify
            rep.add("checksum", e.path, e.reason, None, e.offset)
            complete = False
            first = declared_first + (fe.get("records") or 0)
            continue
        except PackerError as e:
            rep.add_error(e)
            complete = False
            first = declared_first + (fe.get("records") or 0)
            continue
        try:
            rep.records += sf.n
            total += sf.n
            if "records" in fe and fe["records"] != sf.n:
                rep.add("count", full, "holds %d records, manifest says %d" % (sf.n, fe["records"]))
            if (sf.shape, sf.dtype) != (shape, dtype) or _canon(sf.meta.get("sample")) != _canon(m["sample"]):
                rep.add("shape", full, "sample %s, manifest says %s" % (
                    json.dumps(sf.meta.get("sample")), json.dumps(m["sample"])))
            if _canon(sf.fields_meta) != _canon(m.get("fields")):
                rep.add("manifest", full, "shard fields schema %s differs from the manifest's %s" % (
                    json.dumps(sf.fields_meta), json.dumps(m.get("fields"))))
            _check_shard_values(rep, sf, full, declared_first)
            hl = sf.meta.get("label") if isinstance(sf.meta.get("label"), dict) else {}
            ml = m.get("label") or {}
            if hl.get("dtype") != ml.get("dtype") or list(hl.get("aux") or []) != list(ml.get("aux") or []):
                rep.add("manifest", full, "shard label spec %s differs from the manifest's %s" % (
                    json.dumps(hl), json.dumps(ml)))
            if "dataset" in sf.meta:
                diff = dataset_meta_diff(sf.meta["dataset"], m)
                if diff:
                    rep.add("manifest", full, "shard header's dataset %s differ from the manifest's" % ", ".join(diff))
            pin = fe.get("index_sha256")
            if pin is not None and sf.index_sha256 != pin:
                rep.add("sha256", full, "index SHA-256 %s, the manifest's index_sha256 says %s: the readers refuse "
                        "this shard (a shard of another build with the same names and options, a changed file, "
                        "or an edited manifest)" % (sf.index_sha256, pin), None, sf.index_offset)
            versions.append(struct.unpack("<H", os.pread(sf.fd, 2, 8))[0])
            idx = (sf.meta.get("shard") or {}).get("index") if isinstance(sf.meta.get("shard"), dict) else None
            if idx is not None and idx != pos:
                rep.add("structure", full, "meta shard.index %r, but it is file %d of the dataset" % (idx, pos))
            if (sf.cut is not None or fe.get("shard") is not None) and sf.cut != fe.get("shard"):
                rep.add("structure", full, "meta shard %s, but the manifest lists %s for file %d of the dataset" % (
                    json.dumps(sf.cut), json.dumps(fe.get("shard")), pos))
            pend = rep.pending_sha.pop(rel, None)
            sha = hashlib.sha256() if pend else None
            for err in sf.stream_check(sha):  # one read of the file: SHA-256, block CRCs, padding
                if isinstance(err, CorruptionError):
                    rep.add_error(err, "checksum")
                elif "padding" in err.reason:
                    rep.add("structure", err.path, err.reason, None, err.offset)
                else:
                    rep.add_error(err)
            if pend:
                rep.check_sha(full, pend[1], sha.hexdigest())
            all_labels.append(sf.labels)
            first = declared_first + sf.n
        finally:
            sf.close()
    if complete and total != m["count"]:
        rep.add("count", os.path.join(root, "manifest.json"),
                "manifest count %d, the shards hold %d records" % (m["count"], total))
    if not complete:
        return None
    if versions and m.get("format_version") != max(versions):
        rep.add("manifest", os.path.join(root, "manifest.json"), "format_version is %r but the newest shard is version %d"
                % (m.get("format_version"), max(versions)))
    return np.concatenate(all_labels) if all_labels else np.zeros(0, np.int64)


def _check_values(rep, schema, path, first, n, raw_of, only=None):
    """Text fields are UTF-8 and json fields one JSON value (FORMAT.md "Fields": checked by a
    verifier) in each of n records; raw_of(i, k) gives record i's field k's bytes (and a path
    to name, when not ``path``); ``only``: that field's index alone. Other kinds' lengths are
    the structure checks'."""
    ks = [k for k, f in enumerate(schema.fields) if f.kind in ("text", "json") and only in (None, k)]
    for i in range(n):
        for k in ks:
            raw, where = raw_of(i, k)
            try:
                schema.decode_one(schema.fields[k], raw, None, where or path, first + i)
            except FormatError as e:
                rep.add("structure", e.path, e.reason, (first + i, first + i + 1))


def _check_shard_values(rep, sf, full, first):
    if not sf.schema or not any(f.kind in ("text", "json") for f in sf.schema.fields):
        return
    cache = {}

    def raw_of(i, k):
        if cache.get("i") != i:
            cache["i"], cache["v"] = i, sf.split_fields(i, sf.read_record(i))[1]
        return cache["v"][k], None

    _check_values(rep, sf.schema, full, first, sf.n, raw_of)


def _verify_npy(rep, m, root, present):
    n = m["count"]
    shape, dtype, rs = parse_sample_spec(m["sample"], os.path.join(root, "manifest.json"))
    labels = None
    rep.records = n
    cols = [("images.npy", (n,) + shape, dtype)]
    cols.append(("labels.npy", (n,), np.dtype("<i8")))
    for a in (m.get("label") or {}).get("aux") or []:
        cols.append(("aux_%s.npy" % a, (n,), np.dtype("<i8")))
    for name, want_shape, want_dtype in cols:
        rel = _listed(m, name)  # "name", or ".packer-gen-<hex>/name" (a replacing build to a bucket)
        full = os.path.join(root, *rel.split("/"))
        if rel not in present:
            if not os.path.exists(full):
                if full not in [f.path for f in rep.faults]:
                    rep.add("missing", full, "required by the npy format")
            continue
        try:
            got_shape, got_dtype, fortran, off = read_npy_header(full)
        except FormatError as e:
            rep.add_error(e)
            continue
        if got_shape != want_shape or got_dtype.str.lstrip("<|") != want_dtype.str.lstrip("<|") or fortran:
            rep.add("shape", full, "array is %s %s%s, expected %s %s" % (
                list(got_shape), got_dtype, " (Fortran order)" if fortran else "", list(want_shape), want_dtype))
            continue
        size = os.stat(full).st_size
        expect = off + int(np.prod(want_shape)) * want_dtype.itemsize
        if size != expect:
            rep.add("size", full, "file is %d bytes, the header implies %d" % (size, expect))
            continue
        if name == "labels.npy":
            labels = np.fromfile(full, dtype=want_dtype, offset=off, count=n).astype(np.int64)
    mrel = _listed(m, "meta.jsonl")
    order = [_listed(m, c[0]) for c in cols] + ([mrel] if mrel in [fe["path"] for fe in m.get("files") or []] else [])
    order += _verify_npy_fields(rep, m, root, present, n, shape)
    got = [fe["path"] for fe in m.get("files") or []]
    if got != order:
        rep.add("manifest", os.path.join(root, "manifest.json"), "files are listed as %s; an npy dataset lists %s" % (got, order))
    mj = os.path.join(root, *mrel.split("/"))
    if os.path.exists(mj):
        with open(mj, "rb") as f:
            lines = f.read().split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        if len(lines) != n:
            rep.add("count", mj, "%d lines for %d records" % (len(lines), n))
        for i, ln in enumerate(lines):
            try:
                json.loads(ln.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                rep.add("structure", mj, "line %d is not JSON" % (i + 1), (i, i + 1))
                break
    return labels


def _verify_npy_fields(rep, m, root, present, n, shape):
    """The files of each field (FORMAT.md "Fields", npy layout) and the values of text and json
    fields; returns their manifest paths in the order an npy dataset lists them."""
    try:
        schema = Schema(m.get("fields"), os.path.join(root, MANIFEST), m["sample"])
    except FormatError:
        return []  # a manifest fault already

    class _Local:  # what _NpyField opens files through: this folder, the manifest's paths
        pass

    loc = _Local()
    loc.manifest, loc._store, loc.path, loc.schema, loc.shape = m, None, root, schema, shape
    order = []
    for f in schema.fields:
        names = [f.name + ".npy"] if not f.variable else [f.name + ".values.npy", f.name + ".offsets.npy"]
        order += [_listed(m, x) for x in names]
        try:
            nf = _NpyField(loc, f, n)
        except (FormatError, OSError) as e:
            rep.add_error(e if isinstance(e, FormatError) else FormatError(root, str(e)), "shape")
            continue
        try:
            _check_values(rep, schema, nf.values.where, 0, n, lambda i, k: (nf.raw(i), None),
                          schema.fields.index(f))
        finally:
            nf.close()
    return order


def _verify_h5_fields(rep, m, full, f, n, shape):
    """Each field's dataset (FORMAT.md "Fields", hdf5 layout) and the values of text and json."""
    try:
        schema = Schema(m.get("fields"), full, m["sample"])
    except FormatError:
        return  # a manifest fault already
    if "fields" in f.attrs:  # packer writes the schema there too
        try:
            got = _h5_json_attr(f, "fields")
        except Exception as e:
            got = "unreadable (%s)" % e
        if _canon(got) != _canon(m.get("fields")):
            rep.add("manifest", full, "root attribute 'fields' is %s, the manifest says %s" % (
                json.dumps(got), json.dumps(m.get("fields"))))
    for k, fd in enumerate(schema.fields):
        try:
            d = field_dataset(f, full, schema, shape, fd, n)
        except FormatError as e:
            rep.add("shape", full, e.reason)
            continue
        _check_values(rep, schema, full, 0, n, lambda i, _: (field_raw(d, i), None), k)


def _check_h5_attrs(rep, m, full, f):
    """The root attributes the writer stores, against the manifest: sample, classes, label and
    spec (the dataset meta: packer version, source, transform, classes). packer writes all four;
    one that is absent (a file from another writer) is noted, not checked."""
    absent = [a for a in ("sample", "classes", "label", "spec") if a not in f.attrs]
    if absent:
        rep.notes.append("%s has no root attribute %s: not checked against the manifest" % (full, ", ".join(absent)))
    for name, want in (("sample", m["sample"]), ("classes", m.get("classes") or []),
                       ("label", {"dtype": (m.get("label") or {}).get("dtype"),
                                  "aux": list((m.get("label") or {}).get("aux") or [])})):
        if name in absent:
            continue
        try:
            got = _h5_json_attr(f, name)
        except Exception as e:
            rep.add("structure", full, "root attribute %r: %s" % (name, e))
            continue
        if name == "label" and isinstance(got, dict):
            got = {"dtype": got.get("dtype"), "aux": list(got.get("aux") or [])}
        if _canon(got) != _canon(want):
            rep.add("manifest", full, "root attribute %r is %s, the manifest says %s" % (name, json.dumps(got), json.dumps(want)))
    if "spec" in absent:
        return
    try:
        spec = _h5_json_attr(f, "spec")
    except Exception as e:
        rep.add("structure", full, "root attribute 'spec': %s" % e)
        return
    diff = dataset_meta_diff(spec, m)
    if diff:
        rep.add("manifest", full, "root attribute 'spec': dataset %s differ from the manifest's" % ", ".join(diff))


def _verify_hdf5(rep, m, root, present):
    n = m["count"]
    rep.records = n
    shape, dtype, _ = parse_sample_spec(m["sample"], os.path.join(root, "manifest.json"))
    names = [rel for rel in present if rel.endswith((".h5", ".hdf5"))]
    if not names:
        if not any(f.kind == "missing" for f in rep.faults):
            rep.add("missing", os.path.join(root, "data.h5"), "no HDF5 file in the manifest")
        return None
    full = present[names[0]]
    pend = rep.pending_sha.pop(names[0], None)
    damaged = True
    if pend is not None:
        got = _sha256(full)
        rep.check_sha(full, pend[1], got)
        damaged = got != pend[1]
    if damaged:
        # libhdf5 can crash or hang on arbitrary damage: like packer verify, never parse a file
        # whose bytes differ from the manifest
        rep.notes.append("%s differs from the manifest: not parsed (libhdf5 is not robust to damage)" % full)
        return None
    try:
        import h5py
    except ImportError:
        rep.notes.append("h5py is not installed: HDF5 structure (shapes, dtypes) not checked")
        return None
    try:
        f = h5py.File(full, "r")
    except Exception as e:  # h5py raises OSError and others for damaged files
        rep.add("structure", full, "cannot open as HDF5: %s" % e)
        return None
    labels = None
    try:
        _check_h5_attrs(rep, m, full, f)
        for name, want_shape, want in (("images", (n,) + shape, dtype), ("labels", (n,), np.dtype("<i8"))):
            if name not in f:
                rep.add("structure", full, "missing dataset /%s" % name)
                continue
            d = f[name]
            if not hasattr(d, "shape"):
                rep.add("structure", full, "/%s is not a dataset" % name)
                continue
            if tuple(d.shape) != want_shape or d.dtype.str.lstrip("<|") != want.str.lstrip("<|"):
                rep.add("shape", full, "/%s is %s %s, expected %s %s" % (name, list(d.shape), d.dtype,
                                                                       list(want_shape), want))
                continue
            if name == "labels":
                try:
                    labels = np.asarray(d[...], dtype=np.int64)
                except Exception as e:
                    rep.add("structure", full, "cannot read /labels: %s" % e)
        for a in (m.get("label") or {}).get("aux") or []:
            if not any(k in f for k in ("aux/" + a, "aux_" + a, a)):
                rep.add("structure", full, "missing aux column %r" % a)
        _verify_h5_fields(rep, m, full, f, n, shape)
        group = f.get("aux")
        if group is not None and hasattr(group, "keys"):
            extra = sorted(set(group.keys()) - set((m.get("label") or {}).get("aux") or []))
            if extra:
                rep.add("manifest", full, "/aux holds columns %s that the manifest does not list" % extra)
    except Exception as e:
        rep.add("structure", full, "unreadable: %s" % e)
    finally:
        f.close()
    return labels


def _verify_bucket(url):
    """verify() of s3://bucket/prefix: a local copy of every object, checked as a local folder."""
    if url.endswith("/manifest.json"):
        url = url[:-len("/manifest.json")]
    store = _s3.S3Store(url)
    url = store.url
    # a folder under $TMPDIR, removed at the end, or by the next verify if this one is killed
    stage = _staging.Staging("packer-verify-")
    tmp = os.path.join(stage.path, "dataset")  # beside the lock file, not with it
    try:
        os.mkdir(tmp)
        unsafe = []
        for rel in store.list():
            parts = rel.split("/")
            if not rel or rel.startswith("/") or "\\" in rel or any(p in ("", ".", "..") for p in parts):
                unsafe.append(rel)
                continue
            dest = os.path.join(tmp, *parts)
            try:
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                store.download(store.head(rel), dest, sync=False)
            except OSError:  # a name that is both an object and a "folder" of others
                unsafe.append(rel)
        rep = verify(tmp)
        for f in rep.faults:
            p = str(f.path)
            if p == tmp or p.startswith(tmp + os.sep):
                f.path = url + p[len(tmp):].replace(os.sep, "/")
        for rel in unsafe:
            rep.add("extra", url + "/" + rel, "object not listed in the manifest (not a file name a dataset has)")
        rep.path = url
        return rep
    finally:
        store.close()
        stage.remove()
