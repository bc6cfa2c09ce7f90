"""Format "shards": a dataset of packer shard files (shard/FORMAT.md), each checked against the
manifest when opened."""

import json
import os
import warnings

import numpy as np

from . import _crc32c
from ._errors import FormatError
from ._fields import Schema
from ._manifest import MANIFEST, _canon, _join, dataset_meta_diff
from ._segment import _SegmentDataset
from ._shard import ShardFile

# Datasets with more shards than this keep no descriptor open between reads (each read opens,
# checks the file identity, reads and closes), so huge datasets stay within RLIMIT_NOFILE.
MAX_OPEN_SHARDS = 256


_warned_slow_crc = False


def _warn_if_slow_crc():
    """Record CRCs are checked by default whatever the CRC backend; on the NumPy fallback that
    costs real time, so say once per process how to get the fast one or how to opt out."""
    global _warned_slow_crc
    if _crc32c.BACKEND == "numpy" and not _warned_slow_crc:
        _warned_slow_crc = True
        warnings.warn("packer_reader: record CRC-32C checks run on the slow NumPy fallback (a few hundred "
                      "MiB/s, below disk speed); install the packer wheel (it carries a hardware CRC-32C), "
                      "build it in a source tree with scripts/build-crc.sh, or install python3-crc32c (apt) "
                      "or 'pip install crc32c', or open the dataset with verify_crc=False to skip the checks",
                      RuntimeWarning, stacklevel=4)


class ShardDataset(_SegmentDataset):
    """A directory of packer shards (format "shards")."""

    format = "shards"

    def __init__(self, path, manifest, verify_crc=True, direct=False, shard_paths=None, store=None):
        super().__init__(path, manifest, verify_crc, direct, store)
        if self.verify_crc:
            _warn_if_slow_crc()
        entries = [fe for fe in self.manifest.get("files", []) if fe["path"].endswith(".pks")]
        if shard_paths is None:
            shard_paths = [_join(self.path, fe["path"]) for fe in entries]
        else:
            entries = [{} for _ in shard_paths]
        segs = []
        first = 0
        keep_open = len(shard_paths) <= MAX_OPEN_SHARDS
        try:
            for pos, (p, fe) in enumerate(zip(shard_paths, entries)):
                if store is None:
                    sf = ShardFile(p, first, keep_open)
                else:  # HEAD (size against the manifest, ETag), then ranged GETs or a local copy
                    obj = store.head(fe["path"], fe.get("size"))
                    if store.cache_dir:
                        sf = ShardFile(store.local_copy(obj, fe.get("sha256")), first, keep_open, name=obj.url)
                    else:
                        sf = ShardFile(None, first, obj=obj)
                segs.append(sf)
                if fe:
                    self._check_identity(sf, pos, fe, first)
                first += sf.n
        except BaseException:
            for s in segs:
                s.close()
            if store is not None:
                store.close()
            raise
        self._setup_segments(segs)
        self.count = first
        spec = self.manifest.get("sample") or (segs[0].meta.get("sample") if segs else None)
        if spec is None:
            raise FormatError(self.path, "no sample spec (empty dataset without manifest)")
        self._init_spec(spec, self.path)
        m = self.manifest
        fields = m.get("fields") if m else (segs[0].fields_meta if segs else None)
        try:
            self.schema = Schema(fields, os.path.join(self.path, MANIFEST) if m else self.path, spec)
            for s in segs:
                if _canon(s.fields_meta) != _canon(fields):
                    raise FormatError(s.path, "fields schema %s differs from the %s's %s" % (
                        _schema_names(s.fields_meta), "manifest" if m else "first shard", _schema_names(fields)))
        except BaseException:
            self.close()
            raise
        if m and m.get("count") != self.count:
            self.close()
            raise FormatError(os.path.join(self.path, MANIFEST),
                              "manifest count %r, the shards hold %d records" % (m.get("count"), self.count))
        for s in segs:
            if (list(s.shape), s.dtype) != (list(self.shape), self.dtype):
                self.close()
                raise FormatError(s.path, "sample spec %s %s differs from the dataset's %s %s"
                                  % (list(s.shape), s.dtype.name, list(self.shape), self.dtype.name))
        label = m.get("label") or (segs[0].meta.get("label") if segs else {}) or {}
        self.aux_names = list(label.get("aux") or [])
        for s in segs:
            if s.aux_names != self.aux_names:
                self.close()
                raise FormatError(s.path, "aux columns %r differ from the dataset's %r" % (s.aux_names, self.aux_names))
        a = len(self.aux_names)
        self.labels = np.concatenate([s.labels for s in segs]) if segs else np.zeros(0, np.int64)
        self._aux = np.concatenate([s.aux for s in segs]) if segs else np.zeros((0, a), np.int64)
        self.shards = segs

    def _check_identity(self, sf, pos, fe, first):
        """Refuse a shard that is not the one the manifest lists at position pos: a swapped,
        renamed or foreign file would otherwise serve other records under these indices."""
        m = self.manifest
        if sf.cut is not None or fe.get("shard") is not None:
            # version 4: the header names its chunk and piece, as the manifest entry does
            if sf.cut != fe.get("shard"):
                raise FormatError(sf.path, "shard %s in its header (version %d) at position %d of the manifest, which "
                                  "lists %s there (swapped or renamed shard files?)" % (
                                      json.dumps(sf.cut), sf.version, pos, json.dumps(fe.get("shard"))))
        else:
            idx = (sf.meta.get("shard") or {}).get("index") if isinstance(sf.meta.get("shard"), dict) else None
            if idx != pos:
                raise FormatError(sf.path, "shard index %s in its header at position %d of the manifest "
                                  "(swapped or renamed shard files?)" % (idx, pos))
        want = m.get("sample") or {}
        got = sf.meta.get("sample") or {}
        for key in ("shape", "dtype", "layout"):
            if got.get(key) != want.get(key):
                raise FormatError(sf.path, "sample spec %s %s %s, the manifest says %s %s %s (%s differs)" % (
                    got.get("shape"), got.get("dtype"), got.get("layout"),
                    want.get("shape"), want.get("dtype"), want.get("layout"), key))
        want_aux = list((m.get("label") or {}).get("aux") or [])
        if sf.aux_names != want_aux:
            raise FormatError(sf.path, "aux columns %r, the manifest says %r" % (sf.aux_names, want_aux))
        fv = m.get("format_version")
        if isinstance(fv, int) and not isinstance(fv, bool) and sf.version > fv:
            raise FormatError(sf.path, "shard format version %d, the manifest says format_version %d" % (sf.version, fv))
        if "dataset" in sf.meta:
            diff = dataset_meta_diff(sf.meta["dataset"], m)
            if diff:
                raise FormatError(sf.path, "the shard header's dataset %s differ from the manifest's "
                                  "(a shard of another build, or an edited manifest)" % ", ".join(diff))
        records = fe.get("records", 0)
        if records != sf.n or fe.get("first_record", 0) != first:
            raise FormatError(sf.path, "holds %d records from %d, the manifest says %r records from %r" % (
                sf.n, first, records, fe.get("first_record", 0)))
        if "size" in fe and fe["size"] != sf.file_size:
            raise FormatError(sf.path, "file is %d bytes, the manifest says %d" % (sf.file_size, fe["size"]))
        # A manifest of packer before index_sha256 has none: the checks above only (FORMAT.md).
        pin = fe.get("index_sha256")
        if pin is not None and sf.index_sha256 != pin:
            raise FormatError(sf.path, "index_sha256 %s, the manifest says %s: a shard of another build (same names "
                              "and options, other content: an rsync of a rebuild?) or a changed file; its records "
                              "are not this dataset's" % (sf.index_sha256, pin))

    def _meta(self, i):
        s, li = self._locate(i)
        return self._segs[s].record_meta(li)


def _schema_names(fields):
    """A schema, short, for messages: its fields' names and kinds, or "none"."""
    if not isinstance(fields, list) or not fields:
        return "none"
    return "[%s]" % ", ".join("%s %s" % (f.get("name"), f.get("kind")) if isinstance(f, dict) else repr(f)
                               for f in fields)
