"""Datasets in a bucket (s3://bucket/prefix) against a real S3 server: versitygw on loopback,
started by this module's fixture in a temporary folder on a free port and killed at the end
(scripts/s3-server.sh install builds it). The datasets are published by the Go binary
(`packer build -o s3://...`), and every read from the bucket must equal the read of the same
build in a local folder: same batches, same order, same bytes.

Without boto3 or the server binary the tests skip, saying why; with PACKER_REQUIRE_S3=1
(scripts/test.sh) they fail instead."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

import packer_reader
from packer_reader import _s3

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VERSION = "v1.8.0"  # scripts/s3-server.sh, storage/s3/s3test.Version
ACCESS = "packer-test-access"
SECRET = "packer-test-secret-9f3c1a7e"  # the test server's own account, not a secret
REGION = "us-east-1"
SPLITS = [(0, 1), (0, 2), (1, 2), (2, 3)]


def _missing(what):
    if os.environ.get("PACKER_REQUIRE_S3") == "1":
        pytest.fail("%s, and PACKER_REQUIRE_S3=1" % what)
    pytest.skip(what)


def _binary():
    if os.environ.get("PACKER_VERSITYGW"):
        return os.environ["PACKER_VERSITYGW"]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "packer", "versitygw-" + VERSION, "versitygw")


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _die_with_parent():
    """In the server's process: SIGKILL when the test process dies (Linux), so a test run that
    is killed leaves no server behind."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class Server:
    def __init__(self, root):
        self.root = root
        self.proc = None
        self.endpoint = None

    def start(self):
        binary = _binary()
        for attempt in range(3):
            port = _free_port()
            self.endpoint = "http://127.0.0.1:%d" % port
            log = open(os.path.join(os.path.dirname(self.root), "versitygw.log"), "ab")
            self.proc = subprocess.Popen([binary, "--access", ACCESS, "--secret", SECRET, "--region", REGION,
                                          "--port", "127.0.0.1:%d" % port, "posix", self.root],
                                         stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
            log.close()
            deadline = time.time() + 20
            while time.time() < deadline and self.proc.poll() is None:
                try:
                    urllib.request.urlopen(self.endpoint + "/", timeout=1)
                    return
                except urllib.error.HTTPError:
                    return  # it answers (403 to an unsigned request)
                except OSError:
                    time.sleep(0.05)
            self.stop()
        raise RuntimeError("the S3 test server did not start (log: %s)" % os.path.dirname(self.root))

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def env(self, secret=SECRET):
        return {"AWS_ACCESS_KEY_ID": ACCESS, "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": REGION,
                "AWS_ENDPOINT_URL": self.endpoint, "AWS_CONFIG_FILE": os.devnull,
                "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_PROFILE": ""}

    def client(self):
        import boto3
        from botocore.config import Config
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id=ACCESS,
                            aws_secret_access_key=SECRET, config=Config(s3={"addressing_style": "path"}))


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    try:
        import boto3  # noqa: F401
    except ImportError:
        _missing("boto3 is not installed (apt install python3-boto3, or pip install \"packer_reader[s3]\")")
    if not os.path.exists(_binary()):
        _missing("no S3 test server at %s (install it with: bash scripts/s3-server.sh install)" % _binary())
    root = str(tmp_path_factory.mktemp("s3") / "root")
    os.makedirs(root)
    s = Server(root)
    s.start()
    try:
        c = s.client()
        for b in ("train", "other"):
            c.create_bucket(Bucket=b)
        yield s
    finally:
        s.stop()


@pytest.fixture
def s3env(server, monkeypatch):
    """The standard AWS chain of this process pointed at the test server."""
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    for k, v in server.env().items():
        if k != "AWS_PROFILE":
            monkeypatch.setenv(k, v)
    monkeypatch.delenv("PACKER_CACHE_DIR", raising=False)
    return server


@pytest.fixture(scope="session")
def packer(tmp_path_factory):
    path = os.environ.get("PACKER_BIN")
    if path:
        return path
    if shutil.which("go") is None:
        pytest.fail("Go is needed to build packer for the s3 tests (or set PACKER_BIN)")
    out = str(tmp_path_factory.mktemp("bin") / "packer")
    subprocess.run(["go", "build", "-o", out, "./cmd/packer"], cwd=REPO, check=True)
    return out


def run_packer(packer, server, *args):
    env = dict(os.environ)
    env = {k: v for k, v in env.items() if not k.startswith("AWS_")}
    env.update(server.env())
    env.pop("AWS_PROFILE")
    res = subprocess.run([packer, *args], capture_output=True, text=True, env=env)
    assert res.returncode == 0, "packer %s failed:\n%s\n%s" % (" ".join(args), res.stdout, res.stderr)
    return res


def write_cifar(path, n, seed):
    rng = np.random.default_rng(seed)
    with open(path, "wb") as f:
        for _ in range(n):
            f.write(bytes([int(rng.integers(0, 10))]))
            f.write(rng.integers(0, 256, size=3 * 32 * 32, dtype=np.uint8).tobytes())


@pytest.fixture(scope="session")
def cifar(tmp_path_factory):
    d = tmp_path_factory.mktemp("cifar")
    write_cifar(str(d / "a.bin"), 700, seed=1)
    write_cifar(str(d / "b.bin"), 650, seed=2)
    return str(d / "a.bin"), str(d / "b.bin")


# shards of 64 KiB (21 records of 3 KiB each): a dataset of 34 shards, records crossing chunks
BUILD_ARGS = {"shards": ["--from", "cifar10", "--format", "shards", "--shard-size", "64KiB"],
              "npy": ["--from", "cifar10", "--format", "npy"]}


@pytest.fixture(scope="session")
def datasets(server, packer, cifar, tmp_path_factory):
    """{fmt: (local folder, s3 url)}: the same build in a local folder and in the bucket."""
    out = {}
    for fmt in ("shards", "npy"):
        local = str(tmp_path_factory.mktemp("local-" + fmt) / "out")
        run_packer(packer, server, "build", cifar[0], "-o", local, *BUILD_ARGS[fmt])
        url = "s3://train/sets/" + fmt
        run_packer(packer, server, "build", cifar[0], "-o", url, *BUILD_ARGS[fmt])
        out[fmt] = (local, url)
    return out


def batches(ds, **kw):
    return [(np.array(x, copy=True), np.array(y, copy=True)) for x, y in ds.batches(**kw)]


def assert_same(a, b):
    assert len(a) == len(b)
    for (xa, ya), (xb, yb) in zip(a, b):
        assert xa.dtype == xb.dtype and xa.shape == xb.shape
        assert np.array_equal(xa, xb)
        assert np.array_equal(ya, yb)


def assert_reads_equal(local, url, **open_kw):
    with packer_reader.open(local) as a, packer_reader.open(url, **open_kw) as b:
        assert (len(a), a.format, a.classes, a.shape, a.dtype) == (len(b), b.format, b.classes, b.shape, b.dtype)
        assert np.array_equal(a.labels, b.labels)
        for i in (0, 1, len(a) // 2, len(a) - 1):
            ia, la = a[i]
            ib, lb = b[i]
            assert np.array_equal(ia, ib) and la == lb
        assert np.array_equal(a[10:50][0], b[10:50][0])
        for epoch in (0, 1):
            for rank, world in SPLITS:
                for shuffle in (False, True):
                    kw = dict(batch_size=64, shuffle=shuffle, seed=7, epoch=epoch, rank=rank, world_size=world)
                    assert_same(batches(a, **kw), batches(b, **kw))
        kw = dict(batch_size=50, shuffle=True, seed=3, copy=False, prefetch=0, buffer_size=100, start=17)
        assert_same(batches(a, **kw), batches(b, **kw))
        return b


@pytest.mark.parametrize("fmt", ["shards", "npy"])
def test_bucket_reads_equal_local(s3env, datasets, fmt):
    local, url = datasets[fmt]
    ds = assert_reads_equal(local, url)
    assert ds.path == url
    assert repr(ds).startswith("<packer_reader %s dataset s3://train/sets/%s" % (fmt, fmt))


@pytest.mark.parametrize("fmt", ["shards", "npy"])
def test_bucket_reads_equal_local_through_cache_dir(s3env, datasets, fmt, tmp_path):
    local, url = datasets[fmt]
    assert_reads_equal(local, url, cache_dir=str(tmp_path / "cache"))
    assert os.listdir(str(tmp_path / "cache"))


def test_chunk_cache_few_gets(s3env, datasets):
    """A shuffled epoch of small records costs a few large GETs, not one per record."""
    local, url = datasets["shards"]
    with packer_reader.open(url) as ds:
        shards = len(ds.shards)
        assert shards > 20
        n = 0
        for x, _ in ds.batches(64, shuffle=True, seed=1):
            n += len(x)
        assert n == len(ds)
        # each shard (64 KiB) is one chunk: one GET at open (header, index), none per record
        assert ds._store.gets <= shards + 1, (ds._store.gets, shards)


def test_torch_loader_equal_local(s3env, datasets):
    from conftest import require_torch
    torch = require_torch()
    from packer_reader.torch import loader
    for fmt in ("shards", "npy"):
        local, url = datasets[fmt]
        for epoch in (0, 1):
            kw = dict(batch_size=32, shuffle=True, seed=0, device="cpu", rank=1, world_size=2)
            a = loader(local, **kw)
            b = loader(url, **kw)
            a.set_epoch(epoch)
            b.set_epoch(epoch)
            got_a = list(a)
            got_b = list(b)
            assert len(got_a) == len(got_b) == len(b)
            for (xa, ya), (xb, yb) in zip(got_a, got_b):
                assert torch.equal(xa, xb) and torch.equal(ya, yb)
    # DataLoader workers open the bucket dataset themselves
    local, url = datasets["shards"]
    a = list(loader(local, batch_size=32, shuffle=True, seed=2, device="cpu", num_workers=2))
    b = list(loader(url, batch_size=32, shuffle=True, seed=2, device="cpu", num_workers=2))
    assert len(a) == len(b)
    for (xa, ya), (xb, yb) in zip(a, b):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)


def test_cli_inspect_and_verify(s3env, datasets):
    from packer_reader.__main__ import main
    for fmt in ("shards", "npy"):
        assert main(["inspect", datasets[fmt][1]]) == 0
        assert main(["verify", datasets[fmt][1]]) == 0


def copy_prefix(server, src, dst):
    """Copy every object below s3://train/<src> to s3://train/<dst> (a dataset to damage)."""
    c = server.client()
    for o in c.list_objects_v2(Bucket="train", Prefix=src + "/").get("Contents", []):
        body = c.get_object(Bucket="train", Key=o["Key"])["Body"].read()
        c.put_object(Bucket="train", Key=dst + "/" + o["Key"][len(src) + 1:], Body=body)
    return "s3://train/" + dst


def put(server, key, data):
    server.client().put_object(Bucket="train", Key=key, Body=bytes(data))


def get(server, key):
    return bytearray(server.client().get_object(Bucket="train", Key=key)["Body"].read())


def test_object_replaced_after_open(s3env, datasets):
    url = copy_prefix(s3env, "sets/shards", "replaced/after")
    store_chunk = _s3.CHUNK
    _s3.CHUNK = 4096  # small chunks: a shard's records are not all fetched at open
    try:
        ds = packer_reader.open(url)
    finally:
        _s3.CHUNK = store_chunk
    try:
        last = ds.shards[-1]
        key = "replaced/after/" + ds.manifest["files"][len(ds.shards) - 1]["path"]
        assert last.path == "s3://train/" + key
        data = get(s3env, key)
        original = bytes(data)
        data[last.data_offset + 10] ^= 0xFF  # record 0 of the last shard: another version of the object
        put(s3env, key, data)
        with pytest.raises(packer_reader.S3Error) as e:
            ds[len(ds) - 1]
        assert "s3://train/" + key in str(e.value) and "replaced" in str(e.value)
        with pytest.raises(packer_reader.S3Error):
            for _ in ds.batches(64, shuffle=True, seed=1):
                pass
    finally:
        ds.close()
    put(s3env, key, original)
    with packer_reader.open(url) as ds:  # reopened: the original again
        ds[len(ds) - 1]


def test_object_replaced_before_open_same_size(s3env, datasets):
    """Other bytes of the same size: the manifest's size matches, the block CRCs do not."""
    url = copy_prefix(s3env, "sets/shards", "replaced/before")
    with packer_reader.open(datasets["shards"][0]) as ds:
        off = ds.shards[2].data_offset
    key = "replaced/before/shard-00002.pks"
    data = get(s3env, key)
    data[off + 100] ^= 0xFF  # a record byte of block 0
    put(s3env, key, data)
    with packer_reader.open(url) as ds:
        first = ds.shards[2].first
        with pytest.raises(packer_reader.CorruptionError) as e:
            ds[first]
        assert "s3://train/" + key in str(e.value)
        with pytest.raises(packer_reader.CorruptionError):
            for _ in ds.batches(64):
                pass
    # with a cache_dir the whole object is fetched and its SHA-256 checked against the manifest
    with pytest.raises(packer_reader.FormatError) as e:
        packer_reader.open(url, cache_dir=os.path.join(os.environ.get("TMPDIR", "/tmp"), "pys3-never-%d" % os.getpid()))
    assert "s3://train/" + key in str(e.value) and "SHA-256" in str(e.value)
    from packer_reader.__main__ import main
    assert main(["verify", url]) == 3


def test_object_size_differs_from_manifest(s3env, datasets):
    url = copy_prefix(s3env, "sets/shards", "replaced/size")
    key = "replaced/size/shard-00001.pks"
    put(s3env, key, get(s3env, key) + bytes(4096))
    with pytest.raises(packer_reader.FormatError) as e:
        packer_reader.open(url)
    assert "s3://train/" + key in str(e.value) and "manifest says" in str(e.value)


def test_damaged_manifest_and_npy(s3env, datasets):
    url = copy_prefix(s3env, "sets/npy", "damaged/npy")
    m = get(s3env, "damaged/npy/manifest.json")
    put(s3env, "damaged/npy/manifest.json", m.replace(b'"count": 700', b'"count": 699'))
    with pytest.raises(packer_reader.FormatError) as e:
        packer_reader.open(url)
    assert "s3://train/damaged/npy/manifest.json" in str(e.value) and "checksum" in str(e.value)
    put(s3env, "damaged/npy/manifest.json", m)
    data = get(s3env, "damaged/npy/images.npy")
    data[-1] ^= 1
    put(s3env, "damaged/npy/images.npy", data)
    from packer_reader.__main__ import main
    assert main(["verify", url]) == 3  # npy has no block CRCs: the SHA-256 finds it


def test_wrong_credentials(s3env, datasets, monkeypatch):
    bad = "wrong-secret-5b1d0c9e77"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", bad)
    with pytest.raises(packer_reader.AccessError) as e:
        packer_reader.open(datasets["shards"][1])
    msg = str(e.value)
    assert "bucket train" in msg and "AWS_SECRET_ACCESS_KEY" in msg, msg
    assert bad not in msg and SECRET not in msg
    from packer_reader.__main__ import main
    assert main(["verify", datasets["shards"][1]]) == 1
    assert main(["inspect", datasets["shards"][1]]) == 1
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "no-such-key")
    with pytest.raises(packer_reader.AccessError) as e:
        packer_reader.open(datasets["npy"][1])
    assert bad not in str(e.value) and "bucket train" in str(e.value)


def test_missing_dataset_and_bad_urls(s3env):
    with pytest.raises(packer_reader.FormatError) as e:
        packer_reader.open("s3://train/no/such/prefix")
    assert "s3://train/no/such/prefix/manifest.json" in str(e.value)
    with pytest.raises(packer_reader.S3Error) as e:
        packer_reader.open("s3://no-such-bucket/x")
    assert "no-such-bucket" in str(e.value)
    for bad in ("s3://Bad_Bucket/x", "s3://train/a/../b", "s3://train//x"):
        with pytest.raises(packer_reader.PackerError):
            packer_reader.open(bad)


def test_endpoint_from_aws_endpoint_url_s3(s3env, datasets, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3env.endpoint)
    with packer_reader.open(datasets["npy"][1]) as ds:
        assert len(ds) == 700


def test_cache_dir(s3env, datasets, tmp_path, monkeypatch):
    """Later epochs and opens read the local copies; a copy of another version is never used."""
    url = copy_prefix(s3env, "sets/shards", "cached/a")
    local = datasets["shards"][0]
    cache = str(tmp_path / "cache")
    monkeypatch.setenv("PACKER_CACHE_DIR", cache)  # the variable, as a training job would set it
    with packer_reader.open(local) as a:
        want = [batches(a, batch_size=64, shuffle=True, seed=5, epoch=e) for e in (0, 1)]
    ds = packer_reader.open(url)
    assert_same(batches(ds, batch_size=64, shuffle=True, seed=5, epoch=0), want[0])
    # every object replaced in the bucket (other bytes, same size): reads from the bucket would
    # fail (If-Match) or give other bytes; epoch 1 comes from the local copies
    c = s3env.client()
    keys = [o["Key"] for o in c.list_objects_v2(Bucket="train", Prefix="cached/a/shard-")["Contents"]]
    originals = {k: get(s3env, k) for k in keys}
    for k in keys:
        d = bytearray(originals[k])
        d[4096:4096 + 3072] = bytes(3072)  # the first record of each shard zeroed
        put(s3env, k, d)
    gets = ds._store.gets
    assert_same(batches(ds, batch_size=64, shuffle=True, seed=5, epoch=1), want[1])
    assert ds._store.gets == gets
    ds.close()
    # reopened: the objects have new ETags, so the old copies are not used: the new (damaged)
    # bytes are fetched and refused by their SHA-256
    with pytest.raises(packer_reader.FormatError) as e:
        packer_reader.open(url)
    assert "SHA-256" in str(e.value)
    # the original bytes put back (new ETags again): fetched again, equal to the local read
    for k in keys:
        put(s3env, k, originals[k])
    with packer_reader.open(url) as ds:
        gets = ds._store.gets
        # versitygw's ETag is the MD5 of the bytes: the originals have their first ETags again,
        # whose copies are still there, except shard 0's, removed when its damaged version was
        # fetched (the open stopped there): fetched again
        assert gets == 2, gets
        assert_same(batches(ds, batch_size=64, shuffle=True, seed=5, epoch=1), want[1])
        assert ds._store.gets == gets
    with packer_reader.open(url) as ds:  # a third open: only the manifest is fetched
        assert ds._store.gets == 1
    n = sum(len(fs) for _, _, fs in os.walk(cache))
    assert n == len(keys), "one copy per object, stale ones removed"


def test_force_replace_generation_prefix(s3env, packer, cifar, tmp_path):
    """A dataset replaced with build --force: the manifest names .packer-gen-<hex>/ files."""
    for fmt in ("shards", "npy"):
        url = "s3://train/replace/" + fmt
        run_packer(packer, s3env, "build", cifar[0], "-o", url, *BUILD_ARGS[fmt])
        with packer_reader.open(url) as ds:
            assert len(ds) == 700
        run_packer(packer, s3env, "build", cifar[1], "-o", url, "--force", *BUILD_ARGS[fmt])
        local = str(tmp_path / ("local-" + fmt))
        run_packer(packer, s3env, "build", cifar[1], "-o", local, *BUILD_ARGS[fmt])
        m = packer_reader.load_manifest(url)
        paths = [fe["path"] for fe in m["files"]]
        assert paths and all(p.startswith(".packer-gen-") and p.count("/") == 1 for p in paths), paths
        assert_reads_equal(local, url)
        assert_reads_equal(local, url, cache_dir=str(tmp_path / ("cache-" + fmt)))
        # the same files in a local folder (as a download keeps them) read as the local build
        copy = tmp_path / ("copy-" + fmt)
        c = s3env.client()
        for o in c.list_objects_v2(Bucket="train", Prefix="replace/%s/" % fmt)["Contents"]:
            rel = o["Key"][len("replace/%s/" % fmt):]
            p = copy / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(get(s3env, o["Key"]))
        assert_reads_equal(local, str(copy))
        assert packer_reader.verify(str(copy)).ok


def test_missing_boto3_message(monkeypatch):
    import builtins
    real = builtins.__import__

    def fake(name, *a, **kw):
        if name == "boto3" or name.startswith("botocore"):
            raise ImportError("No module named %r" % name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(packer_reader.PackerError) as e:
        packer_reader.open("s3://train/x")
    assert "python3-boto3" in str(e.value) and 'packer_reader[s3]' in str(e.value)


def test_hdf5_needs_cache_dir(s3env, packer, cifar, tmp_path):
    pytest.importorskip("h5py", reason="h5py not installed")
    url = "s3://train/sets/hdf5"
    local = str(tmp_path / "local")
    for out in (local, url):
        run_packer(packer, s3env, "build", cifar[1], "-o", out, "--from", "cifar10", "--format", "hdf5")
    with pytest.raises(packer_reader.PackerError) as e:
        packer_reader.open(url)
    assert url in str(e.value) and "cache_dir" in str(e.value)
    assert_reads_equal(local, url, cache_dir=str(tmp_path / "cache"))


@pytest.mark.parametrize("env,value,code", [("AWS_ACCESS_KEY_ID", "no-such-access-key", "UserNotFound"),
                                            ("AWS_SECRET_ACCESS_KEY", "wrong-secret-8d2f6a0c4e", "SignatureDoesNotMatch")])
def test_refused_credentials_of_an_existing_dataset(s3env, datasets, monkeypatch, env, value, code):
    """An unknown access key id (the test server answers 404 with an access code) and a wrong
    secret key, for a dataset that exists, are access errors at every request, the HEAD of an
    object too (whose response has no body, so no code): never "no such object"."""
    url = datasets["shards"][1]
    good = _s3.S3Store(url)
    shard = next(n for n in good.list() if n.endswith(".pks"))
    obj = good.head(shard)
    monkeypatch.setenv(env, value)
    bad = _s3.S3Store(url)
    calls = {"open": lambda: packer_reader.open(url), "head": lambda: bad.head(shard),
             "get_small": lambda: bad.get_small("manifest.json", 1 << 20), "list": bad.list,
             "range": lambda: bad._get_range(_s3.S3Object(bad, obj.key, obj.size, obj.etag), 0, 16)}
    for what, call in calls.items():
        with pytest.raises(packer_reader.PackerError) as e:
            call()
        assert isinstance(e.value, packer_reader.AccessError), (what, repr(e.value))
        msg = str(e.value)
        assert "bucket train" in msg and code in msg and "no such object" not in msg, (what, msg)
        assert value not in msg or env == "AWS_ACCESS_KEY_ID", (what, msg)
    good.close()
    bad.close()


def test_missing_object_and_bucket(s3env, datasets):
    """HEAD requests, whose refusals carry no code, tell a missing object from a missing
    bucket. (A wrong region needs no test here: botocore re-signs for the region the store
    names.)"""
    url = datasets["shards"][1]
    store = _s3.S3Store(url)
    with pytest.raises(packer_reader.FormatError) as e:
        store.head("no-such-object.pks")
    assert "no such object" in str(e.value)
    nob = _s3.S3Store("s3://no-such-bucket/x")
    with pytest.raises(packer_reader.S3Error) as e:
        nob.head("shard-00000.pks")
    assert not isinstance(e.value, packer_reader.FormatError) and "no such bucket" in str(e.value), repr(e.value)
    for s in (store, nob):
        s.close()


_STALL_VERIFY = r"""
import sys, time
from packer_reader import _s3
real = _s3.S3Store.download
def download(self, obj, path, sync=True):
    real(self, obj, path, sync)
    print(path, flush=True)
    time.sleep(3600)  # stalled after its first object, until killed
_s3.S3Store.download = download
from packer_reader.__main__ import main
main(["verify", sys.argv[1]])
"""


def _stalled_verify(url, tmp):
    """A child `python3 -m packer_reader verify URL` with TMPDIR=tmp, returned once it has
    copied its first object into its temporary folder (and stalls there)."""
    env = dict(os.environ, TMPDIR=tmp, PYTHONPATH=os.path.join(REPO, "python"))
    p = subprocess.Popen([sys.executable, "-c", _STALL_VERIFY, url], stdout=subprocess.PIPE, env=env,
                         preexec_fn=_die_with_parent)
    line = p.stdout.readline().decode().strip()
    assert line.startswith(tmp), line
    return p, os.path.relpath(line, tmp).split(os.sep)[0]


def test_verify_copy_of_a_killed_verify(s3env, datasets, tmp_path, monkeypatch):
    """verify of a bucket copies the dataset into a folder under $TMPDIR: a verify SIGKILLed
    mid-copy leaves it; the next verify removes it, and never the folder of a verify still
    running."""
    import tempfile
    tmp = str(tmp_path / "tmpdir")
    os.makedirs(tmp)
    url = datasets["shards"][1]
    live, live_dir = _stalled_verify(url, tmp)
    try:
        killed, killed_dir = _stalled_verify(url, tmp)
        killed.kill()
        killed.wait()
        assert sorted(os.listdir(tmp)) == sorted([live_dir, killed_dir])
        live_files = sorted(os.listdir(os.path.join(tmp, live_dir)))
        monkeypatch.setenv("TMPDIR", tmp)
        monkeypatch.setattr(tempfile, "tempdir", tmp)
        rep = packer_reader.verify(url)
        assert rep.ok and not rep.faults, rep.faults
        assert os.listdir(tmp) == [live_dir]
        assert sorted(os.listdir(os.path.join(tmp, live_dir))) == live_files
    finally:
        live.kill()
        live.wait()


def test_cache_dir_leaves_live_downloads(s3env, datasets, tmp_path):
    """cache_dir, shared by several processes (the ranks of a node): the next fetch removes
    a download abandoned by a killed process (its temporary file's lock is free) and never
    one that another process is writing now (its lock is held)."""
    import fcntl
    url = datasets["shards"][1]
    store = _s3.S3Store(url, cache_dir=str(tmp_path / "cache"))
    shard = next(n for n in store.list() if n.endswith(".pks"))
    obj = store.head(shard)
    folder = os.path.dirname(store.local_copy(obj))
    live, dead = os.path.join(folder, ".tmp-1-live"), os.path.join(folder, ".tmp-2-dead")
    for p in (live, dead):
        with open(p, "wb") as f:
            f.write(b"part of an object")
    held = os.open(live, os.O_RDWR)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as the other process's download holds it
        store.local_copy(obj)
        assert os.path.exists(live), "a download in progress in another process was removed"
        assert not os.path.exists(dead), "an abandoned download was left"
    finally:
        os.close(held)
        store.close()


def test_order2_shuffle_of_a_dataset_larger_than_the_chunk_cache(s3env, packer, tmp_path, monkeypatch):
    """Reading order 2 draws each batch's records from the whole dataset. Through the chunk
    cache, a dataset larger than the cache cost 34 times its bytes in GETs per shuffled epoch
    here (a 4 MiB chunk and read-ahead per record; 187 times for 61 MB through an 8 MiB cache,
    where order 1 with a shuffle buffer scaled as the cache cost 14). Such batches are read with
    exact ranged GETs instead (a checksum block
    whole, once, where the CRC is still to be checked): the first epoch costs at most about two
    passes of GETs, later ones about one, and the bytes are the local read's."""
    from packer_reader import _s3

    src = tmp_path / "a.bin"
    write_cifar(str(src), 4000, seed=3)
    local, url = str(tmp_path / "local"), "s3://train/big-shuffle"
    for out in (local, url):
        run_packer(packer, s3env, "build", str(src), "-o", out, "--from", "cifar10", "--format", "shards")
    monkeypatch.setattr(_s3, "CACHE_BYTES", 2 << 20)  # the dataset (12 MB) is about 6 times the cache
    got = {"bytes": 0}
    orig = _s3.S3Store._get_range

    def counting(self, obj, a, b):
        got["bytes"] += b - a
        return orig(self, obj, a, b)

    monkeypatch.setattr(_s3.S3Store, "_get_range", counting)
    with packer_reader.open(local) as ref, packer_reader.open(url) as ds:
        for epoch in (0, 1):
            got["bytes"] = 0
            n = 0
            for (x, y), (xr, yr) in zip(ds.batches(256, shuffle=True, seed=1, epoch=epoch),
                                        ref.batches(256, shuffle=True, seed=1, epoch=epoch)):
                assert np.array_equal(x, xr) and np.array_equal(y, yr)
                n += x.nbytes
            assert n == ds.count * ds.record_size
            limit = 2.2 if epoch == 0 else 1.2
            assert got["bytes"] <= limit * n, (epoch, got["bytes"] / n)


class BodyFaultProxy:
    """An HTTP proxy between the reader and the test server that forwards every request and,
    for a ranged GET as ``mode`` says, sends the answer's headers and half its body, then stalls
    (holds the connection for ``hold`` seconds) or cuts the connection. mode "first": the first
    answer to one in four (path, range), alternately stalled and cut; "always": every ranged GET
    stalled."""

    def __init__(self, endpoint, mode, hold=2.0):
        import http.server
        import threading
        import urllib.parse
        target = urllib.parse.urlparse(endpoint)
        proxy = self
        self.mode, self.hold, self.seen, self.faults = mode, hold, {}, {"stall": 0, "cut": 0}
        self.lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _forward(self):
                import http.client
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
                conn.request(self.command, self.path, body=body, headers=dict(self.headers))
                resp = conn.getresponse()
                data = resp.read()
                fault = None
                rng = self.headers.get("Range")
                if self.command == "GET" and rng and resp.status == 206:
                    with proxy.lock:
                        k = (self.path, rng)
                        n = proxy.seen.get(k, 0)
                        proxy.seen[k] = n + 1
                        if proxy.mode == "always":
                            fault = "stall"
                        elif n == 0 and len(proxy.seen) % 4 == 1:
                            fault = ("stall", "cut")[sum(proxy.faults.values()) % 2]
                        if fault:
                            proxy.faults[fault] += 1
                self.send_response(resp.status)
                for h, v in resp.getheaders():
                    if h.lower() not in ("transfer-encoding", "connection"):
                        self.send_header(h, v)
                self.end_headers()
                if fault is None:
                    self.wfile.write(data)
                    return
                self.wfile.write(data[:len(data) // 2])
                self.wfile.flush()
                if fault == "stall":
                    time.sleep(proxy.hold)
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

            do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _forward

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.endpoint = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_body_faults_retried(s3env, datasets, monkeypatch):
    """Through a proxy that stalls (longer than PACKER_S3_STALL_TIMEOUT) or cuts halfway the
    body of the first answer to one in four ranged GETs, reads from the bucket equal the local ones;
    with every ranged GET stalled, a read fails after the bounded tries, saying how many."""
    local, url = datasets["shards"]
    px = BodyFaultProxy(s3env.endpoint, "first", hold=1.0)
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", px.endpoint)
        monkeypatch.setenv("PACKER_S3_STALL_TIMEOUT", "300ms")
        with packer_reader.open(local) as a, packer_reader.open(url) as b:
            assert np.array_equal(a[0:len(a)][0], b[0:len(b)][0])
        assert px.faults["stall"] > 0 and px.faults["cut"] > 0, px.faults
        px.mode = "always"
        with pytest.raises(packer_reader.PackerError, match="gave up after 5 attempts"):
            with packer_reader.open(url) as b:
                b[len(b) - 1]
    finally:
        px.close()
