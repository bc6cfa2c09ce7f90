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
