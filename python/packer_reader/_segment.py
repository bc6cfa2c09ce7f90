"""Records stored as byte ranges of files (shard files, images.npy): batch reads of ranges and of
scattered records, CRC checks beside the reads, O_DIRECT reads, and ranged GETs of bucket objects."""

import bisect
import concurrent.futures
import contextlib
import ctypes
import errno
import os
import threading

import numpy as np

from . import _crc32c, _s3
from ._buffers import _aligned_empty, _record_empty
from ._dataset import Dataset
from ._errors import FormatError
from ._io import IOV_MAX, open_direct, pread_into, preadv_into
from ._shard import ALIGN, align_up, take_tail


# Overlapping a batch's CRC check with its read: a big batch of a local shard is read in pieces
# of about _CHECK_PIECE bytes of whole checksum blocks, and each piece is checked on one checker
# thread while the caller reads the next (packer's ctypes CRC releases the GIL, so the two run
# on two cores). The batch is handed out only after every piece's check has passed.
_CHECK_PIECE = 4 << 20  # measured on 224x224x3 batches: 1-8 MiB all help; 4 MiB best here
_CHECKER = None
_CHECKER_LOCK = threading.Lock()


# Shuffled (and other index) batches of a dataset opened with direct=True: each run of
# neighbouring records, or each checksum block not yet checked, is one O_DIRECT read,
# _DIRECT_DEPTH of them in flight. Where every record can go straight into its batch slot
# (sector-aligned record size, no block left to check), a batch's reads are one call of packer's
# C library (_direct_aio.c: Linux native asynchronous I/O, the GIL released); otherwise, or
# without the library, they run on a small thread pool (os.preadv releases the GIL), into a
# thread's aligned scratch buffer and copied into the batch slots from there where needed.
_DIRECT_DEPTH = 8
_DIRECT_RUN_MAX = 4 << 20  # bytes of one read of neighbouring records
_DIRECT_POOL = None
_DIO_ALIGN = [512]  # offset and length alignment of O_DIRECT reads; 4096 where 512 is refused


def _reset_checker():  # a forked child (a DataLoader worker) inherits the executor, not its thread
    global _CHECKER, _CHECKER_LOCK, _DIRECT_POOL
    _CHECKER, _CHECKER_LOCK = None, threading.Lock()
    _DIRECT_POOL = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_checker)


def _checker():
    global _CHECKER
    with _CHECKER_LOCK:
        if _CHECKER is None:
            _CHECKER = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="packer_reader-crc")
        return _CHECKER


def _direct_pool():
    global _DIRECT_POOL
    with _CHECKER_LOCK:
        if _DIRECT_POOL is None:
            _DIRECT_POOL = concurrent.futures.ThreadPoolExecutor(_DIRECT_DEPTH, thread_name_prefix="packer_reader-direct")
        return _DIRECT_POOL


def _aio_batch():
    """packer_pread_batch of packer's C library (_direct_aio.c: a batch's O_DIRECT reads through
    Linux native asynchronous I/O in one call, the GIL released), or None where the library is
    absent, older, or not 64-bit (the reads then go through the thread pool)."""
    global _AIO
    if _AIO is False:
        lib = _crc32c._lib
        f = getattr(lib, "packer_pread_batch", None) if lib is not None else None
        if f is not None and ctypes.sizeof(ctypes.c_void_p) == 8 and ctypes.sizeof(ctypes.c_size_t) == 8:
            f.restype = ctypes.c_int
            f.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 4 + [ctypes.c_int, ctypes.c_void_p]
        else:
            f = None
        _AIO = f
    return _AIO


_AIO = False  # not looked up yet
_DSCRATCH = threading.local()


def _direct_scratch(n):
    """n bytes of this thread's reusable ALIGN-aligned scratch buffer (O_DIRECT reads land there)."""
    buf = getattr(_DSCRATCH, "buf", None)
    if buf is None or buf.size < n:
        buf = _DSCRATCH.buf = _aligned_empty(max(n, 1 << 20))
    return buf[:n]


def _pread_direct(fd, off, ln):
    """Read file bytes [off, off+ln) through the O_DIRECT descriptor fd, widened to the sector
    alignment, into this thread's scratch; return a memoryview of exactly those bytes, or None
    where the read is refused or short (the caller reads them through the page cache)."""
    while True:
        al = _DIO_ALIGN[0]
        a = off - off % al
        end = off + ln
        end += -end % al
        buf = memoryview(_direct_scratch(end - a))
        got = 0
        try:
            while got < off + ln - a:
                k = os.preadv(fd, [buf[got:]], a + got)
                if k <= 0:
                    return None
                got += k
        except OSError as e:
            if e.errno == errno.EINVAL and al < ALIGN:  # a device with 4 KiB sectors
                _DIO_ALIGN[0] = ALIGN
                continue
            return None
        return buf[off - a:off - a + ln]


def _wait_checks(pending):
    """Wait for every check handed to the checker thread (none may still read the buffer);
    raise the first one's error, as the checks done in order would have."""
    concurrent.futures.wait(pending)
    for f in pending:
        f.result()


class _SegmentDataset(Dataset):
    """Records stored as byte ranges of one or more files (shards, or images.npy)."""

    def _setup_segments(self, segs):
        self._segs = segs
        self._firsts = [s.first for s in segs]
        self._dfds = {}
        self._dlock = threading.Lock()

    def _locate(self, i):
        s = bisect.bisect_right(self._firsts, i) - 1
        return s, i - self._firsts[s]

    def _shard_layout(self):
        return [s.n for s in self._segs], list(self._firsts)

    def _prefetch(self, sidx):
        """Start the GETs of every chunk the records sidx (sorted) of bucket objects touch, all at
        once (in parallel, adjacent chunks in one GET), before the records are copied out."""
        segs = np.searchsorted(np.asarray(self._firsts, dtype=np.int64), sidx, side="right") - 1
        for s in np.unique(segs).tolist():
            seg = self._segs[s]
            if not getattr(seg, "remote", False):
                continue
            li = sidx[segs == s] - self._firsts[s]
            off0, _ = seg.range_span(0, 0)
            rs = self.record_size
            seg.fd.prefetch([(off0 + int(i) * rs, rs) for i in li])

    def _sparse_remote(self, sidx):
        """True when the records sidx (sorted) of a bucket dataset are better read with a ranged
        GET each than through the chunk cache: the dataset does not fit the cache (reading
        order 2 draws from all of it, so chunks are not read again before they are evicted) and
        the chunks these records would fetch hold over 8 times their bytes."""
        store = self._store
        if not all(getattr(seg, "remote", False) and hasattr(seg, "block_bounds") for seg in self._segs):
            return False
        if self.count * self.record_size <= _s3.CACHE_BYTES // 2:
            return False
        chunk = store.chunk
        segs = np.searchsorted(np.asarray(self._firsts, dtype=np.int64), sidx, side="right") - 1
        missing = 0
        with store._lock:
            for s in np.unique(segs).tolist():
                seg = self._segs[s]
                off0, _ = seg.range_span(0, 0)
                offs = off0 + (sidx[segs == s] - self._firsts[s]) * self.record_size
                for c in np.unique(offs // chunk).tolist():
                    k = (seg.fd.key, seg.fd.etag, c)
                    if k not in store._chunks and k not in store._inflight:
                        missing += 1
        return missing * chunk > 8 * sidx.size * self.record_size

    def _fill_remote_sparse(self, sidx, order, out):
        """Read the records sidx (sorted; record sidx[t] goes to slot order[t] of out) of a bucket
        dataset with exact ranged GETs, in parallel: one per run of neighbouring records, or,
        with CRC checks on, one per checksum block not yet checked (the block is checked from
        those bytes and the records are taken out of them)."""
        store, rs = self._store, self.record_size
        firsts = np.asarray(self._firsts, dtype=np.int64)
        segs = (np.searchsorted(firsts, sidx, side="right") - 1).tolist()
        sl = sidx.tolist()
        ol = order.tolist()
        jobs = {}  # (seg, lo, hi, block or None) -> [(local record, slot)]
        t = 0
        while t < len(sl):
            s = segs[t]
            seg = self._segs[s]
            li = sl[t] - self._firsts[s]
            j = li // seg.block_records
            if self.verify_crc and not seg._verified[j]:
                lo, hi = seg.block_bounds(j)
                key = (s, lo, hi, j)
                u = t
                while u < len(sl) and segs[u] == s and lo <= sl[u] - self._firsts[s] < hi:
                    u += 1
            else:
                u = t + 1
                while u < len(sl) and segs[u] == s and sl[u] == sl[u - 1] + 1:
                    u += 1
                key = (s, li, li + (u - t), None)
            jobs.setdefault(key, []).extend((sl[v] - self._firsts[s], ol[v]) for v in range(t, u))
            t = u

        def get(key):
            s, lo, hi, _ = key
            seg = self._segs[s]
            off, ln = seg.range_span(lo, hi)
            return store._get_range(seg.fd, off, off + ln)

        pool = store._executor()
        futs = {key: pool.submit(get, key) for key in jobs}
        for key, recs in jobs.items():
            s, lo, hi, j = key
            data = memoryview(futs[key].result())
            if j is not None:
                self._segs[s].check_block(j, data)
            for li, slot in recs:
                a = (li - lo) * rs
                out[slot * rs:(slot + 1) * rs] = data[a:a + rs]

    @contextlib.contextmanager
    def _direct_fd(self, s):
        """Segment s's O_DIRECT descriptor (kept, or opened for this read and closed after it),
        checked to be the file the dataset opened; None where O_DIRECT is refused."""
        seg = self._segs[s]
        if seg.remote:
            yield None
            return
        if seg.fd >= 0:
            fd = self._dfds.get(s)
            if fd is not None:
                yield fd if fd >= 0 else None
                return
            with self._dlock:
                fd = self._dfds.get(s)
                if fd is None:
                    fd = open_direct(seg.file_path)
                    fd = -1 if fd is None else self._same_file(seg, fd)
                    self._dfds[s] = fd
            yield fd if fd >= 0 else None
            return
        fd = open_direct(seg.file_path)
        if fd is None:
            yield None
            return
        self._same_file(seg, fd)
        try:
            yield fd
        finally:
            os.close(fd)

    def _fill_direct(self, sidx, order, out):
        """Read the records sidx (sorted; record sidx[t] goes to slot order[t] of out) of local
        segments with O_DIRECT, _DIRECT_DEPTH reads in flight: one read per run of neighbouring
        records, or, with CRC checks on, one per checksum block not yet checked (the whole block,
        checked from those bytes before any of its records is copied out). Every read is waited
        for before the first error is raised, so nothing is handed out from a failed batch."""
        rs = self.record_size
        firsts = np.asarray(self._firsts, dtype=np.int64)
        segs = (np.searchsorted(firsts, sidx, side="right") - 1).tolist()
        sl = sidx.tolist()
        ol = order.tolist()
        maxrun = max(1, _DIRECT_RUN_MAX // rs)
        jobs = []
        t = 0
        while t < len(sl):
            s = segs[t]
            seg = self._segs[s]
            f0 = self._firsts[s]
            ver = getattr(seg, "_verified", None) if self.verify_crc else None
            k = seg.block_records if ver is not None else 0
            li = sl[t] - f0
            if ver is not None and not ver[li // k]:
                j = li // k
                lo, hi = seg.block_bounds(j)
                u = t
                while u < len(sl) and segs[u] == s and sl[u] - f0 < hi:
                    u += 1
                key = (s, lo, hi, j)
            else:
                u = t + 1
                while (u < len(sl) and segs[u] == s and sl[u] == sl[u - 1] + 1 and u - t < maxrun
                       and (ver is None or ver[(sl[u] - f0) // k])):
                    u += 1
                key = (s, li, li + (u - t), None)
            jobs.append((key, [(sl[v] - f0, ol[v]) for v in range(t, u)]))
            t = u

        # A run of records not to be checked goes straight into its batch slots (one preadv
        # with a buffer per slot) where the file offset, the record size and the slots are all
        # on the O_DIRECT alignment (224x224x3 records: 150528 bytes, 294 sectors).
        base = np.frombuffer(out, dtype=np.uint8).ctypes.data if len(out) else 0

        def run(key, recs, fd):
            s, lo, hi, j = key
            seg = self._segs[s]
            off, ln = seg.range_span(lo, hi)
            data = None
            if fd is not None:
                al = _DIO_ALIGN[0]
                if j is None and off % al == 0 and rs % al == 0 and base % al == 0:
                    views = [out[slot * rs:(slot + 1) * rs] for _, slot in recs]
                    try:
                        if os.preadv(fd, views, off) == ln:
                            return
                    except OSError:
                        pass
                data = _pread_direct(fd, off, ln)
            if data is None:  # O_DIRECT refused or short: through the page cache
                data = memoryview(_direct_scratch(ln))
                with seg.opened() as fd:
                    pread_into(fd, data, off, seg.path)
            if j is not None:
                seg.check_block(j, data)
            for li, slot in recs:
                a = (li - lo) * rs
                out[slot * rs:(slot + 1) * rs] = data[a:a + rs]

        # The reads that need no more than a preadv (a kept descriptor, aligned, nothing to
        # check) are prepared here, so the read threads hold the GIL for as little as possible.
        al = _DIO_ALIGN[0]
        if rs % al == 0 and base % al == 0:
            fds = {}
            for q, (key, recs) in enumerate(jobs):
                s, lo, hi, j = key
                if j is not None or self._segs[s].fd < 0:
                    continue
                fd = fds.get(s)
                if fd is None:
                    with self._direct_fd(s) as fd:
                        fds[s] = fd = -1 if fd is None else fd
                off, ln = self._segs[s].range_span(lo, hi)
                if fd >= 0 and off % al == 0:
                    jobs[q] = (key, recs, fd, [out[slot * rs:(slot + 1) * rs] for _, slot in recs], off, ln)
        dfds = self._dfds

        def stripe(part):  # one of _DIRECT_DEPTH threads: a read at a time, the next one left
            for job in part:
                if len(job) > 2:
                    try:
                        if os.preadv(job[2], job[3], job[4]) == job[5]:
                            continue
                    except OSError:
                        pass
                key, recs = job[0], job[1]
                s = key[0]
                fd = dfds.get(s)
                if fd is not None and self._segs[s].fd >= 0:  # the kept descriptor (or -1: refused)
                    run(key, recs, fd if fd >= 0 else None)
                    continue
                with self._direct_fd(s) as fd:
                    run(key, recs, fd)

        pool = _direct_pool()
        depth = max(1, _DIRECT_DEPTH)
        shared = iter(jobs)  # each thread takes the next read when it is done with one
        futs = [pool.submit(stripe, shared) for _ in range(min(depth, len(jobs)))]
        _wait_checks(futs)
        for s in sorted(set(segs)):
            self._segs[s].check_unchanged()

    def _fill_direct_aio(self, sidx, order, out):
        """_fill_direct's common case in one call of the C library: every record goes straight
        into its batch slot (record size, file offsets and slots on the O_DIRECT alignment), no
        checksum block left to check, local files. A run of neighbouring records is one read
        (one preadv into its slots), _DIRECT_DEPTH reads in flight. False where the case does
        not apply or native asynchronous I/O is not available (nothing is read then): the
        caller reads with _fill_direct. A read that fails or comes back short is read again
        through the page cache (which names the file where it really is short)."""
        fn = _aio_batch()
        rs = self.record_size
        al = _DIO_ALIGN[0]
        if fn is None or not rs or rs % al:
            return False
        base = np.frombuffer(out, dtype=np.uint8).ctypes.data
        if base % al:
            return False
        firsts = np.asarray(self._firsts, dtype=np.int64)
        segs = np.searchsorted(firsts, sidx, side="right") - 1
        used = np.unique(segs).tolist()
        off0 = np.zeros(len(self._segs), dtype=np.int64)  # file offset of each segment's record 0
        for s in used:
            seg = self._segs[s]
            if seg.remote or getattr(seg, "var_size", False):
                return False
            ver = getattr(seg, "_verified", None) if self.verify_crc else None
            if ver is not None and not ver[(sidx[segs == s] - self._firsts[s]) // seg.block_records].all():
                return False
            off0[s] = seg.range_span(0, 0)[0]
            if off0[s] % al:
                return False
        # The O_DIRECT descriptors: kept ones, or (a dataset of many shards keeps none) opened
        # for this batch, checked to be the files the dataset opened, and closed after it.
        with contextlib.ExitStack() as opened:
            fds = np.full(len(self._segs), -1, dtype=np.int32)
            for s in used:
                fd = opened.enter_context(self._direct_fd(s))
                if fd is None:
                    return False
                fds[s] = fd
            return self._aio_reads(fn, sidx, order, out, segs, used, fds, off0, base)

    def _aio_reads(self, fn, sidx, order, out, segs, used, fds, off0, base):
        """_fill_direct_aio's reads, the descriptors fds (by segment) open."""
        rs = self.record_size
        n = sidx.size
        firsts = np.asarray(self._firsts, dtype=np.int64)
        # Runs of neighbouring records of one segment, each at most maxrun records (one preadv).
        maxrun = max(1, min(_DIRECT_RUN_MAX // rs, IOV_MAX))
        cut = np.ones(n, dtype=bool)
        cut[1:] = (np.diff(sidx) != 1) | (np.diff(segs) != 0)
        runstart = np.nonzero(cut)[0]
        k = np.arange(n) - runstart[np.cumsum(cut) - 1]
        cut |= k % maxrun == 0
        starts = np.nonzero(cut)[0]
        niov = np.diff(np.append(starts, n)).astype(np.int32)
        js = segs[starts]
        jfd = fds[js]
        joff = off0[js] + (sidx[starts] - firsts[js]) * rs
        iov = np.empty((n, 2), dtype=np.uint64)  # struct iovec: base, length
        iov[:, 0] = base + order.astype(np.uint64) * np.uint64(rs)
        iov[:, 1] = rs
        status = np.zeros(starts.size, dtype=np.int8)
        bad = fn(int(starts.size), jfd.ctypes.data, joff.ctypes.data, niov.ctypes.data, iov.ctypes.data,
                 max(1, _DIRECT_DEPTH), status.ctypes.data)
        if bad < 0:
            return False
        if bad:
            ol = order.tolist()
            for q in np.nonzero(status)[0].tolist():
                seg = self._segs[int(js[q])]
                a = int(starts[q])
                views = [out[p * rs:(p + 1) * rs] for p in ol[a:a + int(niov[q])]]
                with seg.opened() as fd:
                    preadv_into(fd, views, int(joff[q]), seg.path)
        for s in used:
            self._segs[s].check_unchanged()
        return True

    def _direct_copy(self, s, dst, off, ln):
        """Read file bytes [off, off+ln) of segment s with O_DIRECT (through this thread's
        aligned scratch) into dst; False where O_DIRECT is refused or the read is short."""
        with self._direct_fd(s) as fd:
            data = None if fd is None else _pread_direct(fd, off, ln)
            if data is None:
                return False
            dst[:ln] = data
            return True

    def _direct_read(self, s, raw, off, ln):
        """Read file bytes [off, off+ln) of segment s with O_DIRECT into raw, starting at raw
        offset off % ALIGN (so every read is aligned); return that offset, or None where
        O_DIRECT is refused or fails (the caller then reads buffered)."""
        with self._direct_fd(s) as fd:
            if fd is None:  # an object in a bucket, or O_DIRECT refused
                return None
            lead = off % ALIGN
            a = off - lead
            need = lead + ln
            mv = memoryview(raw)[:min(align_up(need), raw.size)]
            got = 0
            while got < need:
                try:
                    k = os.preadv(fd, [mv[got:]], a + got)
                except OSError:
                    return None
                if k <= 0:
                    return None
                got += k
            return lead

    @staticmethod
    def _same_file(seg, fd):
        """fd, opened by path after the dataset was opened (an O_DIRECT descriptor): it must be
        the file the dataset checked then, not one renamed to its path since (a rebuild that
        replaced the folder, an rsync); otherwise close it and raise."""
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != seg._ident:
            os.close(fd)
            raise FormatError(seg.path, "the file was replaced or changed since the dataset was opened; reopen the dataset")
        return fd

    def close(self):
        for s in getattr(self, "_segs", []):
            s.close()
        for fd in getattr(self, "_dfds", {}).values():
            if fd >= 0:
                os.close(fd)
        self._dfds = {}
        super().close()

    def _read_one(self, i):
        return self._read_split(i)[0]

    def _read_split(self, i):
        """(sample array, each field's raw bytes or None) of record i, its block checked."""
        s, li = self._locate(i)
        seg = self._segs[s]
        off, ln = seg.range_span(li, li + 1)
        raw = _record_empty(ln)  # aligned, so the record's array is too
        with seg.opened() as fd:
            pread_into(fd, memoryview(raw), off, seg.path)
        if self.verify_crc:
            seg.check_records(li, li + 1, memoryview(raw))
        seg.check_unchanged()
        fields = None
        if getattr(seg, "fieldlens", None) is not None:  # format version 3
            raw, fields = seg.split_fields(li, raw)
        arr = np.frombuffer(raw, dtype=self.dtype)
        return arr.reshape(self._record_shape(seg, li, arr.size)), fields

    def _read_run(self, first, n):
        """[(sample array, each field's raw bytes, the file)] of records first..first+n-1 of a
        dataset with fields stored in shards: each shard's share read in one call, its blocks
        checked over the very bytes read (as _read_split checks one record), then split. None
        where the records are not in version-3 shards (npy keeps fields in files of their own)."""
        out = []
        i, end = first, first + n
        while i < end:
            s, lo = self._locate(i)
            seg = self._segs[s]
            if getattr(seg, "fieldlens", None) is None or getattr(seg, "remote", False):
                return None
            hi = min(seg.n, lo + (end - i))
            off, ln = seg.range_span(lo, hi)
            buf = bytearray(ln)
            seg.read_range_into(lo, hi, memoryview(buf))
            mv = memoryview(buf)
            if self.verify_crc:
                seg.check_records(lo, hi, mv)
            seg.check_unchanged()
            base = int(seg.offsets[lo])
            for li in range(lo, hi):
                a = int(seg.offsets[li]) - base
                raw, fields = seg.split_fields(li, mv[a:a + int(seg.offsets[li + 1]) - int(seg.offsets[li])])
                arr = np.frombuffer(raw, dtype=self.dtype)
                out.append((arr.reshape(self._record_shape(seg, li, arr.size)), fields, seg.path))
            i += hi - lo
        return out

    def _read_record(self, i):
        img, fields = self._read_split(i)
        if fields is None:  # npy: the fields' own files
            return img, self._field_raws(i), self._field_paths()
        return img, fields, self._segs[self._locate(i)[0]].path

    def _record_shape(self, seg, li, size):
        if self.fixed:
            return self.shape
        return seg.record_shape(li)

    def _fill_range(self, first, n, raw):
        pending = []  # checks running on the checker thread
        try:
            out = self._fill_range_checked(first, n, raw, pending)
        except BaseException:
            _wait_checks(pending)
            raise
        _wait_checks(pending)
        for s in range(self._locate(first)[0], self._locate(first + n - 1)[0] + 1):
            self._segs[s].check_unchanged()
        return out

    def _overlap_check(self, seg, li, take, ln):
        """Whether to read seg's local records [li, li + take), ln bytes, in pieces checked
        beside the read: a local shard, a big read, a CRC that releases the GIL, and blocks
        not all checked yet (later epochs read in one piece)."""
        if not (self.verify_crc and ln >= 2 * _CHECK_PIECE and not seg.remote and self.record_size
                and getattr(seg, "block_records", 0) > 0 and _crc32c.BACKEND.startswith("packer")):
            return False
        k = seg.block_records
        return not seg._verified[li // k:(li + take - 1) // k + 1].all()

    def _read_overlapped(self, seg, li, take, mv, pending):
        """Read local records [li, li + take) of seg into mv piece by piece; each piece ends on
        a checksum block boundary (or at the end) and is checked on the checker thread while
        the next is read."""
        k = seg.block_records
        step = max(1, _CHECK_PIECE // (k * self.record_size)) * k  # records per piece
        base, _ = seg.range_span(li, li)
        a, end = li, li + take
        with seg.opened() as fd:
            while a < end:
                b = min(end, a // k * k + step)
                o, ln = seg.range_span(a, b)
                piece = mv[o - base:o - base + ln]
                pread_into(fd, piece, o, seg.path)
                pending.append(_checker().submit(seg.check_records, a, b, piece))
                a = b

    def _fill_range_checked(self, first, n, raw, pending):
        rs = self.record_size
        pos = 0
        lead = 0
        i = first
        end = first + n
        while i < end:
            s, li = self._locate(i)
            seg = self._segs[s]
            take = min(end - i, seg.n - li)
            off, ln = seg.range_span(li, li + take)
            d_lead = self._direct_read(s, raw, off, ln) if (self.direct and pos == 0) else None
            if d_lead is not None:
                lead = d_lead
            elif self.direct and pos == 0:  # O_DIRECT refused or short: read buffered
                lead = 0
                with seg.opened() as fd:
                    pread_into(fd, memoryview(raw)[:ln], off, seg.path)
            elif self.direct and self._direct_copy(s, memoryview(raw)[lead + pos:lead + pos + ln], off, ln):
                pass  # a later shard's part of the batch: O_DIRECT into the scratch, copied
            elif self._overlap_check(seg, li, take, ln):  # read and checked (on the checker thread)
                self._read_overlapped(seg, li, take, memoryview(raw)[lead + pos:lead + pos + ln], pending)
                pos += ln
                i += take
                continue
            else:
                dst = memoryview(raw)[lead + pos:lead + pos + ln]
                got = 0
                if self.verify_crc and not seg.remote and rs:
                    # Records a check of the batch before read past its end already (in order).
                    got = (take_tail(seg, li, li + take, dst) - li) * rs
                if got < ln:
                    if seg.remote or seg.fd >= 0:  # the descriptor (or object) kept open: seg.opened() without its overhead
                        pread_into(seg.fd, dst[got:], off + got, seg.path)
                    else:
                        with seg.opened() as fd:
                            pread_into(fd, dst[got:], off + got, seg.path)
            if self.verify_crc:
                seg.check_records(li, li + take, memoryview(raw)[lead + pos:lead + pos + ln])
            pos += ln
            i += take
        return raw[lead:lead + n * rs].view(self.dtype).reshape((n,) + self.shape)

    def _fill_indices(self, idx, images, spread=False):
        """Read records idx into the slots of images (record idx[t] into images[t]): sorted by
        file and offset, a record asked for more than once read once (into its first slot,
        then copied to the others)."""
        order = np.argsort(idx, kind="stable")
        sidx = idx[order]
        if sidx.size == 0:
            return
        same = sidx[1:] == sidx[:-1]
        if not same.any():
            self._fill_sorted(sidx, order, images, spread)
            return
        first = np.concatenate(([True], ~same))  # the sort is stable: a record's lowest slot first
        src = order[first][np.cumsum(first)[~first] - 1]
        self._fill_sorted(sidx[first], order[first], images, spread)
        images[order[~first]] = images[src]

    def _fill_sorted(self, sidx, order, images, spread):
        """_fill_indices for sorted, distinct record indices sidx: record sidx[t] into slot
        order[t] of images."""
        rs = self.record_size
        out = memoryview(images.reshape(-1).view(np.uint8))
        n = sidx.size
        if self._store is not None:
            if spread and self._sparse_remote(sidx):
                self._fill_remote_sparse(sidx, order, out)
                return
            self._prefetch(sidx)
        elif self.direct:
            if not self._fill_direct_aio(sidx, order, out):
                self._fill_direct(sidx, order, out)
            return
        # Runs of consecutive records of one segment (the indices are sorted, so a segment's
        # runs are together): each run is one preadv straight into its batch slots, and a
        # segment's runs share one descriptor.
        firsts = np.asarray(self._firsts, dtype=np.int64)
        segs_of = np.searchsorted(firsts, sidx, side="right") - 1
        brk = np.nonzero((np.diff(sidx) != 1) | (np.diff(segs_of) != 0))[0] + 1
        starts = np.concatenate(([0], brk)).tolist()
        ends = np.concatenate((brk, [n])).tolist()
        segs_l = segs_of[starts].tolist()
        firsts_l = sidx[starts].tolist()
        order_l = order.tolist()
        r = 0
        while r < len(starts):
            s = segs_l[r]
            seg = self._segs[s]
            q = r
            while q < len(starts) and segs_l[q] == s:
                q += 1
            f0 = self._firsts[s]
            off0, _ = seg.range_span(0, 0)
            ver = getattr(seg, "_verified", None)  # None: a file without checksums (npy)
            # Blocks all checked already (a later epoch): no check_records call per run.
            check = self.verify_crc and ver is not None and not ver[
                (sidx[starts[r]:ends[q - 1]] - f0) // seg.block_records].all()
            with seg.opened() as fd:
                plain = isinstance(fd, int)
                for t in range(r, q):
                    k, j = starts[t], ends[t]
                    li = firsts_l[t] - f0
                    off = off0 + li * rs
                    views = [out[p * rs:(p + 1) * rs] for p in order_l[k:j]]
                    # one preadv; the checked loop where it comes back short or the file is an object
                    if not plain or j - k > IOV_MAX or os.preadv(fd, views, off) != (j - k) * rs:
                        preadv_into(fd, views, off, seg.path)
                    if check:
                        seg.check_records(li, li + (j - k), views)
            seg.check_unchanged()
            r = q
