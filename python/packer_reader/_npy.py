"""Format "npy": images.npy, labels.npy, aux_<name>.npy and meta.jsonl, and per field NAME.npy
(fixed size) or NAME.values.npy + NAME.offsets.npy (variable), read without NumPy's loader
(headers parsed, records read as byte ranges, local or in a bucket)."""

import contextlib
import io
import json
import os
import tokenize

import numpy as np

from ._errors import FormatError
from ._fields import Schema
from ._io import open_ro, pread_into
from ._manifest import MANIFEST, _check_listed_size, _entry, _join, _listed, check_label_counts
from ._segment import _SegmentDataset
from ._shard import check_unchanged


class _RawSegment:
    """Fixed-size records stored back to back in a plain file (images.npy)."""

    def __init__(self, path, data_offset, record_size, n, obj=None, name=None):
        self.file_path = path
        self.path = obj.url if obj is not None else (name or path)
        self.data_offset = data_offset
        self.record_size = record_size
        self.n = n
        self.first = 0
        self.fd = -1
        self.remote = obj is not None
        self.fd = obj if self.remote else open_ro(path)
        self._ident = None
        if not self.remote:  # what a later open by path (O_DIRECT) must find: the same file
            st = os.fstat(self.fd)
            self._ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def range_span(self, lo, hi):
        return self.data_offset + lo * self.record_size, (hi - lo) * self.record_size

    def read_record(self, i):
        buf = bytearray(self.record_size)
        pread_into(self.fd, memoryview(buf), self.data_offset + i * self.record_size, self.path)
        return buf

    @contextlib.contextmanager
    def opened(self):
        yield self.fd

    def check_records(self, lo, hi, data=None):
        pass

    def check_unchanged(self):
        check_unchanged(self)

    def close(self):
        if not self.remote and self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


_NPY_HEAD = 1 << 16  # bytes of an object read to parse its .npy header


def _parse_npy_header(f):
    """(shape, dtype, fortran_order, data_offset) read from f, positioned at the file's start;
    ValueError when it is not a supported .npy header."""
    fmt = np.lib.format
    major, minor = fmt.read_magic(f)
    try:
        if (major, minor) == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(f)
        elif major in (2, 3):
            shape, fortran, dtype = fmt.read_array_header_2_0(f)
        else:
            raise ValueError("unsupported npy version %d.%d" % (major, minor))
    except (SyntaxError, tokenize.TokenError) as e:
        # numpy tokenizes and evaluates the header dict: a damaged one fails there, not with
        # the ValueError of its other checks.
        raise ValueError("header does not parse: %s" % e) from e
    return tuple(shape), dtype, fortran, f.tell()


def read_npy_header(path, obj=None):
    """(shape, dtype, fortran_order, data_offset) of an .npy file (or of obj, an object in a
    bucket: its first bytes are fetched), with FormatError on failure."""
    if obj is not None:
        head = bytearray(min(obj.size, _NPY_HEAD))
        obj.pread_into(memoryview(head), 0)
        try:
            return _parse_npy_header(io.BytesIO(bytes(head)))
        except ValueError as e:
            raise FormatError(obj.url, "not a valid .npy file (or a header over %d bytes): %s" % (_NPY_HEAD, e))
    try:
        with open(path, "rb") as f:
            return _parse_npy_header(f)
    except OSError as e:
        raise FormatError(path, "cannot read: %s" % (e.strerror or e))
    except ValueError as e:
        raise FormatError(path, "not a valid .npy file: %s" % e)


def load_npy_column(path, n, what, obj=None):
    shape, dtype, fortran, off = read_npy_header(path, obj)
    if obj is not None:
        path = obj.url
    if shape != (n,) or dtype.kind != "i" or dtype.itemsize != 8:
        raise FormatError(path, "%s must be [%d] int64, found %s %s" % (what, n, list(shape), dtype))
    size = obj.size if obj is not None else os.stat(path).st_size
    if size != off + 8 * n:
        raise FormatError(path, "file is %d bytes, expected %d" % (size, off + 8 * n))
    arr = np.empty(n, dtype=dtype)
    if obj is not None:
        obj.pread_into(memoryview(arr).cast("B"), off)
        return arr.astype(np.int64, copy=False)
    fd = open_ro(path)
    try:
        pread_into(fd, memoryview(arr).cast("B"), off, path)
    finally:
        os.close(fd)
    return arr.astype(np.int64, copy=False)


class _NpyFile:
    """One .npy file of a field, its header parsed: ``shape``, ``dtype``, ``fortran``, ``off``
    (where its data starts), ``size``; ``read(offset, n)`` gives n bytes of its data."""

    def __init__(self, path, obj, where):
        self.path, self.obj, self.where = path, obj, where
        self.shape, self.dtype, self.fortran, self.off = read_npy_header(path, obj)
        self.size = obj.size if obj is not None else os.stat(path).st_size
        self.fd = open_ro(path) if obj is None else -1

    def read(self, offset, n):
        buf = bytearray(n)
        if n:
            if self.obj is not None:
                self.obj.pread_into(memoryview(buf), self.off + offset)
            else:
                pread_into(self.fd, memoryview(buf), self.off + offset, self.where)
        return buf

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _same_dtype(a, b):
    return a.str.lstrip("<|") == b.str.lstrip("<|")


class _NpyField:
    """The files of one field (FORMAT.md "Fields", npy layout): NAME.npy [N, ...shape] of a
    fixed-size field, NAME.values.npy and NAME.offsets.npy (int64 [N+1], in rows of an ndarray,
    bytes of text, bytes and json) of a variable one; every header, size and offset checked."""

    def __init__(self, ds, f, n):
        self.f = f
        self.files = []
        self.offsets = None
        try:
            self._open_all(ds, f, n)
        except BaseException:
            self.close()
            raise

    def _open_all(self, ds, f, n):
        if not f.variable:  # a fixed ndarray, or an image field at the fixed sample's size
            shape = f.image_shape(*ds.schema.record_hw(ds.shape)) if f.kind == "image" else f.shape
            vals = self._open(ds, f.name + ".npy", (n,) + tuple(shape), f.dtype)
            self.row = vals.dtype.itemsize * int(np.prod(shape, dtype=np.int64))
            self.values = vals
            return
        dt = f.dtype if f.kind == "ndarray" else np.dtype("u1")
        offs = self._open(ds, f.name + ".offsets.npy", (n + 1,), np.dtype("<i8"))
        o = np.frombuffer(offs.read(0, 8 * (n + 1)), dtype="<i8").astype(np.int64)
        total = int(o[-1])
        if o[0] != 0 or (n and np.any(np.diff(o) < 0)):
            raise FormatError(offs.where, "offsets are not 0, then non-decreasing")
        rows = (total,) + tuple(f.shape[1:]) if f.kind == "ndarray" else (total,)
        self.values = self._open(ds, f.name + ".values.npy", rows, dt)
        self.row = dt.itemsize * int(np.prod(rows[1:], dtype=np.int64))
        self.offsets = o

    def _open(self, ds, name, shape, dtype):
        m, store = ds.manifest, ds._store
        rel = _listed(m, name)
        path, obj = _join(ds.path, rel), None
        if store is not None:
            obj = store.head(rel, _entry(m, rel).get("size"))
            if store.cache_dir:
                path, obj = store.local_copy(obj, _entry(m, rel).get("sha256")), None
        nf = _NpyFile(path, obj, obj.url if obj is not None else path)
        self.files.append(nf)
        if nf.fortran or nf.shape != shape or not _same_dtype(nf.dtype, dtype):
            raise FormatError(nf.where, "array is %s %s%s, field %r needs %s %s" % (
                list(nf.shape), nf.dtype, " (Fortran order)" if nf.fortran else "", self.f.name, list(shape), dtype))
        want = nf.off + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nf.size != want:
            raise FormatError(nf.where, "file is %d bytes, expected %d" % (nf.size, want))
        return nf

    def raw(self, i):
        if self.offsets is None:
            return self.values.read(i * self.row, self.row)
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        return self.values.read(a * self.row, (b - a) * self.row)

    def close(self):
        for nf in self.files:
            nf.close()


class NpyDataset(_SegmentDataset):
    """A directory with images.npy, labels.npy, aux_<name>.npy and optional meta.jsonl."""

    format = "npy"

    def __init__(self, path, manifest, verify_crc=True, direct=False, store=None):
        super().__init__(path, manifest, verify_crc, direct, store)
        try:
            self._open_npy()
        except BaseException:
            self.close()
            raise

    def _open_npy(self):
        m = self.manifest
        store = self._store
        self._init_spec(m["sample"], _join(self.path, MANIFEST))
        if not self.fixed:
            raise FormatError(self.path, "npy datasets need a fixed sample shape")
        n = m["count"]
        self.count = n
        rel = _listed(m, "images.npy")
        ipath = _join(self.path, rel)
        obj = None
        if store is not None:  # HEAD: size against the manifest, ETag
            obj = store.head(rel, _entry(m, rel).get("size"))
            if store.cache_dir:
                ipath, obj = store.local_copy(obj, _entry(m, rel).get("sha256")), None
        shape, dtype, fortran, off = read_npy_header(ipath, obj)
        where = obj.url if obj is not None else ipath
        if fortran or shape != (n,) + self.shape or dtype.str.lstrip("<|") != self.dtype.str.lstrip("<|"):
            raise FormatError(where, "array is %s %s%s, the manifest says %s %s" % (
                list(shape), dtype, " (Fortran order)" if fortran else "", [n] + list(self.shape), self.dtype))
        size = obj.size if obj is not None else os.stat(ipath).st_size
        if size != off + n * self.record_size:
            raise FormatError(where, "file is %d bytes, expected %d" % (size, off + n * self.record_size))
        if store is None:
            for fe in m.get("files") or []:  # images, labels, aux columns, meta.jsonl
                _check_listed_size(m, self.path, fe["path"])
        name = store.object_url(rel) if store is not None else None
        self._setup_segments([_RawSegment(ipath, off, self.record_size, n, obj=obj, name=name)])

        def column(fname, what):
            r = _listed(m, fname)
            if store is None:
                return load_npy_column(_join(self.path, r), n, what)
            return load_npy_column(None, n, what, store.head(r, _entry(m, r).get("size")))

        self.labels = column("labels.npy", "labels")
        check_label_counts(m, self.labels, store.object_url(_listed(m, "labels.npy")) if store is not None
                           else _join(self.path, _listed(m, "labels.npy")))
        self.aux_names = list((m.get("label") or {}).get("aux") or [])
        cols = [column("aux_%s.npy" % a, "aux column " + a) for a in self.aux_names]
        self._aux = np.stack(cols, axis=1) if cols else np.zeros((n, 0), np.int64)
        self.schema = Schema(m.get("fields"), _join(self.path, MANIFEST), m["sample"])
        self._fields = []
        for f in self.schema.fields:
            self._fields.append(_NpyField(self, f, n))
        self._meta_lines = None
        self._meta_rel = _listed(m, "meta.jsonl")
        self._meta_path = _join(self.path, self._meta_rel)
        if store is not None:  # fetched now: the store is not kept for it after the reads
            self._meta_lines = []
            if any(fe.get("path") == self._meta_rel for fe in m.get("files") or []):
                mo = store.head(self._meta_rel, _entry(m, self._meta_rel).get("size"))
                buf = bytearray(mo.size)
                mo.pread_into(memoryview(buf), 0)
                self._meta_lines = bytes(buf).split(b"\n")

    def _field_raws(self, i):
        return [nf.raw(i) for nf in self._fields]

    def _field_paths(self):
        return [nf.values.where for nf in self._fields]

    def close(self):
        for nf in getattr(self, "_fields", []):
            nf.close()
        super().close()

    def _meta(self, i):
        if self._meta_lines is None:
            if not os.path.exists(self._meta_path):
                self._meta_lines = []
            else:
                with open(self._meta_path, "rb") as f:
                    self._meta_lines = f.read().split(b"\n")
        if i >= len(self._meta_lines) or not self._meta_lines[i].strip():
            return None
        return json.loads(self._meta_lines[i].decode("utf-8"))
