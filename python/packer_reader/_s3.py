"""Datasets in an S3 bucket (``s3://bucket/prefix``), read with ranged GETs through boto3.

Every object is opened with a HEAD (its size is checked against the manifest, its ETag noted),
and every ranged GET carries ``If-Match`` on that ETag: an object replaced while a dataset is
open fails the read with an error naming it, so bytes of two versions are never mixed. Reads go
through a cache of fixed-size chunks (CHUNK bytes, fetched by a pool of threads, adjacent
missing chunks coalesced into one GET, the next chunks read ahead), so a shuffled batch of small
records costs a few large GETs, not one per record. With ``cache_dir`` every object is instead
fetched whole once, into a file named by its ETag, and read like a local file afterwards.
"""

import hashlib
import os
import random
import re
import threading
import time
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

from ._errors import FormatError, PackerError

SCHEME = "s3://"
CHUNK = 4 << 20           # bytes per cached chunk
GET_CHUNKS = 2            # at most this many adjacent chunks per GET (8 MiB)
READAHEAD = 4             # chunks fetched ahead of a miss (a stream read in order)
CACHE_BYTES = 256 << 20   # chunk cache of one open dataset
THREADS = 8               # GETs in flight
DOWNLOAD_PART = 8 << 20   # ranged GET size of whole-object downloads (cache_dir)
ATTEMPTS = 5              # tries of one request (botocore's), and of the read of one GET's body (ours)
STALL_TIMEOUT = 60.0      # seconds a connection may make no progress (PACKER_S3_STALL_TIMEOUT)

INSTALL_HINT = 'apt install python3-boto3, or pip install "packer_reader[s3]"'
SETTINGS_HINT = ("check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (or AWS_PROFILE and the "
                 "shared credentials file), AWS_REGION, and AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_S3")

# error codes of refused credentials or access, whatever the status (the code decides)
_ACCESS_CODES = frozenset(("AccessDenied", "AllAccessDisabled", "AccountProblem", "ExpiredToken", "InvalidAccessKeyId",
                           "InvalidClientTokenId", "InvalidSecurity", "InvalidToken", "SignatureDoesNotMatch",
                           "TokenRefreshRequired", "UnrecognizedClientException"))
# error codes of a request sent to, or signed for, another region than the bucket's
_REGION_CODES = frozenset(("AuthorizationHeaderMalformed", "IllegalLocationConstraintException", "PermanentRedirect"))

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class S3Error(PackerError):
    """An object store request failed: access refused, a missing bucket, an object replaced
    while the dataset was open, a network error. ``url`` names the bucket or object (it is
    None when the error was re-raised from its message alone). The message never holds a
    credential."""

    def __init__(self, message, url=None):
        PackerError.__init__(self, message)
        self.url = url


class AccessError(S3Error):
    """The store refused the credentials or the access (HTTP 403, unknown key, bad signature)."""


def _lock(fd):
    """Lock (flock) the file being downloaded, for as long as fd is open: the lock goes with
    the process however it ends, so a download abandoned by a killed process is told from one
    in progress in another (the ranks of a node share a cache_dir). True if locked."""
    try:
        import fcntl
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except (ImportError, OSError):
        return False


def _remove_abandoned(path):
    """Remove the temporary file of a download whose process is gone: one whose lock can be
    taken. An empty one may be a download whose process has not locked it yet: left."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    try:
        if os.fstat(fd).st_size > 0 and _lock(fd):
            os.remove(path)
    except OSError:
        pass
    finally:
        os.close(fd)


def is_url(path):
    return isinstance(path, str) and path.startswith(SCHEME)


def parse_url(url):
    """(bucket, prefix) of s3://bucket/prefix: a valid bucket name, a prefix of slash-separated
    names without '.', '..' or empty elements (a trailing slash is dropped)."""
    rest = url[len(SCHEME):]
    if "?" in rest or "#" in rest:
        raise PackerError("%s: query strings and fragments are not part of an s3:// location" % url)
    bucket, _, prefix = rest.partition("/")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise PackerError("%s: %r is not a valid bucket name" % (url, bucket))
    prefix = prefix[:-1] if prefix.endswith("/") else prefix
    if prefix and any(p in ("", ".", "..") for p in prefix.split("/")):
        raise PackerError("%s: the prefix must be slash-separated names without '.', '..' or empty elements" % url)
    return bucket, prefix


def _boto():
    try:
        import boto3
        import botocore.config
        import botocore.exceptions
    except ImportError:
        raise PackerError("reading s3:// datasets needs boto3: " + INSTALL_HINT) from None
    return boto3, botocore


def stall_timeout():
    """The seconds a read on a connection to the store may wait for a byte before it is cut
    and retried: PACKER_S3_STALL_TIMEOUT as the Go commands read it (a duration such as 60s,
    300ms, 1m30s), else STALL_TIMEOUT."""
    v = os.environ.get("PACKER_S3_STALL_TIMEOUT", "").strip()
    if not v:
        return STALL_TIMEOUT
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", v)
    if not parts or "".join(a + u for a, u in parts) != v or sum(float(a) * units[u] for a, u in parts) <= 0:
        raise PackerError("PACKER_S3_STALL_TIMEOUT: want a positive duration such as 60s, got %r" % v)
    return sum(float(a) * units[u] for a, u in parts)


def _backoff(attempt):
    """Sleep before try attempt+1: a random time between half and all of 0.2 s * 2^(attempt-1),
    at most 5 s (the Go commands' backoff)."""
    d = min(0.2 * (1 << (attempt - 1)), 5.0)
    time.sleep(d / 2 + random.random() * d / 2)


def _transient_body(e):
    """Whether e, from reading a response body, is worth asking again: the connection cut,
    stalled (the read timeout) or the body shorter than announced."""
    _, botocore = _boto()
    ex = botocore.exceptions
    kinds = tuple(getattr(ex, n) for n in ("ReadTimeoutError", "IncompleteReadError", "ResponseStreamingError",
                                           "ConnectionClosedError") if hasattr(ex, n))
    return isinstance(e, kinds) or isinstance(e, (ConnectionError, TimeoutError))


def make_client():
    """An S3 client from the standard AWS chain (environment, profiles, shared files), with
    path-style addressing, AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL honoured also by botocore
    versions that predate them, and checksums only where S3 requires them where botocore
    supports that setting. Returns (client, secrets): the strings no message may contain."""
    boto3, botocore = _boto()
    session = boto3.session.Session()
    region = session.region_name or "us-east-1"
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None
    kw = dict(s3={"addressing_style": "path"}, max_pool_connections=2 * THREADS + 4,
              retries={"max_attempts": ATTEMPTS, "mode": "standard"}, connect_timeout=10, read_timeout=stall_timeout())
    try:
        cfg = botocore.config.Config(request_checksum_calculation="when_required",
                                     response_checksum_validation="when_required", **kw)
    except TypeError:  # botocore < 1.36 has no such setting and sends no checksum trailers anyway
        cfg = botocore.config.Config(**kw)
    client = session.client("s3", region_name=region, endpoint_url=endpoint, config=cfg)
    secrets = []
    try:
        creds = session.get_credentials()
        if creds is not None:
            fc = creds.get_frozen_credentials()
            secrets = [s for s in (fc.secret_key, fc.token) if s]
    except Exception:  # resolving credentials fails later, with the request's own error
        pass
    return client, secrets


class S3Object:
    """One object as opened: key, size and ETag (every read is pinned to that ETag)."""

    def __init__(self, store, key, size, etag):
        self.store = store
        self.key = key
        self.size = size
        self.etag = etag
        self.url = "%s%s/%s" % (SCHEME, store.bucket, key)

    # the _io protocol: what a file descriptor does for a local file
    def pread_into(self, mv, offset, path=None):
        self.store.read_into(self, mv, offset)
        return len(mv)

    def preadv_into(self, bufs, offset, path=None):
        self.store.prefetch(self, [(offset, sum(len(b) for b in bufs))])
        for b in bufs:
            self.store.read_into(self, b, offset)
            offset += len(b)
        return offset

    def prefetch(self, spans):
        self.store.prefetch(self, spans)


class S3Store:
    """The objects below one prefix of a bucket, with one client, one thread pool and one chunk
    cache shared by every object of the dataset."""

    def __init__(self, url, cache_dir=None):
        self.bucket, self.prefix = parse_url(url)
        self.url = url.rstrip("/")
        self.client, self._secrets = make_client()
        self.endpoint = getattr(self.client.meta, "endpoint_url", "")
        self.cache_dir = os.path.abspath(cache_dir) if cache_dir else None
        self._lock = threading.RLock()  # _submit (lock held) starts the pool
        self._chunks = OrderedDict()   # (key, etag, index) -> memoryview
        self._cached = 0
        self._inflight = {}            # (key, etag, index) -> Future
        self._pool = None
        self.gets = 0                  # GET requests sent (tests, benchmarks)
        self.chunk = CHUNK

    # -- names and errors --------------------------------------------------------------------
    def key(self, rel):
        return rel if not self.prefix else self.prefix + "/" + rel

    def object_url(self, rel):
        return "%s%s/%s" % (SCHEME, self.bucket, self.key(rel))

    def _scrub(self, text):
        for s in self._secrets:
            text = text.replace(s, "<redacted>")
        return text

    def _error(self, e, op, key):
        """An S3Error (or FormatError for a missing object) for botocore exception e."""
        _, botocore = _boto()
        url = "%s%s/%s" % (SCHEME, self.bucket, key) if key is not None else "%s%s" % (SCHEME, self.bucket)
        if isinstance(e, botocore.exceptions.NoCredentialsError):
            return AccessError("%s %s: no AWS credentials found for bucket %s: %s"
                               % (op, url, self.bucket, SETTINGS_HINT), url)
        if isinstance(e, botocore.exceptions.ClientError):
            err = e.response.get("Error") or {}
            code = str(err.get("Code") or "")
            status = (e.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            msg = self._scrub(str(err.get("Message") or ""))
            what = " ".join(x for x in (code, msg) if x) or "HTTP %s" % status
            # The code decides, the status only where no code came (a HEAD's response has no
            # body: head asks again with a GET). versitygw answers an unknown key id with 404
            # XAdminUserNotFound: a 404 is not always a missing object.
            generic = code in ("", str(status), "NotFound", "Forbidden", "BadRequest", "MovedPermanently")
            if code == "NoSuchBucket":
                return S3Error("%s %s: no such bucket %s (%s)" % (op, url, self.bucket, self.endpoint), url)
            if code == "NoSuchKey" or status == 404 and generic:
                return FormatError(url, "no such object")
            if code == "PreconditionFailed" or status == 412 and generic:
                return S3Error("%s: the object was replaced or changed since the dataset was opened (its ETag "
                               "is no longer %s); reopen the dataset" % (url, self._etag_of(key)), url)
            if code == "RequestTimeTooSkewed":
                return S3Error("%s %s: the store refused the request because this machine's clock differs from "
                               "the store's by too much (%s); set the clock" % (op, url, what), url)
            if code in _ACCESS_CODES or code.endswith("UserNotFound") or status == 403 and generic:
                return AccessError("%s %s: access to bucket %s refused (%s): %s"
                                   % (op, url, self.bucket, what, SETTINGS_HINT), url)
            if code in _REGION_CODES or status == 301 and generic:
                hdrs = (e.response.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
                where = hdrs.get("x-amz-bucket-region") or (e.response.get("Error") or {}).get("Region")
                return S3Error("%s %s: bucket %s is in %s, not the region the requests are signed for (%s): set "
                               "AWS_REGION (or the profile's region) to the bucket's region"
                               % (op, url, self.bucket, "region %s" % where if where else "another region", what), url)
            if code == "SlowDown" or status == 503:
                return S3Error("%s %s: the store is overloaded and asked to slow down, and the retries ran out (%s)"
                               % (op, url, what), url)
            return S3Error("%s %s: %s" % (op, url, what), url)
        return S3Error("%s %s: %s" % (op, url, self._scrub(str(e))), url)

    def _etag_of(self, key):
        return getattr(self, "_etags", {}).get(key, "?")

    # -- requests ------------------------------------------------------------------------------
    def head(self, rel, want_size=None):
        """Open object rel: HEAD it, check its size against want_size (the manifest's)."""
        key = self.key(rel)
        _, botocore = _boto()
        try:
            r = self.client.head_object(Bucket=self.bucket, Key=key)
        except botocore.exceptions.ClientError as e:
            r = self._head_refused(e, key)
        except botocore.exceptions.BotoCoreError as e:
            raise self._error(e, "HEAD", key) from None
        obj = S3Object(self, key, int(r["ContentLength"]), r.get("ETag") or "")
        if not obj.etag:
            raise S3Error("%s: the store gave no ETag, so reads cannot be pinned to one version" % obj.url, obj.url)
        with self._lock:
            if not hasattr(self, "_etags"):
                self._etags = {}
            self._etags[key] = obj.etag
        if want_size is not None and obj.size != want_size:
            raise FormatError(obj.url, "object is %d bytes, the manifest says %d" % (obj.size, want_size))
        return obj

    def _head_refused(self, e, key):
        """A HEAD's refusal carries no error code (its response has no body): its 404 may be a
        missing object, a missing bucket or an unknown access key id, its 400 or 403 says no
        more. Ask again with a one-byte ranged GET, whose refusal carries the code, and raise
        that; if the GET succeeds (the object appeared meanwhile, or is empty), HEAD again."""
        _, botocore = _boto()
        status = (e.response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0
        if not 300 <= status < 500:
            raise self._error(e, "HEAD", key) from None
        try:
            self.client.get_object(Bucket=self.bucket, Key=key, Range="bytes=0-0")["Body"].close()
        except botocore.exceptions.ClientError as g:
            if str((g.response.get("Error") or {}).get("Code") or "") != "InvalidRange":
                raise self._error(g, "HEAD", key) from None
        except botocore.exceptions.BotoCoreError:
            raise self._error(e, "HEAD", key) from None
        try:
            return self.client.head_object(Bucket=self.bucket, Key=key)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as again:
            raise self._error(again, "HEAD", key) from None

    def get_small(self, rel, limit):
        """The whole of a small object (the manifest), in one unconditional GET."""
        key = self.key(rel)
        _, botocore = _boto()
        try:
            r = self.client.get_object(Bucket=self.bucket, Key=key)
            self.gets += 1
            size = int(r["ContentLength"])
            if size > limit:
                r["Body"].close()
                raise FormatError(self.object_url(rel), "object larger than %d bytes" % limit)
            data = r["Body"].read()
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
            raise self._error(e, "GET", key) from None
        if len(data) != size:
            raise S3Error("GET %s: %d bytes received, %d expected" % (self.object_url(rel), len(data), size))
        return data

    def _get_range(self, obj, a, b):
        """Bytes [a, b) of obj, pinned to its ETag. The request is botocore's, retried by it
        (5xx, SlowDown, resets, a stalled answer); a body cut short, stalled (no byte for the
        stall timeout) or shorter than asked for is asked for again here, ATTEMPTS tries in all,
        and the error after the last says how many."""
        _, botocore = _boto()
        for attempt in range(1, ATTEMPTS + 1):
            try:
                r = self.client.get_object(Bucket=self.bucket, Key=obj.key, IfMatch=obj.etag,
                                           Range="bytes=%d-%d" % (a, b - 1))
                self.gets += 1
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
                raise self._error(e, "GET", obj.key) from None
            etag = r.get("ETag")
            if etag and etag != obj.etag:  # a store that ignores If-Match
                r["Body"].close()
                raise S3Error("%s: the object was replaced since the dataset was opened (ETag %s, opened as %s); "
                              "reopen the dataset" % (obj.url, etag, obj.etag), obj.url)
            try:
                data = r["Body"].read()
                why = None if len(data) == b - a else "%d bytes received, %d expected" % (len(data), b - a)
            except Exception as e:  # noqa: BLE001 -- sorted out by _transient_body
                if not _transient_body(e):
                    raise self._error(e, "GET", obj.key) from None
                why = self._scrub(str(e))
            if why is None:
                return data
            if attempt < ATTEMPTS:
                _backoff(attempt)
        raise S3Error("GET %s bytes %d-%d: %s; gave up after %d attempts" % (obj.url, a, b - 1, why, ATTEMPTS), obj.url)

    def _executor(self):
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(THREADS, thread_name_prefix="packer_reader-s3")
        return self._pool

    # -- the chunk cache -----------------------------------------------------------------------
    def _fetch(self, obj, first, count):
        """Worker: chunks [first, first+count) of obj in one GET, stored in the cache."""
        keys = [(obj.key, obj.etag, i) for i in range(first, first + count)]
        try:
            a = first * self.chunk
            b = min(obj.size, (first + count) * self.chunk)
            data = memoryview(self._get_range(obj, a, b))
            got = {i: data[(i - first) * self.chunk:(i - first + 1) * self.chunk] for i in range(first, first + count)}
        except BaseException:
            with self._lock:
                for k in keys:
                    self._inflight.pop(k, None)
            raise
        with self._lock:
            for k in keys:
                self._inflight.pop(k, None)
                if k not in self._chunks:
                    self._chunks[k] = got[k[2]]
                    self._cached += len(got[k[2]])
            while self._cached > CACHE_BYTES and len(self._chunks) > 1:
                _, v = self._chunks.popitem(last=False)
                self._cached -= len(v)
        return got

    def _submit(self, obj, indices):
        """Start fetches of the chunks in indices (sorted) neither cached nor in flight, adjacent
        ones together. Called with the lock held. Returns {index: Future or memoryview}."""
        out = {}
        run = []

        def flush():
            if run:
                fut = self._executor().submit(self._fetch, obj, run[0], len(run))
                for i in run:
                    self._inflight[(obj.key, obj.etag, i)] = fut
                    out[i] = fut
                del run[:]

        for i in indices:
            k = (obj.key, obj.etag, i)
            v = self._chunks.get(k)
            if v is not None:
                self._chunks.move_to_end(k)
                out[i] = v
                continue
            f = self._inflight.get(k)
            if f is not None:
                out[i] = f
                continue
            if run and (run[-1] != i - 1 or len(run) >= GET_CHUNKS):
                flush()
            run.append(i)
        flush()
        return out

    def _nchunks(self, obj):
        return -(-obj.size // self.chunk)

    def prefetch(self, obj, spans):
        """Start fetching every chunk that the byte spans [(offset, length)] of obj touch."""
        idx = set()
        for off, ln in spans:
            if ln > 0:
                idx.update(range(off // self.chunk, (off + ln - 1) // self.chunk + 1))
        if idx:
            with self._lock:
                self._submit(obj, sorted(i for i in idx if i < self._nchunks(obj)))

    def read_into(self, obj, mv, offset):
        """Fill mv with bytes [offset, offset+len(mv)) of obj."""
        n = len(mv)
        if n == 0:
            return
        if offset < 0 or offset + n > obj.size:
            raise FormatError(obj.url, "object ends at %d, expected %d more bytes"
                              % (obj.size, offset + n - obj.size), min(offset, obj.size))
        c0, c1 = offset // self.chunk, (offset + n - 1) // self.chunk
        want = list(range(c0, c1 + 1))
        with self._lock:
            have = self._submit(obj, want)
            missed = any(not isinstance(have[i], memoryview) for i in want)
            if missed:  # a stream read in order: fetch what follows too
                self._submit(obj, list(range(c1 + 1, min(self._nchunks(obj), c1 + 1 + READAHEAD))))
        pos = 0
        for i in want:
            v = have[i]
            if not isinstance(v, memoryview):
                v = v.result()[i]
            a = max(offset, i * self.chunk) - i * self.chunk
            b = min(offset + n, (i + 1) * self.chunk) - i * self.chunk
            mv[pos:pos + b - a] = v[a:b]
            pos += b - a

    # -- whole objects (cache_dir) -----------------------------------------------------------------
    def local_copy(self, obj, sha256=None):
        """The path of a local copy of obj in cache_dir, fetched whole when absent. The copy is
        named by the object's ETag, so a copy of another version is never used (and is removed);
        a fresh copy's SHA-256 is checked against sha256 (the manifest's) before it is kept."""
        h = hashlib.sha256(("%s\n%s\n%s" % (self.endpoint, self.bucket, obj.key)).encode()).hexdigest()[:32]
        folder = os.path.join(self.cache_dir, h)
        name = "obj-" + hashlib.sha256(obj.etag.encode()).hexdigest()[:32]
        path = os.path.join(folder, name)
        os.makedirs(folder, exist_ok=True)
        for old in os.listdir(folder):  # other versions of this object, and abandoned downloads
            if old != name and old.startswith("obj-"):
                try:
                    os.remove(os.path.join(folder, old))
                except OSError:
                    pass
            elif old.startswith(".tmp-"):
                _remove_abandoned(os.path.join(folder, old))
        try:
            if os.stat(path).st_size == obj.size:
                return path
        except OSError:
            pass
        tmp = os.path.join(folder, ".tmp-%d-%s" % (os.getpid(), uuid.uuid4().hex))
        try:
            self.download(obj, tmp)
            if sha256:
                d = hashlib.sha256()
                with open(tmp, "rb") as f:
                    for block in iter(lambda: f.read(8 << 20), b""):
                        d.update(block)
                if d.hexdigest() != sha256:
                    raise FormatError(obj.url, "SHA-256 %s, the manifest says %s (the object in the bucket is "
                                      "damaged or of another build)" % (d.hexdigest(), sha256))
            os.replace(tmp, path)
        except BaseException:
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise
        return path

    def download(self, obj, path, sync=True):
        """Write the whole of obj to a new file at path: ranged GETs of DOWNLOAD_PART bytes,
        THREADS at a time, each pinned to the ETag."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            _lock(fd)  # held while it is written: _remove_abandoned leaves it to us
            parts = [(a, min(obj.size, a + DOWNLOAD_PART)) for a in range(0, obj.size, DOWNLOAD_PART)]

            def one(ab):
                data = self._get_range(obj, ab[0], ab[1])
                os.pwrite(fd, data, ab[0])

            for _ in self._executor().map(one, parts):
                pass
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def list(self):
        """The names (relative to the prefix) of every object below it."""
        _, botocore = _boto()
        base = self.prefix + "/" if self.prefix else ""
        names = []
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base):
                for o in page.get("Contents") or []:
                    if not o["Key"].endswith("/"):
                        names.append(o["Key"][len(base):])
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
            raise self._error(e, "LIST", base) from None
        return names

    def close(self):
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        with self._lock:
            self._chunks.clear()
            self._cached = 0
