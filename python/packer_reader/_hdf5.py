"""Format "hdf5": data.h5 with /images, /labels and aux columns, and a dataset per field
(variable-length where the value's length varies), read through h5py (imported on first use)."""

import json

import numpy as np

from ._dataset import Dataset
from ._errors import FormatError, PackerError
from ._fields import Schema
from ._manifest import MANIFEST, _check_listed_size, _entry, _join, check_label_counts, dataset_meta_diff


def _import_h5py():
    try:
        import h5py
    except ImportError:
        raise PackerError("reading hdf5 datasets needs h5py (pip install h5py, or apt install python3-h5py)")
    return h5py


class HDF5Dataset(Dataset):
    """data.h5 with /images [N, ...] and /labels [N] int64, read through h5py."""

    format = "hdf5"

    def __init__(self, path, manifest, verify_crc=True, direct=False, store=None):
        super().__init__(path, manifest, verify_crc, direct, store)
        m = self.manifest
        rel = ([fe["path"] for fe in m.get("files", []) if fe["path"].endswith((".h5", ".hdf5"))] or ["data.h5"])[0]
        if store is not None:
            try:
                if not store.cache_dir:
                    raise PackerError("%s: an HDF5 dataset in a bucket is read through h5py from a local file: "
                                      "open it with cache_dir= (or PACKER_CACHE_DIR) to fetch data.h5 whole "
                                      "into that folder, or copy the dataset to a local folder" % self.path)
                obj = store.head(rel, _entry(m, rel).get("size"))
                local = store.local_copy(obj, _entry(m, rel).get("sha256"))
            finally:
                store.close()
                self._store = None
        h5py = _import_h5py()
        self._init_spec(m["sample"], _join(self.path, MANIFEST))
        self.count = n = m["count"]
        if store is not None:
            self.h5path = local
        else:
            self.h5path = _join(self.path, rel)
            _check_listed_size(m, self.path, rel)
        try:
            self._f = h5py.File(self.h5path, "r")
        except OSError as e:
            raise FormatError(self.h5path, "cannot open HDF5 file: %s" % e)
        try:
            self._check_and_load(n)
        except BaseException:
            self._f.close()
            raise

    def _check_and_load(self, n):
        f = self._f
        for name in ("images", "labels"):
            if name not in f:
                raise FormatError(self.h5path, "missing dataset /%s" % name)
        if "spec" in f.attrs:
            # The dataset description the writer stored (packer, source, transform, classes).
            try:
                spec = _h5_json_attr(f, "spec")
            except ValueError as e:
                raise FormatError(self.h5path, "root attribute 'spec': %s" % e)
            diff = dataset_meta_diff(spec, self.manifest)
            if diff:
                raise FormatError(self.h5path, "root attribute 'spec': dataset %s differ from the manifest's "
                                  "(a file of another build, or an edited manifest)" % ", ".join(diff))
        self._images = f["images"]
        im = self._images
        if tuple(im.shape) != (n,) + self.shape or im.dtype.str.lstrip("<|") != self.dtype.str.lstrip("<|"):
            raise FormatError(self.h5path, "/images is %s %s, the manifest says %s %s" % (
                list(im.shape), im.dtype, [n] + list(self.shape), self.dtype))
        lab = f["labels"]
        if tuple(lab.shape) != (n,) or lab.dtype.kind != "i" or lab.dtype.itemsize != 8:
            raise FormatError(self.h5path, "/labels is %s %s, expected [%d] int64" % (list(lab.shape), lab.dtype, n))
        self.labels = np.asarray(lab[...], dtype=np.int64)
        check_label_counts(self.manifest, self.labels, self.h5path + ":/labels")
        self.aux_names = list((self.manifest.get("label") or {}).get("aux") or [])
        cols = []
        for a in self.aux_names:
            ds = None
            for key in ("aux/" + a, "aux_" + a, a):
                if key in f:
                    ds = f[key]
                    break
            if ds is None:
                raise FormatError(self.h5path, "missing aux column %r" % a)
            cols.append(np.asarray(ds[...], dtype=np.int64).reshape(n))
        self._aux = np.stack(cols, axis=1) if cols else np.zeros((n, 0), np.int64)
        self._meta_ds = f["meta"] if "meta" in f else None
        self.schema = Schema(self.manifest.get("fields"), _join(self.path, MANIFEST), self.sample_spec)
        if "fields" in f.attrs:  # the schema the writer stored
            try:
                stored = _h5_json_attr(f, "fields")
            except ValueError as e:
                raise FormatError(self.h5path, "root attribute 'fields': %s" % e)
            if json.dumps(stored, sort_keys=True) != json.dumps(self.manifest.get("fields"), sort_keys=True):
                raise FormatError(self.h5path, "root attribute 'fields' differs from the manifest's fields schema")
        self._field_ds = [field_dataset(f, self.h5path, self.schema, self.shape, fd, n) for fd in self.schema.fields]

    def _field_raws(self, i):
        return [field_raw(d, i) for d in self._field_ds]

    def _field_paths(self):
        return self.h5path

    def close(self):
        if not self._closed:
            self._f.close()
        super().close()

    def _read_one(self, i):
        out = np.empty(self.shape, dtype=self.dtype)
        self._images.read_direct(out, np.s_[i], np.s_[...])
        return out

    def _fill_range(self, first, n, raw):
        images = raw[:n * self.record_size].view(self.dtype).reshape((n,) + self.shape)
        if n:
            self._images.read_direct(images, np.s_[first:first + n], np.s_[0:n])
        return images

    def _fill_indices(self, idx, images, spread=False):
        order = np.argsort(idx, kind="stable")
        sidx = idx[order]
        k, n = 0, sidx.size
        while k < n:
            j = k + 1
            while j < n and sidx[j] == sidx[j - 1] + 1:
                j += 1
            a = int(sidx[k])
            slots = order[k:j]
            s0 = int(slots[0])
            if j - k == 1 or np.all(np.diff(slots) == 1):  # straight into the batch
                self._images.read_direct(images, np.s_[a:a + j - k], np.s_[s0:s0 + j - k])
            else:
                tmp = np.empty((j - k,) + self.shape, dtype=self.dtype)
                self._images.read_direct(tmp, np.s_[a:a + j - k], np.s_[0:j - k])
                images[slots] = tmp
            k = j

    def _meta(self, i):
        if self._meta_ds is None:
            return None
        v = self._meta_ds[i]
        if isinstance(v, bytes):
            v = v.decode("utf-8")
        return json.loads(v) if v else None


def _h5_json_attr(f, name):
    v = f.attrs.get(name)
    if v is None:
        raise ValueError("no attribute %r" % name)
    if isinstance(v, bytes):
        v = v.decode("utf-8")
    return json.loads(str(v))


def field_dataset(f, h5path, schema, sample_shape, fd, n):
    """The dataset /NAME of field fd in the open file f, checked against the layout (FORMAT.md
    "Fields"): [N, ...shape] of the dtype when fixed (an image field at the sample's size), else
    [N] variable-length: sequences of the dtype (ndarray, rows flattened), of uint8 (bytes),
    strings (text, json)."""
    h5py = _import_h5py()
    d = f.get(fd.name)
    if d is None or not hasattr(d, "shape"):
        raise FormatError(h5path, "missing dataset /%s of field %r" % (fd.name, fd.name))
    if not fd.variable:
        shape = fd.image_shape(*schema.record_hw(sample_shape)) if fd.kind == "image" else fd.shape
        if tuple(d.shape) != (n,) + tuple(shape) or d.dtype.str.lstrip("<|") != fd.dtype.str.lstrip("<|"):
            raise FormatError(h5path, "/%s is %s %s, field %r needs %s %s" % (
                fd.name, list(d.shape), d.dtype, fd.name, [n] + list(shape), fd.dtype))
        return d
    if fd.kind in ("text", "json"):
        ok = h5py.check_string_dtype(d.dtype) is not None
        want = "variable-length strings"
    else:
        base = h5py.check_vlen_dtype(d.dtype)
        elem = fd.dtype if fd.kind == "ndarray" else np.dtype("u1")
        ok = base is not None and np.dtype(base).str.lstrip("<|") == elem.str.lstrip("<|")
        want = "variable-length sequences of %s" % elem
    if tuple(d.shape) != (n,) or not ok:
        raise FormatError(h5path, "/%s is %s %s, field %r needs [%d] %s" % (
            fd.name, list(d.shape), d.dtype, fd.name, n, want))
    return d


def field_raw(d, i):
    """Record i's value of a field's dataset d as raw little-endian bytes (a string's UTF-8)."""
    v = d[i]
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape")
    if isinstance(v, (np.ndarray, np.generic)):  # a scalar field's value is a NumPy scalar
        v = np.ascontiguousarray(v)
        return v.astype(v.dtype.newbyteorder("<"), copy=False).tobytes()
    return bytes(v)
