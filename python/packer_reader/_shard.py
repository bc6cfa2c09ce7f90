"""Parsing of one packer shard file, exactly as shard/FORMAT.md describes it (versions 1 to 4;
version 2 adds FlagShapes, the per-record shapes of variable-size records; version 3 FlagFields,
the values a record carries besides its sample, with the index part fieldlens; version 4, a shard
of a dataset cut at fixed input positions, is laid out as 1, 2 or 3 and names its chunk and piece
instead of its position)."""

import contextlib
import hashlib
import json
import os
import struct
import threading

import numpy as np

from . import _crc32c
from ._errors import CorruptionError, FormatError
from ._fields import Schema
from ._io import open_ro, pread, pread_into, preadv_into

HEADER_MAGIC = b"PKSHARD\x00"
FOOTER_MAGIC = b"PKS1"
VERSION = 4  # newest version known; versions 1 to 4 are read
ALIGN = 4096
HEADER_FIXED = 32
FOOTER_SIZE = 64
FLAG_VAR_SIZE = 1 << 0
FLAG_META = 1 << 1
FLAG_SHAPES = 1 << 2  # version 2: index part "shapes" (values of the sample shape's -1 dims)
FLAG_FIELDS = 1 << 3  # version 3: the meta's "fields" schema and index part "fieldlens"
KNOWN_FLAGS = {1: FLAG_VAR_SIZE | FLAG_META, 2: FLAG_VAR_SIZE | FLAG_META | FLAG_SHAPES,
               3: FLAG_VAR_SIZE | FLAG_META | FLAG_SHAPES | FLAG_FIELDS,
               # version 4: a shard of a dataset cut at fixed input positions; laid out as version
               # 3 with FlagFields, else 2 with FlagShapes, else 1, its meta "shard" naming its
               # chunk and piece instead of its position (shard/FORMAT.md "Versioning")
               4: FLAG_VAR_SIZE | FLAG_META | FLAG_SHAPES | FLAG_FIELDS}
BLOCK_TARGET = 1 << 20
MAX_META_LEN = 1 << 20
MAX_RECORDS = (1 << 32) - 1
MAX_RECORD_SIZE = 1 << 30
MAX_AUX = 16

DTYPES = {"uint8": np.dtype("u1"), "float16": np.dtype("<f2"), "float32": np.dtype("<f4")}

_FOOTER = struct.Struct("<QQQQQQIII4s")


def align_up(x):
    return x + (-x % ALIGN)


def sample_dtype(name, path):
    try:
        return DTYPES[name]
    except (KeyError, TypeError):
        raise FormatError(path, "unknown sample dtype %r" % (name,))


def parse_sample_spec(spec, path):
    """Validate a sample spec dict; return (shape tuple, numpy dtype, fixed record size or None)."""
    if not isinstance(spec, dict):
        raise FormatError(path, "sample spec is not an object")
    dt = sample_dtype(spec.get("dtype"), path)
    shape = spec.get("shape")
    if not isinstance(shape, list) or not 1 <= len(shape) <= 8 or not all(isinstance(d, int) for d in shape):
        raise FormatError(path, "sample shape %r must be a list of 1 to 8 integers" % (shape,))
    size = dt.itemsize
    for d in shape:
        if d == 0 or d < -1:
            raise FormatError(path, "invalid dimension %d in sample shape %r" % (d, shape))
        if d > 0:
            size *= d
            if size > MAX_RECORD_SIZE:
                raise FormatError(path, "sample shape %r exceeds the record size limit" % (shape,))
    fixed = all(d > 0 for d in shape)
    return tuple(shape), dt, (size if fixed else None)


_SCRATCH = threading.local()
_SCRATCH_MAX = 64 << 20


def take_tail(seg, lo, hi, out):
    """Copy into out the bytes of seg's local records [lo, m) for the largest m <= hi that this
    thread's checked tail holds (see check_records), and return m; lo when it holds none. The
    bytes are those the block's CRC was computed over, so they are as checked as a fresh read
    whose block is verified. The tail is used once."""
    t = getattr(_SCRATCH, "tail", None)
    if t is None or t[0] is not seg or t[1] != lo:
        return lo
    _SCRATCH.tail = None
    m = min(hi, t[2])
    n = (m - lo) * seg.record_size
    out[:n] = t[3][:n]
    return m


def _scratch(n):
    """A memoryview of n bytes of this thread's reusable scratch buffer: the parts of a block
    outside a batch are read there for its CRC (a fresh zero-filled bytearray per block cost a
    memset and page faults for each of them). Per thread, so a prefetch thread and the caller
    never read into the same bytes."""
    if n > _SCRATCH_MAX:  # a rare huge block: not kept
        return memoryview(np.empty(n, dtype=np.uint8))
    buf = getattr(_SCRATCH, "buf", None)
    if buf is None or buf.size < n:
        buf = _SCRATCH.buf = np.empty(max(n, 1 << 20), dtype=np.uint8)
    return memoryview(buf)[:n]


class ShardFile:
    """One open shard. Parsing checks magic, version, flags, every length against the limits and
    the file size before allocating, and the header, footer and index CRC-32C. Record data CRCs
    are checked on demand (``check_records``, ``verify_blocks``).

    ``first`` is the dataset index of the shard's record 0; it only labels error messages.
    With ``keep_open=False`` the descriptor is closed after parsing and every read reopens the
    file (checking that it is still the same file), for datasets with more shards than a process
    may hold descriptors.

    ``obj``, instead of a path: an object opened in a bucket (``_s3.S3Object``), read with
    ranged GETs; ``name``: what messages call the file when it is not ``path`` (the object's
    URL, for a local copy of an object)."""

    def __init__(self, path, first=0, keep_open=True, obj=None, name=None):
        self.first = first
        self.fd = -1
        self.remote = obj is not None
        if self.remote:
            self.file_path = None
            self.path = obj.url
            self.fd = obj
            self._ident = None
            self._parse()
            self._verified = np.zeros(self.num_blocks, dtype=bool)
            return
        self.file_path = str(path)
        self.path = str(name) if name else self.file_path
        self.fd = open_ro(self.file_path)
        try:
            st = os.fstat(self.fd)
            self._ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            self._parse()
        except BaseException:
            os.close(self.fd)
            self.fd = -1
            raise
        if not keep_open:
            self.close()
        self._verified = np.zeros(self.num_blocks, dtype=bool)

    def close(self):
        if not self.remote and self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def check_unchanged(self):
        check_unchanged(self)

    @contextlib.contextmanager
    def opened(self):
        """The file's descriptor: the one kept open, or a fresh one closed afterwards."""
        if self.remote or self.fd >= 0:
            yield self.fd
            return
        fd = open_ro(self.file_path)
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != self._ident:
                raise FormatError(self.path, "the file was replaced or changed since the dataset was opened")
            yield fd
        finally:
            os.close(fd)

    # -- parsing -------------------------------------------------------------------------
    def _fail(self, reason, offset=None):
        raise FormatError(self.path, reason, offset)

    def _all_records(self):
        n = getattr(self, "n", None)
        return None if n is None else (self.first, self.first + n)

    def _parse(self):
        p = self.path
        size = self.fd.size if self.remote else os.fstat(self.fd).st_size
        self.file_size = size
        if size < HEADER_FIXED:
            self._fail("file is %d bytes, shorter than a shard header" % size)
        hdr = bytes(pread(self.fd, HEADER_FIXED, 0, p))
        if hdr[0:8] != HEADER_MAGIC:
            self._fail("bad magic %r, not a packer shard" % hdr[0:8], 0)
        version, flags, meta_len, header_crc = struct.unpack_from("<HHII", hdr, 8)
        if version not in KNOWN_FLAGS:
            self._fail("unsupported shard format version %d (this reader knows versions 1 to %d)" % (version, VERSION), 8)
        if flags & ~KNOWN_FLAGS[version]:
            self._fail("unknown flags 0x%04x in a version-%d shard" % (flags & ~KNOWN_FLAGS[version], version), 10)
        if flags & FLAG_SHAPES and not flags & FLAG_VAR_SIZE:
            self._fail("FlagShapes is set without FlagVarSize", 10)
        if version == 3 and flags & (FLAG_FIELDS | FLAG_VAR_SIZE) != FLAG_FIELDS | FLAG_VAR_SIZE:
            # FORMAT.md "Fields": a shard with fields is version 3 with FlagFields, always with
            # FlagVarSize; a shard without fields is written as version 1 or 2
            self._fail("a version 3 shard needs FlagFields and FlagVarSize (flags 0x%04x)" % flags, 10)
        if version == 4 and flags & FLAG_FIELDS and not flags & FLAG_VAR_SIZE:
            self._fail("a version 4 shard with FlagFields needs FlagVarSize (flags 0x%04x)" % flags, 10)
        if meta_len > MAX_META_LEN:
            self._fail("meta length %d exceeds the limit %d" % (meta_len, MAX_META_LEN), 12)
        if HEADER_FIXED + meta_len + FOOTER_SIZE > size:
            self._fail("meta length %d does not fit in a %d-byte file" % (meta_len, size), 12)
        if hdr[20:32] != bytes(12):
            self._fail("reserved header bytes are not zero", 20)
        self.flags = flags
        self.version = version
        self.has_shapes = bool(flags & FLAG_SHAPES)
        self.meta_len = meta_len
        self.var_size = bool(flags & FLAG_VAR_SIZE)
        self.has_meta = bool(flags & FLAG_META)
        self.has_fields = bool(flags & FLAG_FIELDS)

        # footer (its CRC is checked before any of its fields is used)
        if size < FOOTER_SIZE or size % ALIGN:
            self._fail("file size %d is not a multiple of %d" % (size, ALIGN))
        foot_off = size - FOOTER_SIZE
        ft = bytes(pread(self.fd, FOOTER_SIZE, foot_off, p))
        (n, record_size, data_offset, data_len, index_offset, index_len,
         k, index_crc, footer_crc, fmagic) = _FOOTER.unpack(ft)
        if fmagic != FOOTER_MAGIC:
            self._fail("bad trailer magic %r (truncated or not a shard)" % fmagic, foot_off + 60)
        if _crc32c.crc32c(ft[:56]) != footer_crc:
            raise CorruptionError(p, None, foot_off, "footer CRC-32C mismatch")
        if n > MAX_RECORDS:
            self._fail("record count %d exceeds the limit" % n, foot_off)
        self.n = n
        meta_bytes = bytes(pread(self.fd, meta_len, HEADER_FIXED, p))
        if _crc32c.crc32c(meta_bytes, _crc32c.crc32c(hdr[:16])) != header_crc:
            raise CorruptionError(p, self._all_records(), 0, "header CRC-32C mismatch")
        try:
            meta = json.loads(meta_bytes.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            self._fail("meta JSON is invalid: %s" % e, HEADER_FIXED)
        if not isinstance(meta, dict):
            self._fail("meta JSON is not an object", HEADER_FIXED)
        self.meta = meta
        # meta "shard": {"index": k} below version 4, {"chunk": c, "piece": p} in version 4
        sh = meta.get("shard")
        self.cut = None
        if version >= 4:
            if not isinstance(sh, dict):
                self._fail("a version 4 shard's meta shard is missing", HEADER_FIXED)
            c, q = sh.get("chunk"), sh.get("piece")
            if "index" in sh or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in (c, q)):
                self._fail("a version 4 shard's meta shard must hold chunk and piece, not index: %s" % json.dumps(sh), HEADER_FIXED)
            self.cut = {"chunk": c, "piece": q}
        self.shape, self.dtype, fixed_size = parse_sample_spec(meta.get("sample"), p)
        label = meta.get("label") or {}
        aux = (label.get("aux") or []) if isinstance(label, dict) else None
        if not isinstance(aux, list) or not all(isinstance(a, str) for a in aux):
            self._fail("label.aux must be a list of names")
        if len(aux) > MAX_AUX:
            self._fail("%d aux columns exceed the limit %d" % (len(aux), MAX_AUX))
        self.aux_names = list(aux)
        a = len(aux)
        # the schema of a version-3 shard; below version 3 "fields" is just another meta key
        self.fields_meta = meta.get("fields") if self.has_fields else None
        self.schema = Schema(self.fields_meta, p, meta.get("sample"))
        nf = len(self.schema)

        if data_offset != align_up(HEADER_FIXED + meta_len):
            self._fail("data_offset %d, expected %d" % (data_offset, align_up(HEADER_FIXED + meta_len)), foot_off + 16)
        if k < 1:
            self._fail("block_records is 0", foot_off + 48)
        mk = meta.get("block_records")
        if mk is not None and mk != k:
            self._fail("block_records %r in meta differs from %d in footer" % (mk, k))
        if self.has_fields and self.has_shapes != (fixed_size is None):
            self._fail("FlagShapes must be set if and only if the sample shape %s has a -1 in a version 3 shard"
                       % (list(self.shape),), 10)
        if self.var_size:
            if record_size != 0:
                self._fail("record_size %d must be 0 for variable-size records" % record_size, foot_off + 8)
        else:
            if fixed_size is None:
                self._fail("sample shape %r has a varying dimension but FlagVarSize is not set" % (list(self.shape),))
            if record_size != fixed_size:
                self._fail("record_size %d, the sample spec gives %d" % (record_size, fixed_size), foot_off + 8)
            if data_len != n * record_size:
                self._fail("data_len %d, expected %d records x %d bytes" % (data_len, n, record_size), foot_off + 24)
        if data_len > size:
            self._fail("data_len %d exceeds the file size %d" % (data_len, size), foot_off + 24)
        if index_offset != align_up(data_offset + data_len):
            self._fail("index_offset %d, expected %d" % (index_offset, align_up(data_offset + data_len)), foot_off + 32)
        if index_len > size or align_up(index_offset + index_len + FOOTER_SIZE) != size:
            self._fail("index_len %d does not fit the file size %d" % (index_len, size), foot_off + 40)
        nb = -(-n // k)
        var_dims = [j for j, d in enumerate(self.shape) if d < 0]
        v = len(var_dims)
        fixed_part = (n * 8 + n * a * 8 + nb * 4 + ((n + 1) * 8 if self.var_size else 0)
                      + (n * v * 4 if self.has_shapes else 0) + ((n + 1) * 8 if self.has_meta else 0)
                      + n * nf * 4)
        if self.has_meta:
            if index_len < fixed_part:
                self._fail("index_len %d is smaller than its fixed parts (%d bytes)" % (index_len, fixed_part), foot_off + 40)
        elif index_len != fixed_part:
            self._fail("index_len %d, expected %d" % (index_len, fixed_part), foot_off + 40)
        self.record_size = record_size
        self.data_offset = data_offset
        self.data_len = data_len
        self.index_offset = index_offset
        self.index_len = index_len
        self.block_records = k
        self.num_blocks = nb

        idx = pread(self.fd, index_len, index_offset, p)
        if _crc32c.crc32c(idx) != index_crc:
            raise CorruptionError(p, self._all_records(), index_offset, "index CRC-32C mismatch")
        # what a manifest's index_sha256 pins (shard/FORMAT.md, "Dataset")
        self.index_sha256 = hashlib.sha256(idx).hexdigest()
        pos = 0

        def take(count, dt):
            nonlocal pos
            arr = np.frombuffer(idx, dtype=dt, count=count, offset=pos)
            pos += count * dt.itemsize
            return arr

        u64 = np.dtype("<u8")
        i64 = np.dtype("<i8")
        self.offsets = None
        if self.var_size:
            off = take(n + 1, u64)
            if off[0] != 0 or off[-1] != data_len or (n and np.any(np.diff(off.astype(np.int64)) < 0)):
                self._fail("record offsets table is not 0..data_len non-decreasing", index_offset)
            if n and int(np.max(np.diff(off))) > MAX_RECORD_SIZE:
                self._fail("a record exceeds the record size limit", index_offset)
            self.offsets = off.astype(np.int64)
        self.shapes = None
        self.var_dims = var_dims
        if self.has_shapes:
            self.shapes = take(n * v, np.dtype("<u4")).astype(np.int64).reshape(n, v)
        self.labels = take(n, i64).astype(np.int64)
        self.aux = take(n * a, i64).astype(np.int64).reshape(n, a)
        self.fieldlens = None
        self.sample_lens = np.diff(self.offsets) if self.var_size else None  # a record's bytes less its fields'
        if self.has_fields:
            fl_offset = index_offset + pos
            self.fieldlens = take(n * nf, np.dtype("<u4")).astype(np.int64).reshape(n, nf)
            self.sample_lens = self.sample_lens - self.fieldlens.sum(axis=1)
            if n and self.sample_lens.min() < 0:
                i = int(np.flatnonzero(self.sample_lens < 0)[0])
                self._fail("record %d (dataset record %d): its field lengths add up to %d bytes, past the record's %d"
                           % (i, self.first + i, int(self.fieldlens[i].sum()), int(self.offsets[i + 1] - self.offsets[i])),
                           fl_offset + i * nf * 4)
        if self.has_shapes:
            self._check_shapes(index_offset + (n + 1) * 8)
        elif self.has_fields:
            bad = self.sample_lens != fixed_size
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                self._fail("record %d (dataset record %d): the sample value is %d bytes (record less fields), the "
                           "sample spec gives %d" % (i, self.first + i, int(self.sample_lens[i]), fixed_size), fl_offset)
        if self.has_fields:
            self._check_fieldlens(fl_offset)
        self.metaoffs = None
        self.metablob = None
        if self.has_meta:
            m = take(n + 1, u64).astype(np.int64)
            blob_len = index_len - fixed_part
            if m[0] != 0 or m[-1] != blob_len or (n and np.any(np.diff(m) < 0)):
                self._fail("per-record meta offsets are not 0..%d non-decreasing" % blob_len, index_offset)
            self.metaoffs = m
            self.metablob = bytes(idx[pos:pos + blob_len])
            pos += blob_len
        self.crcs = take(nb, np.dtype("<u4")).astype(np.uint32)

    def _check_shapes(self, part_offset):
        """Every record's shape values are >= 1 and give exactly its byte size (FORMAT.md v2)."""
        n, v = self.shapes.shape
        if not n:
            return
        bad = np.zeros(n, dtype=bool)
        if v:
            bad |= np.any(self.shapes < 1, axis=1)
        limit = MAX_RECORD_SIZE + 1
        size = np.full(n, self.dtype.itemsize, dtype=np.int64)
        for d in self.shape:
            if d > 0:
                size = np.minimum(size * d, limit)
        for j in range(v):  # each factor <= 2**32 and size <= 2**30 + 1: no overflow
            size = np.minimum(size * np.minimum(self.shapes[:, j], limit), limit)
        bad |= size != self.sample_lens
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            shape = self._shape_of(i)
            self._fail("record %d (dataset record %d): shape %s in the shapes table gives %d bytes, the %s "
                       "has %d" % (i, self.first + i, list(shape), int(size[i]) if size[i] < limit else -1,
                                   "sample value (record less fields)" if self.has_fields else "record",
                                   int(self.sample_lens[i])), part_offset + i * v * 4)

    def _check_fieldlens(self, part_offset):
        """Every field's length fits its kind in every record (FORMAT.md "Fields"): a fixed
        ndarray's size, whole rows of a variable one (as many as its rows_of boxes field has),
        an image the record's height x width x channels."""
        n, nf = self.fieldlens.shape
        if not n:
            return
        sch = self.schema
        if self.has_shapes:
            rec = np.tile(np.asarray([max(d, 0) for d in self.shape], dtype=np.int64), (n, 1))
            rec[:, self.var_dims] = self.shapes
        else:
            rec = np.tile(np.asarray(self.shape, dtype=np.int64), (n, 1))
        hi, wi = sch.hw_index
        for k, f in enumerate(sch.fields):
            ln = self.fieldlens[:, k]
            if f.kind == "image":
                want = rec[:, hi] * rec[:, wi] * f.channels
                bad = ln != want
                why = "an image of the record's height and width is %d bytes"
            elif f.kind == "ndarray" and not f.variable:
                want = np.full(n, f.size, dtype=np.int64)
                bad = ln != want
                why = "the field's shape gives %d bytes"
            elif f.kind == "ndarray":
                want = np.full(n, f.row_size, dtype=np.int64)
                bad = ln % f.row_size != 0
                why = "not a whole number of %d-byte rows"
                if f.rows_of:
                    b = sch.names().index(f.rows_of)
                    rows_b = self.fieldlens[:, b] // 16
                    bad |= (ln // f.row_size) != rows_b
                    why = "not %%d-byte rows as many as the rows of %r" % f.rows_of
            else:
                continue
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                self._fail("record %d (dataset record %d): field %r is %d bytes; %s" % (
                    i, self.first + i, f.name, int(ln[i]), why % int(want[i])), part_offset + (i * nf + k) * 4)

    def split_fields(self, i, raw):
        """(sample bytes, [each field's bytes]) of local record i, raw holding its bytes."""
        mv = memoryview(raw)
        a = int(self.sample_lens[i])
        out = []
        for ln in self.fieldlens[i].tolist():
            out.append(mv[a:a + ln])
            a += ln
        return mv[:int(self.sample_lens[i])], out

    def _shape_of(self, i):
        sh = list(self.shape)
        for j, k in enumerate(self.var_dims):
            sh[k] = int(self.shapes[i, j])
        return tuple(sh)

    def record_shape(self, i):
        """The shape of local record i: the sample shape, with its -1 dimensions filled from the
        shapes table (version 2) or, in a version-1 shard, derived from the record's size when
        exactly one dimension varies. FormatError when it cannot be known."""
        if not self.var_size or not self.var_dims:
            return tuple(self.shape)
        if self.shapes is not None:
            return self._shape_of(i)
        size = int(self.offsets[i + 1] - self.offsets[i])
        known = self.dtype.itemsize
        for d in self.shape:
            if d > 0:
                known *= d
        if len(self.var_dims) == 1 and size % known == 0:
            sh = list(self.shape)
            sh[self.var_dims[0]] = size // known
            return tuple(sh)
        m = self.record_meta(i)
        if isinstance(m, dict) and isinstance(m.get("shape"), list):
            sh = tuple(m["shape"])
            if all(isinstance(x, int) and x >= 0 for x in sh) and int(np.prod(sh)) * self.dtype.itemsize == size:
                return sh
        if len(self.var_dims) == 1:
            self._fail("record %d (dataset record %d): %d bytes is not a whole number of %s records"
                       % (i, self.first + i, size, list(self.shape)))
        self._fail("record %d (dataset record %d): shape unknown: version-1 shard (sample shape %s has %d "
                   "varying dimensions and no shapes table)" % (i, self.first + i, list(self.shape), len(self.var_dims)))

    # -- records -------------------------------------------------------------------------
    def record_span(self, i):
        """(file offset, length) of local record i."""
        if self.var_size:
            a = int(self.offsets[i])
            return self.data_offset + a, int(self.offsets[i + 1]) - a
        return self.data_offset + i * self.record_size, self.record_size

    def range_span(self, lo, hi):
        """(file offset, length) of local records [lo, hi)."""
        if self.var_size:
            a = int(self.offsets[lo])
            return self.data_offset + a, int(self.offsets[hi]) - a
        return self.data_offset + lo * self.record_size, (hi - lo) * self.record_size

    def read_range_into(self, lo, hi, mv):
        off, ln = self.range_span(lo, hi)
        with self.opened() as fd:
            pread_into(fd, mv[:ln], off, self.path)
        return ln

    def read_record(self, i):
        off, ln = self.record_span(i)
        with self.opened() as fd:
            return pread(fd, ln, off, self.path)

    def record_meta(self, i):
        if self.metaoffs is None:
            return None
        raw = self.metablob[int(self.metaoffs[i]):int(self.metaoffs[i + 1])]
        if not raw:
            return None
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return raw

    # -- data checksums ------------------------------------------------------------------
    def block_bounds(self, j):
        k = self.block_records
        return j * k, min((j + 1) * k, self.n)

    def _block_error(self, j, reason):
        lo, hi = self.block_bounds(j)
        off, _ = self.range_span(lo, hi)
        return CorruptionError(self.path, (self.first + lo, self.first + hi), off,
                               "data block %d (shard records %d..%d): %s" % (j, lo, hi - 1, reason))

    def check_block(self, j, data=None):
        """Check block j's CRC (reading it unless data is given); raise CorruptionError."""
        if data is None:
            lo, hi = self.block_bounds(j)
            got = self._crc_of_records(j, lo, hi, 0)
        else:
            got = _crc32c.crc32c(data)
        if got != int(self.crcs[j]):
            raise self._block_error(j, "CRC-32C mismatch (stored %08x, computed %08x)" % (int(self.crcs[j]), got))
        self._verified[j] = True

    def _crc_of_records(self, j, lo, hi, crc):
        """Continue crc over the bytes of local records [lo, hi) of block j, read from the file."""
        if hi <= lo:
            return crc
        off, ln = self.range_span(lo, hi)
        _SCRATCH.tail = None  # the scratch is about to be overwritten
        buf = _scratch(ln)
        try:
            with self.opened() as fd:
                pread_into(fd, buf, off, self.path)
        except FormatError as e:
            raise self._block_error(j, "truncated: %s" % e.reason)
        return _crc32c.crc32c(buf, crc)

    def check_records(self, lo, hi, data=None):
        """Check the CRC of every block touching local records [lo, hi) before they are handed
        out. data, when given, holds exactly those records' bytes as read (one buffer, or a list
        of one buffer per record), and the check covers those very bytes: the parts of a block
        outside [lo, hi) are read from the file. Without data, each block is read from the file."""
        if hi <= lo:
            return
        k = self.block_records
        base, _ = self.range_span(lo, lo)
        for j in range(lo // k, (hi - 1) // k + 1):
            if self._verified[j]:
                continue
            b_lo, b_hi = self.block_bounds(j)
            s_lo, s_hi = max(lo, b_lo), min(hi, b_hi)
            if data is None:
                self.check_block(j)
                continue
            crc = self._crc_of_records(j, b_lo, s_lo, 0)
            if isinstance(data, list):
                for rec in data[s_lo - lo:s_hi - lo]:
                    crc = _crc32c.crc32c(rec, crc)
            else:
                o1, ln = self.range_span(s_lo, s_hi)
                crc = _crc32c.crc32c(data[o1 - base:o1 - base + ln], crc)
            crc = self._crc_of_records(j, s_hi, b_hi, crc)
            if crc != int(self.crcs[j]):
                raise self._block_error(j, "CRC-32C mismatch (stored %08x, computed %08x)"
                                        % (int(self.crcs[j]), crc))
            self._verified[j] = True
            if s_hi < b_hi and self.record_size and b_hi - s_hi <= _SCRATCH_MAX // self.record_size:
                # The rest of the block, read into this thread's scratch for the CRC, is what a
                # read in order asks next: keep it for take_tail (valid until the scratch is
                # used again).
                _SCRATCH.tail = (self, s_hi, b_hi, _SCRATCH.buf)

    def verify_blocks(self):
        """Check every data block; return the list of CorruptionErrors (all of them)."""
        faults = []
        for j in range(self.num_blocks):
            try:
                self.check_block(j)
            except CorruptionError as e:
                faults.append(e)
        return faults

    def stream_check(self, sha=None, chunk=8 << 20):
        """One sequential pass over the whole file: feeds every byte to ``sha`` (a hashlib object)
        when given, checks every data block's CRC-32C and that every padding byte is zero.
        Returns the list of faults (CorruptionError per bad block, FormatError per bad padding)."""
        faults = []
        nb = self.num_blocks
        starts = np.empty(nb, dtype=np.int64)
        ends = np.empty(nb, dtype=np.int64)
        for j in range(nb):
            a, b = self.block_bounds(j)
            starts[j], ln = self.range_span(a, b)
            ends[j] = starts[j] + ln
        crc = [0] * nb
        pads = [
            (HEADER_FIXED + self.meta_len, self.data_offset, "header padding"),
            (self.data_offset + self.data_len, self.index_offset, "data padding"),
            (self.index_offset + self.index_len, self.file_size - FOOTER_SIZE, "index padding"),
        ]
        bad_pad = set()
        for j in range(nb):  # empty blocks (possible with variable-size records)
            if starts[j] == ends[j] and int(self.crcs[j]) != 0:
                faults.append(self._block_error(j, "CRC-32C mismatch (stored %08x, computed 00000000)"
                                                % int(self.crcs[j])))
        buf = bytearray(chunk)
        mv = memoryview(buf)
        size = self.file_size
        with self.opened() as fd:
            return self._stream(fd, sha, chunk, faults, nb, starts, ends, crc, pads, bad_pad, mv, size)

    def _stream(self, fd, sha, chunk, faults, nb, starts, ends, crc, pads, bad_pad, mv, size):
        pos = 0
        j = 0
        while pos < size:
            if self.remote:
                n = min(chunk, size - pos)
                fd.pread_into(mv[:n], pos)
            else:
                n = os.preadv(fd, [mv[:min(chunk, size - pos)]], pos)
            if n <= 0:
                faults.append(FormatError(self.path, "file ends at %d, expected %d bytes" % (pos, size), pos))
                break
            c0, c1 = pos, pos + n
            piece = mv[:n]
            if sha is not None:
                sha.update(piece)
            while j < nb and ends[j] <= c0:
                j += 1
            k = j
            while k < nb and starts[k] < c1:
                a, b = max(int(starts[k]), c0), min(int(ends[k]), c1)
                if a < b:
                    crc[k] = _crc32c.crc32c(piece[a - c0:b - c0], crc[k])
                    if b == ends[k] and crc[k] != int(self.crcs[k]):
                        faults.append(self._block_error(k, "CRC-32C mismatch (stored %08x, computed %08x)"
                                                        % (int(self.crcs[k]), crc[k])))
                k += 1
            for a, b, what in pads:
                a, b = max(a, c0), min(b, c1)
                if a < b and what not in bad_pad:
                    nz = np.flatnonzero(np.frombuffer(piece[a - c0:b - c0], dtype=np.uint8))
                    if nz.size:
                        bad_pad.add(what)
                        faults.append(FormatError(self.path, "%s is not zero" % what, a + int(nz[0])))
            pos = c1
        return faults

    def check_padding(self):
        """Return the list of FormatErrors for non-zero padding bytes."""
        faults = []
        gaps = [
            (HEADER_FIXED + self.meta_len, self.data_offset, "header padding"),
            (self.data_offset + self.data_len, self.index_offset, "data padding"),
            (self.index_offset + self.index_len, self.file_size - FOOTER_SIZE, "index padding"),
        ]
        for a, b, what in gaps:
            if b > a:
                with self.opened() as fd:
                    buf = pread(fd, b - a, a, self.path)
                nz = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8))
                if nz.size:
                    faults.append(FormatError(self.path, "%s is not zero" % what, a + int(nz[0])))
        return faults


def check_unchanged(seg):
    """After reads of a local segment (a shard, images.npy): the file still has the identity,
    size and modification time it had when the dataset opened it. A file written over in place
    (cp, rsync --inplace: the same inode, other bytes) would otherwise serve its new bytes from
    blocks checked before, which are not checked again (and npy bytes are never checked). A
    write that reached the file before the reads ended has changed its modification time by
    now, so the bytes read are the ones checked, or this raises."""
    if seg.remote or seg._ident is None:
        return
    st = os.fstat(seg.fd) if seg.fd >= 0 else os.stat(seg.file_path)
    if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != seg._ident:
        raise FormatError(seg.path, "the file was changed since the dataset was opened (written over in place, or "
                          "replaced?); reopen the dataset")


def scatter_read(seg_fd, path, spans_and_views):
    """Read consecutive (offset-ordered, adjacent) spans into views with one preadv per run."""
    if not spans_and_views:
        return
    off0 = spans_and_views[0][0]
    preadv_into(seg_fd, [v for _, v in spans_and_views], off0, path)
