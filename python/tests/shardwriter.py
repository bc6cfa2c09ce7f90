"""A small, test-only writer of packer datasets, written from shard/FORMAT.md and the manifest
fields of shard/manifest.go. It builds fixtures for the reader tests until (and beside) the Go
writer; it is deliberately simple and independent of the reader's code (own CRC-32C)."""

import hashlib
import json
import os
import struct

import numpy as np

ALIGN = 4096
BLOCK_TARGET = 1 << 20
FLAG_VAR_SIZE = 1
FLAG_META = 2
FLAG_SHAPES = 4  # format version 2: per-record values of the -1 dimensions
FLAG_FIELDS = 8  # format version 3: the meta's "fields" and the index part "fieldlens"
ITEMSIZE = {"uint8": 1, "float16": 2, "float32": 4}


def _crc_table():
    t = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        t.append(c)
    return t


_T = _crc_table()


def crc32c(data, crc=0):
    """Reference CRC-32C, byte at a time (fixtures are small)."""
    c = crc ^ 0xFFFFFFFF
    t = _T
    for b in bytes(data):
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def align(x):
    return x + (-x % ALIGN)


def canon(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _as_bytes(r):
    return r.tobytes() if isinstance(r, np.ndarray) else bytes(r)


def write_shard(path, records, labels, sample, aux_names=(), aux=None, metas=None, shard_index=0,
                block_records=None, var_size=None, extra_meta=None, shapes=None, version=None, fields=None,
                field_values=None, fieldlens=None):
    """Write one shard. records: list of bytes/ndarrays (or an [n, ...] array); labels: n ints;
    aux: [n, a] ints; metas: list of dicts/bytes (per-record metadata) or None.

    shapes: the full shape of every record (format version 2, FlagShapes): the values of the
    sample shape's -1 dimensions are stored in the index part "shapes" right after the offsets.
    shapes=True takes them from the records (ndarrays). version: the header's version (default:
    2 with shapes, else 1; tests pass others to check they are refused).

    fields: a schema (list of dicts, FORMAT.md "Fields") and field_values, per record the raw
    bytes of each field in schema order: a version-3 shard, each record's bytes its sample's
    followed by its fields', and the index part fieldlens after aux (fieldlens: other lengths to
    store, for hostile cases). FlagVarSize is set; FlagShapes when the sample shape has a -1."""
    if shapes is True:
        shapes = [r.shape for r in records]
    recs = [_as_bytes(r) for r in records]
    if fields is not None:
        var_size = True
        if fieldlens is None:
            fieldlens = [[len(v) for v in vals] for vals in field_values]
        recs = [r + b"".join(bytes(v) for v in vals) for r, vals in zip(recs, field_values)]
        if shapes is None and any(d < 0 for d in sample["shape"]):
            shapes = [r.shape for r in records]
    n = len(recs)
    sizes = [len(r) for r in recs]
    if var_size is None:
        var_size = any(d < 0 for d in sample["shape"])
    if not var_size:
        rs = ITEMSIZE[sample["dtype"]] * int(np.prod(sample["shape"]))
        assert all(s == rs for s in sizes), "fixed-size records must all be %d bytes" % rs
    else:
        rs = 0
    if block_records is None:
        block_records = max(1, BLOCK_TARGET // rs) if rs else 1
    k = block_records
    a = len(aux_names)
    flags = (FLAG_VAR_SIZE if var_size else 0) | (FLAG_META if metas is not None else 0)
    if shapes is not None:
        flags |= FLAG_SHAPES
    if fields is not None:
        flags |= FLAG_FIELDS
    if version is None:
        version = 3 if fields is not None else 2 if shapes is not None else 1
    var_dims = [k for k, d in enumerate(sample["shape"]) if d < 0]
    meta = {"sample": sample, "label": {"dtype": "int64", "aux": list(aux_names)},
            "shard": {"index": shard_index}, "block_records": k}
    if fields is not None:
        meta["fields"] = fields
    if extra_meta:
        meta.update(extra_meta)
    mj = canon(meta)
    fixed = b"PKSHARD\x00" + struct.pack("<HHI", version, flags, len(mj))
    hcrc = crc32c(mj, crc32c(fixed))
    header = fixed + struct.pack("<I", hcrc) + bytes(12) + mj
    data_offset = align(len(header))
    data = b"".join(recs)
    data_len = len(data)
    index_offset = align(data_offset + data_len)

    idx = bytearray()
    if var_size:
        off = [0]
        for s in sizes:
            off.append(off[-1] + s)
        idx += struct.pack("<%dQ" % (n + 1), *off)
    if shapes is not None:
        vals = [int(shp[k]) for shp in shapes for k in var_dims]
        idx += struct.pack("<%dI" % len(vals), *vals)
    idx += struct.pack("<%dq" % n, *[int(x) for x in labels])
    if a:
        flat = np.asarray(aux, dtype=np.int64).reshape(n, a)
        idx += flat.astype("<i8").tobytes()
    if fields is not None:
        idx += np.asarray(fieldlens, dtype="<u4").reshape(n, len(fields)).tobytes()
    if metas is not None:
        blobs = [m if isinstance(m, (bytes, bytearray)) else (canon(m) if m is not None else b"") for m in metas]
        moff = [0]
        for b in blobs:
            moff.append(moff[-1] + len(b))
        idx += struct.pack("<%dQ" % (n + 1), *moff)
        idx += b"".join(blobs)
    nb = -(-n // k)
    pos = 0
    crcs = []
    for j in range(nb):
        blen = sum(sizes[j * k:min((j + 1) * k, n)])
        crcs.append(crc32c(data[pos:pos + blen]))
        pos += blen
    idx += struct.pack("<%dI" % nb, *crcs)
    index_len = len(idx)
    file_size = align(index_offset + index_len + 64)
    foot = struct.pack("<QQQQQQII", n, rs, data_offset, data_len, index_offset, index_len, k, crc32c(idx))
    foot += struct.pack("<I", crc32c(foot)) + b"PKS1"
    out = bytearray(file_size)
    out[0:len(header)] = header
    out[data_offset:data_offset + data_len] = data
    out[index_offset:index_offset + index_len] = idx
    out[file_size - 64:] = foot
    with open(path, "wb") as f:
        f.write(out)
    return {"records": n, "block_records": k, "data_offset": data_offset, "index_offset": index_offset,
            "index_len": index_len, "size": file_size, "record_size": rs, "data_len": data_len}


def index_sha256(path):
    """The manifest's index_sha256 of the shard at path (shard/FORMAT.md, "Dataset"): the SHA-256
    of its index section, the index_len bytes at index_offset (both read from the footer)."""
    with open(path, "rb") as f:
        b = f.read()
    index_offset, index_len = struct.unpack_from("<QQ", b, len(b) - 64 + 32)
    return hashlib.sha256(b[index_offset:index_offset + index_len]).hexdigest()


def _file_entry(directory, rel, records=None, first=None):
    full = os.path.join(directory, rel)
    with open(full, "rb") as f:
        h = hashlib.sha256(f.read()).hexdigest()
    e = {"path": rel, "size": os.path.getsize(full), "sha256": h}
    if records:
        e["records"] = records
    if first:
        e["first_record"] = first
    return e


def _manifest(directory, fmt, n, classes, labels, sample, aux_names, files, format_version=1):
    labels = np.asarray(labels, dtype=np.int64)
    m = {
        "packer": "test-writer",
        "format": fmt,
        "format_version": format_version,
        "count": int(n),
        "classes": list(classes),
        "class_counts": np.bincount(labels[labels >= 0], minlength=len(classes)).tolist() if classes else [],
        "sample": sample,
        "label": {"dtype": "int64", "aux": list(aux_names)},
        "source": {"kind": "test"},
        "transform": {},
        "files": files,
        "skipped": [],
        "inputs": int(n),
    }
    write_manifest(os.path.join(directory, "manifest.json"), m)
    return m


def seal_manifest(body):
    """The manifest bytes with their own checksum as the last member (shard/FORMAT.md,
    "Dataset"): body (a JSON object ending with "\\n}\\n") with ',\\n  "manifest_sha256": "<hex>"'
    spliced in before the closing brace, hex being the SHA-256 of body."""
    assert body.endswith(b"\n}\n"), body[-10:]
    digest = hashlib.sha256(body).hexdigest()
    return body[:-3] + b',\n  "manifest_sha256": "' + digest.encode() + b'"\n}\n'


def write_manifest(path, m):
    """Write the manifest dict m (any manifest_sha256 in it is dropped) with a fresh checksum."""
    m = {k: v for k, v in m.items() if k != "manifest_sha256"}
    body = (json.dumps(m, indent=2) + "\n").encode()
    with open(path, "wb") as f:
        f.write(seal_manifest(body))


def write_dataset(directory, records, labels, classes, sample, aux=None, metas=None, shard_size=1 << 28,
                  block_records=None, shapes=None, fields=None, field_values=None):
    """Write a shards dataset. aux: dict name -> list of n ints. Shards split by data bytes.
    shapes: as write_shard (True: from the record arrays), giving a version-2 dataset.
    fields, field_values: as write_shard, giving a version-3 dataset (the schema in the manifest)."""
    os.makedirs(directory, exist_ok=True)
    if shapes is True or (shapes is None and fields is not None and any(d < 0 for d in sample["shape"])):
        shapes = [r.shape for r in records]
    recs = [_as_bytes(r) for r in records]
    n = len(recs)
    aux = aux or {}
    aux_names = list(aux)
    aux_arr = np.stack([np.asarray(aux[a], dtype=np.int64) for a in aux_names], axis=1) if aux_names else None
    groups = []
    cur, cur_bytes = [], 0
    for i, r in enumerate(recs):
        if cur and cur_bytes + len(r) > shard_size:
            groups.append(cur)
            cur, cur_bytes = [], 0
        cur.append(i)
        cur_bytes += len(r)
    if cur:
        groups.append(cur)
    files = []
    first = 0
    for s, g in enumerate(groups):
        rel = "shard-%05d.pks" % s
        write_shard(os.path.join(directory, rel), [recs[i] for i in g], [labels[i] for i in g], sample,
                    aux_names, aux_arr[g] if aux_arr is not None else None,
                    [metas[i] for i in g] if metas is not None else None, shard_index=s,
                    block_records=block_records, shapes=[shapes[i] for i in g] if shapes is not None else None,
                    fields=fields, field_values=[field_values[i] for i in g] if fields is not None else None)
        fe = _file_entry(directory, rel, len(g), first)
        fe["index_sha256"] = index_sha256(os.path.join(directory, rel))
        files.append(fe)
        first += len(g)
    m = _manifest(directory, "shards", n, classes, labels, sample, aux_names, files,
                  format_version=3 if fields is not None else 2 if shapes is not None else 1)
    if fields is not None:
        m["fields"] = fields
        write_manifest(os.path.join(directory, "manifest.json"), m)
    return m


def write_npy_dataset(directory, images, labels, classes, sample, aux=None, metas=None):
    os.makedirs(directory, exist_ok=True)
    images = np.ascontiguousarray(images)
    np.save(os.path.join(directory, "images.npy"), images)
    np.save(os.path.join(directory, "labels.npy"), np.asarray(labels, dtype=np.int64))
    rels = ["images.npy", "labels.npy"]
    aux = aux or {}
    for a, v in aux.items():
        np.save(os.path.join(directory, "aux_%s.npy" % a), np.asarray(v, dtype=np.int64))
        rels.append("aux_%s.npy" % a)
    if metas is not None:
        with open(os.path.join(directory, "meta.jsonl"), "wb") as f:
            for m in metas:
                f.write(canon(m) + b"\n")
        rels.append("meta.jsonl")
    files = [_file_entry(directory, r) for r in rels]
    return _manifest(directory, "npy", len(images), classes, labels, sample, list(aux), files)


def write_h5_dataset(directory, images, labels, classes, sample, aux=None, chunk=16):
    import h5py

    os.makedirs(directory, exist_ok=True)
    images = np.ascontiguousarray(images)
    with h5py.File(os.path.join(directory, "data.h5"), "w", track_order=True) as f:
        f.create_dataset("images", data=images, chunks=(min(chunk, max(1, len(images))),) + images.shape[1:])
        f.create_dataset("labels", data=np.asarray(labels, dtype=np.int64))
        f.attrs["classes"] = json.dumps(list(classes))
        f.attrs["sample"] = json.dumps(sample)
        for a, v in (aux or {}).items():
            f.create_dataset("aux/" + a, data=np.asarray(v, dtype=np.int64))
    files = [_file_entry(directory, "data.h5")]
    return _manifest(directory, "hdf5", len(images), classes, labels, sample, list(aux or {}), files)
