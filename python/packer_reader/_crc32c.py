"""CRC-32C (Castagnoli), as Go's ``hash/crc32`` computes it with ``crc32.Castagnoli``.

Backends, first usable one wins (``BACKEND`` names it):

- ``packer-hw`` / ``packer-c``: packer's own C library, ``_lib/libpackercrc.so`` built from
  ``_crc32c_hw.c`` (by scripts/setup.sh in the source tree, by scripts/build-wheel.sh into the
  wheel), loaded with ctypes, which releases the GIL during the call, so a prefetch thread's
  check runs beside the training loop. ``packer-hw`` uses the SSE4.2 crc32 instruction on three
  interleaved streams (about 13 GB/s on one core); ``packer-c`` is its table-driven fallback
  (about 1.8 GB/s) on CPUs without SSE4.2 or other than x86-64. Without the library (no compiler
  when installing from source) the reader falls back to:
- ``google_crc32c`` or ``crc32c``, optional modules computing the same function in C;
- ``numpy``: pure Python over NumPy, below.

The NumPy implementation uses the linearity of the CRC over GF(2): the data is cut into
chunks of ``_L`` bytes, each chunk's raw CRC (register started at 0) is the XOR of one
table lookup per byte position (``_POS[p][byte]``, "slicing by _L", vectorised over all
chunks at once), and the chunk CRCs are folded pairwise with "shift by n zero bytes"
operators until one value is left. Throughput is a few hundred MB/s on one core, against
about 1 MB/s for a byte-at-a-time Python loop.
"""

import ctypes
import os
import threading

import numpy as np

_POLY = 0x82F63B78  # reflected Castagnoli polynomial
_MASK = 0xFFFFFFFF
_L = 128  # bytes per chunk in the vectorised path (measured best of 64, 128, 256)
_SLAB = 1 << 22  # bytes per vectorised slab (bounds temporary memory to a few slab sizes)
_SMALL = 1024  # below this many bytes the plain table loop is faster


def _make_table():
    t = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ (_POLY if c & 1 else 0)
        t.append(c)
    return t


_T = _make_table()
_TNP = np.array(_T, dtype=np.uint32)


def _raw_py(reg, data):
    """Raw register update over data (no init, no final xor), plain Python."""
    t = _T
    for b in data:
        reg = t[(reg ^ b) & 0xFF] ^ (reg >> 8)
    return reg


# --- shift-by-zeros operators ------------------------------------------------------------
# An operator is the list of 32 columns: op[i] = image of the register value 1 << i.


def _op_apply(op, x):
    r = 0
    i = 0
    while x:
        if x & 1:
            r ^= op[i]
        x >>= 1
        i += 1
    return r


def _op_compose(a, b):
    """Operator a after b."""
    return [_op_apply(a, c) for c in b]


_Z1 = [_raw_py(1 << i, b"\x00") for i in range(32)]
_ZPOW = [_Z1]  # _ZPOW[k] shifts by 2**k zero bytes


_INIT = threading.RLock()  # the lazily built tables are shared by every thread


def _zpow(k):
    if len(_ZPOW) <= k:
        with _INIT:
            while len(_ZPOW) <= k:
                z = _ZPOW[-1]
                _ZPOW.append(_op_compose(z, z))
    return _ZPOW[k]


def _shift(x, n):
    """Register x advanced over n zero bytes."""
    k = 0
    while n and x:
        if n & 1:
            x = _op_apply(_zpow(k), x)
        n >>= 1
        k += 1
    return x


def _op_for(n):
    """Operator shifting by n zero bytes, as 32 columns."""
    return [_shift(1 << i, n) for i in range(32)]


def _byte_tables(op):
    """Four 256-entry tables so that op(x) = t0[x&255] ^ t1[x>>8&255] ^ t2[...] ^ t3[x>>24]."""
    cols = np.array(op, dtype=np.uint32)
    v = np.arange(256, dtype=np.uint32)
    out = np.zeros((4, 256), dtype=np.uint32)
    for k in range(4):
        for bit in range(8):
            out[k] ^= np.where((v >> bit) & 1 == 1, cols[8 * k + bit], np.uint32(0)).astype(np.uint32)
    return out


def _apply_np(tabs, x):
    return (tabs[0][x & 0xFF] ^ tabs[1][(x >> 8) & 0xFF]
            ^ tabs[2][(x >> 16) & 0xFF] ^ tabs[3][x >> 24])


# Position tables: contribution of byte value v at position p of an _L-byte chunk to the
# chunk's raw CRC: Z_{L-1-p}(T[v]). Stored flat so index = p*256 + v.
def _pos_tables():
    z1 = _byte_tables(_Z1)
    rows = [None] * _L
    cur = _TNP.copy()
    for p in range(_L - 1, -1, -1):
        rows[p] = cur
        cur = _apply_np(z1, cur)
    return np.concatenate(rows).astype(np.uint32)


_POS = None
_POSOFF = (np.arange(_L, dtype=np.uint16) * 256).reshape(1, _L)
_LEVEL = []  # _LEVEL[j]: byte tables of the operator shifting by _L * 2**j


def _level(j):
    if len(_LEVEL) <= j:
        with _INIT:
            while len(_LEVEL) <= j:
                _LEVEL.append(_byte_tables(_op_for(_L << len(_LEVEL))))
    return _LEVEL[j]


def _raw_np(buf):
    """Raw CRC (register from 0) of a byte array whose length is a multiple of _L."""
    global _POS
    if _POS is None:
        with _INIT:
            if _POS is None:
                _POS = _pos_tables()
    m = buf.size // _L
    d = buf.reshape(m, _L)
    idx = d + _POSOFF  # uint16: p*256 + byte
    r = np.bitwise_xor.reduce(_POS[idx], axis=1)
    j = 0
    while r.size > 1:
        if r.size & 1:
            # a leading zero chunk does not change a raw CRC started at 0
            r = np.concatenate((np.zeros(1, dtype=np.uint32), r))
        r = _apply_np(_level(j), r[0::2]) ^ r[1::2]
        j += 1
    return int(r[0])


def _raw(reg, data):
    mv = memoryview(data).cast("B")
    n = len(mv)
    if n < _SMALL:
        return _raw_py(reg, mv)
    arr = np.frombuffer(mv, dtype=np.uint8)
    head = n % _L
    if head:
        reg = _raw_py(reg, mv[:head])
    pos = head
    while pos < n:
        end = min(n, pos + _SLAB)
        reg = _shift(reg, end - pos) ^ _raw_np(arr[pos:end])
        pos = end
    return reg


def _crc32c_numpy(data, crc=0):
    return _raw((crc ^ _MASK) & _MASK, data) ^ _MASK


def crc32c_python(data, crc=0):
    """Byte-at-a-time reference implementation (slow; used by tests)."""
    return _raw_py((crc ^ _MASK) & _MASK, memoryview(data).cast("B")) ^ _MASK


def combine(crc1, crc2, len2):
    """CRC-32C of A||B from crc1 = crc(A), crc2 = crc(B) and len2 = len(B)."""
    return _shift(crc1, len2) ^ crc2


BACKEND = "numpy"
crc32c = _crc32c_numpy


def _usable(fn):
    try:
        return fn(b"123456789") == 0xE3069283 and fn(b"6789", fn(b"12345")) == 0xE3069283
    except Exception:
        return False


try:  # optional C implementations of the same function, used when present and correct
    import google_crc32c as _g

    def _google(data, crc=0):
        return _g.extend(crc, data if isinstance(data, bytes) else bytes(data))

    if getattr(_g, "implementation", "") == "c" and _usable(_google):
        crc32c, BACKEND = _google, "google_crc32c"
except Exception:  # pragma: no cover - optional
    pass
if BACKEND == "numpy":
    try:
        import crc32c as _c

        def _crc32c_module(data, crc=0):
            return _c.crc32c(data, crc)

        if _usable(_crc32c_module):
            crc32c, BACKEND = _crc32c_module, "crc32c"
    except Exception:  # pragma: no cover - optional
        pass


# --- packer's C library (ctypes) ---------------------------------------------------------
_LIB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib", "libpackercrc.so")
_TINY = 512  # below this many bytes a C module's call (0.1 us) beats ctypes' (0.3-1 us)


def _ctypes_crc(fn, small):
    """crc32c(data, crc=0) over the C function fn(crc, pointer, n), without copying data:
    bytes are passed as they are; a writable buffer's address is taken with a one-byte ctypes
    view of it (c_char.from_buffer, the cheapest way: 0.1-0.2 us; the view holds the buffer
    until the call returns); a read-only one (a memoryview of bytes or of a read-only mmap)
    goes through NumPy's view of it. Inputs under _TINY bytes go to small (a C module's
    function) when there is one. Like the modules, a non-contiguous buffer is refused."""
    c_char, addressof, frombuffer, u8 = ctypes.c_char, ctypes.addressof, np.frombuffer, np.uint8

    def crc32c(data, crc=0):
        if type(data) is bytes:
            n = len(data)
            if n < _TINY and small is not None:
                return small(data, crc)
            return fn(crc, data, n)
        mv = memoryview(data)
        n = mv.nbytes
        if n < _TINY and small is not None:
            return small(mv, crc)
        if n == 0:
            return fn(crc, None, 0)
        if not mv.readonly:
            return fn(crc, addressof(c_char.from_buffer(mv)), n)
        arr = frombuffer(mv, u8)  # a local: kept alive until the call returns
        return fn(crc, arr.ctypes.data, n)

    return crc32c


def _load_lib(path=_LIB):
    lib = ctypes.CDLL(path)
    for name in ("packer_crc32c", "packer_crc32c_portable"):
        f = getattr(lib, name)
        f.restype = ctypes.c_uint32
        f.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t]
    return lib


_lib = None
try:
    if os.path.exists(_LIB):
        _lib = _load_lib()
except OSError:  # pragma: no cover - a broken or foreign library: the chain above stays
    _lib = None
if _lib is not None:
    _small = crc32c if BACKEND in ("google_crc32c", "crc32c") else None
    _hw = _ctypes_crc(_lib.packer_crc32c, _small)
    if _usable(_hw):
        crc32c, BACKEND = _hw, ("packer-hw" if _lib.packer_crc32c_hw() else "packer-c")
