"""The build order of ``packer build --shuffle --seed S`` (docs/decisions.md) from Python: record i
of the dataset is input ``Permutation(N, S, 2**64 - 1).at(i)`` of the source's listing. The
values are pinned in pipeline/shuffle_test.go (TestBuildOrder) from Go's BuildOrder too."""
import numpy as np

from packer_reader._order import Permutation

BUILD_EPOCH = 2**64 - 1


def test_build_order_matches_go():
    assert Permutation(20, 5, BUILD_EPOCH).at(np.arange(20)).tolist() == [
        0, 14, 5, 11, 1, 18, 4, 19, 7, 15, 10, 17, 8, 9, 16, 3, 2, 6, 13, 12]
    assert Permutation(7, 2**64 - 1, BUILD_EPOCH).at(np.arange(7)).tolist() == [3, 1, 2, 6, 4, 0, 5]


def test_shuffled_build_is_the_specified_permutation(tmp_path):
    """An IDX source written here with NumPy, built by the Go packer with and without --shuffle:
    record i of the shuffled dataset is record Permutation(N, S, 2**64 - 1).at(i) of the
    unshuffled one (and of the source), label included, for a seed beyond 2**63."""
    import os
    import shutil
    import struct
    import subprocess

    import packer_reader

    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    packer = os.environ.get("PACKER_BIN")
    if not packer:
        assert shutil.which("go"), "Go is needed to build packer (or set PACKER_BIN)"
        packer = str(tmp_path / "packer")
        subprocess.run(["go", "build", "-o", packer, "./cmd/packer"], cwd=repo, check=True)
    n, h, w = 37, 3, 4
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(n, h, w), dtype=np.uint8)
    labels = (np.arange(n) // 10).astype(np.uint8)  # class-ordered
    src = tmp_path / "idx"
    src.mkdir()
    (src / "train-images-idx3-ubyte").write_bytes(struct.pack(">IIII", 0x803, n, h, w) + images.tobytes())
    (src / "train-labels-idx1-ubyte").write_bytes(struct.pack(">II", 0x801, n) + labels.tobytes())
    seed = 2**64 - 3
    for out, extra in (("plain", []), ("shuf", ["--shuffle", "--seed", str(seed)])):
        r = subprocess.run([packer, "build", str(src), "-o", str(tmp_path / out), *extra], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    plain, shuf = packer_reader.open(str(tmp_path / "plain")), packer_reader.open(str(tmp_path / "shuf"))
    order = Permutation(n, seed, BUILD_EPOCH).at(np.arange(n))
    assert sorted(order.tolist()) == list(range(n)) and order.tolist() != list(range(n))
    for i in range(n):
        im, lab = shuf[i]
        k = int(order[i])
        assert np.array_equal(np.asarray(im).reshape(h, w), images[k]) and int(lab) == int(labels[k]), i
        pim, plab = plain[k]
        assert np.array_equal(np.asarray(im), np.asarray(pim)) and int(lab) == int(plab)


def test_inspect_shows_the_build_order(tmp_path):
    """python -m packer_reader inspect says in which order the records were written."""
    from packer_reader.__main__ import _describe_order

    assert _describe_order({"source": {"kind": "folder"}}) == "source order"
    assert _describe_order({"source": {"kind": "idx", "shuffle": {"seed": 2**64 - 1}}}) == \
        "shuffled at build time (--shuffle --seed 18446744073709551615)"
    for bad in ({"seed": -1}, {"seed": 2**64}, {"seed": 1.5}, {"seed": "5"}, {"seed": 5, "x": 1}, True):
        assert _describe_order({"source": {"shuffle": bad}}).startswith("unknown"), bad
