import os

import numpy as np
import pytest

from packer_reader import _crc32c


def test_check_value():
    assert _crc32c.crc32c(b"123456789") == 0xE3069283
    assert _crc32c.crc32c_python(b"123456789") == 0xE3069283
    assert _crc32c.crc32c(b"") == 0


@pytest.mark.parametrize("n", [1, 63, 64, 65, 1023, 1024, 1025, 4096 + 17, 70001, (1 << 22) + 129])
def test_numpy_matches_reference(n):
    rng = np.random.default_rng(n)
    d = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
    want = _crc32c.crc32c_python(d) if n < 100000 else None
    got = _crc32c._crc32c_numpy(d)
    if want is not None:
        assert got == want
    k = n // 3
    # extension and combination agree with the one-shot value
    assert _crc32c._crc32c_numpy(d[k:], _crc32c._crc32c_numpy(d[:k])) == got
    assert _crc32c.combine(_crc32c._crc32c_numpy(d[:k]), _crc32c._crc32c_numpy(d[k:]), n - k) == got


def test_large_against_reference_chunks():
    d = os.urandom(3 * 1024 * 1024 + 5)
    ref = 0
    for p in range(0, len(d), 65536):  # reference on pieces, combined by extension
        ref = _crc32c._crc32c_numpy(d[p:p + 65536], ref)
    assert _crc32c._crc32c_numpy(d) == ref
    assert _crc32c.crc32c_python(d[:5000]) == _crc32c._crc32c_numpy(d[:5000])


def test_lazy_tables_are_thread_safe():
    import importlib
    import threading

    c = importlib.reload(_crc32c)  # fresh, empty tables
    d = os.urandom((1 << 22) + 4097)
    want = None
    results = []

    def work():
        results.append(c._crc32c_numpy(d))

    ts = [threading.Thread(target=work) for _ in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    want = c._crc32c_numpy(d)
    assert results == [want] * 6
    assert c._crc32c_numpy(d[:5000]) == c.crc32c_python(d[:5000])


# --- packer's C library (python/packer_reader/_crc32c_hw.c, loaded with ctypes) ------------

def _lib_or_skip():
    if _crc32c._lib is None:
        if os.environ.get("PACKER_REQUIRE_CRC_HW") == "1":
            pytest.fail("libpackercrc.so not loaded from %s (scripts/setup.sh builds it)" % _crc32c._LIB)
        pytest.skip("libpackercrc.so not built (scripts/setup.sh builds it with gcc)")
    return _crc32c._lib


def test_library_is_used_when_built():
    """In the source tree scripts/setup.sh builds the library; scripts/test.sh sets
    PACKER_REQUIRE_CRC_HW=1 so a missing library fails here instead of quietly falling back."""
    lib = _lib_or_skip()
    assert _crc32c.BACKEND == ("packer-hw" if lib.packer_crc32c_hw() else "packer-c")
    if os.environ.get("PACKER_REQUIRE_CRC_HW") == "1" and os.uname().machine == "x86_64":
        assert _crc32c.BACKEND == "packer-hw"  # every x86-64 CPU of the last 15 years has SSE4.2


def _c_functions(lib):
    """Both C paths as crc32c(data, crc) over bytes: the dispatching one and the portable one."""
    return [_crc32c._ctypes_crc(lib.packer_crc32c, None), _crc32c._ctypes_crc(lib.packer_crc32c_portable, None)]


def test_library_every_length_and_alignment():
    lib = _lib_or_skip()
    big = os.urandom(300 + 16)
    fns = _c_functions(lib)
    for n in range(301):
        for a in range(16):
            d = memoryview(big)[a:a + n]
            want = _crc32c.crc32c_python(d)
            for fn in fns:
                assert fn(d) == want, (n, a)
            assert lib.packer_crc32c(0, big[a:a + n], n) == want


@pytest.mark.parametrize("n", [3 * 8192 - 1, 3 * 8192, 3 * 8192 + 9, 3 * 256 * 5 + 7, (5 << 20) + 3, (7 << 20) - 13])
def test_library_big_buffers_and_chaining(n):
    lib = _lib_or_skip()
    d = os.urandom(n + 5)[5:]  # not 8-aligned
    want = _crc32c._crc32c_numpy(d)
    fns = _c_functions(lib)
    for fn in fns:
        assert fn(d) == want
        for k in (1, 7, 8, 257, n // 3, n - 1):  # chained: crc of A, then continued over B
            assert fn(d[k:], fn(d[:k])) == want
    assert _crc32c.crc32c(d) == want


def test_library_input_types():
    import mmap

    lib = _lib_or_skip()
    for n in (100, 600, 70004):  # below and above the small-input cut-over (multiples of 4)
        d = os.urandom(n)
        want = _crc32c.crc32c_python(d) if n < 1000 else _crc32c._crc32c_numpy(d)
        m = mmap.mmap(-1, n)
        m[:] = d
        inputs = [d, bytearray(d), memoryview(d), memoryview(bytearray(d)), memoryview(d)[:],
                  np.frombuffer(d, np.uint8), np.frombuffer(bytearray(d), np.uint8),
                  np.frombuffer(d, np.uint32)[None],
                  m, memoryview(m)]
        for fn in _c_functions(lib) + [_crc32c.crc32c]:
            for x in inputs:
                assert fn(x) == want, (n, type(x))
            assert fn(memoryview(d)[3:], fn(d[:3])) == want  # read-only view of bytes, offset
        del inputs, x
        m.close()  # no buffer export left behind by a call
    with pytest.raises((TypeError, ValueError, BufferError)):
        _crc32c.crc32c(np.zeros((64, 64), np.uint8)[:, ::2])  # not contiguous: refused, not wrong


def test_library_releases_the_gil():
    """While one thread is inside a long C call, Python code keeps running in another: proof
    that ctypes released the GIL. No timing thresholds, only how far a counter moved: a call
    that holds the GIL (the crc32c module, 130 ms here) lets it move some ten thousand steps in
    the switch intervals around the call, a released GIL millions (best of a few tries, so a
    busy machine does not fail it)."""
    import sys
    import threading

    lib = _lib_or_skip()
    d = np.tile(np.frombuffer(os.urandom(1 << 20), np.uint8), 256)  # 256 MiB
    crc = _crc32c._ctypes_crc(lib.packer_crc32c_portable, None)  # the slower path: a longer call
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    best = 0
    try:
        for _ in range(5):
            state = {"in_call": False}

            def work():
                state["in_call"] = True
                state["crc"] = crc(d)
                state["in_call"] = False

            t = threading.Thread(target=work)
            t.start()
            while not state["in_call"] and t.is_alive():
                pass
            c = 0
            while state["in_call"]:  # runs only while the worker is inside crc()
                c += 1
            t.join()
            assert state["crc"] == _crc32c.crc32c(d)
            best = max(best, c)
            if best > 300000:
                break
    finally:
        sys.setswitchinterval(old)
    assert best > 300000, best
