"""Low-level positional reads. ``fd`` is a file descriptor, or an object opened in a bucket
(``_s3.S3Object``: it has ``pread_into`` and ``preadv_into`` of its own)."""

import os

from ._errors import FormatError

IOV_MAX = 1024
_MAX_CHUNK = 1 << 30  # bytes per read call; Linux caps one read at about 2 GiB


def pread_into(fd, mv, offset, path):
    """Fill memoryview mv from file offset; raise FormatError if the file ends first."""
    if not isinstance(fd, int):
        return fd.pread_into(mv, offset, path)
    total = len(mv)
    got = 0
    while got < total:
        want = min(total - got, _MAX_CHUNK)
        n = os.preadv(fd, [mv[got:got + want]], offset + got)
        if n <= 0:
            raise FormatError(path, "file ends at %d, expected %d more bytes" % (offset + got, total - got),
                              offset + got)
        got += n
    return total


def preadv_into(fd, bufs, offset, path):
    """Scatter-read consecutive file bytes from offset into the memoryviews in bufs."""
    if not isinstance(fd, int):
        return fd.preadv_into(bufs, offset, path)
    i = 0
    while i < len(bufs):
        batch = bufs[i:i + IOV_MAX]
        want = sum(len(b) for b in batch)
        n = os.preadv(fd, batch, offset)
        if n <= 0:
            raise FormatError(path, "file ends at %d, expected %d more bytes" % (offset, want), offset)
        offset += n
        if n == want:
            i += len(batch)
            continue
        # short read: skip the filled buffers, keep the rest of the partial one
        k = i
        while n >= len(bufs[k]):
            n -= len(bufs[k])
            k += 1
        bufs = list(bufs)
        bufs[k] = bufs[k][n:]
        i = k
    return offset


def pread(fd, size, offset, path):
    buf = bytearray(size)
    pread_into(fd, memoryview(buf), offset, path)
    return buf


def open_ro(path):
    return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))


def open_direct(path):
    """An O_DIRECT descriptor, or None where the platform or file system refuses it."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return None
    try:
        return os.open(path, os.O_RDONLY | flag | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
