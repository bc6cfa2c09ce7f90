"""Fields: a sample's values beyond its primary array and integer labels (shard/FORMAT.md,
"Fields", format version 3). The schema (checked as the text says), each field's value decoded
from its raw bytes, and records gathered into batches. The shard parsing of fieldlens is in
_shard.py; the npy and hdf5 field layouts in _npy.py and _hdf5.py."""

import json
import re

import numpy as np

from ._errors import FormatError

MAX_FIELDS = 64
KINDS = ("image", "ndarray", "text", "bytes", "json")
DTYPES = {"uint8": np.dtype("u1"), "int32": np.dtype("<i4"), "int64": np.dtype("<i8"),
          "float32": np.dtype("<f4"), "float64": np.dtype("<f8")}
ENCODING_RAW = "raw"
MEMBERS = ("name", "kind", "encoding", "dtype", "shape", "geometry", "rows_of")
MAX_VALUE = 1 << 30  # MaxRecordSize: a fixed part of an ndarray value is at most this
_NAME = re.compile(r"[a-z0-9_]{1,64}")
# Keys of the record dict besides the fields' own names: a field of one of these names would
# hide the image or the label, so such a schema is refused with a reason (FORMAT.md reserves
# "sample" and "label").
DICT_KEYS = ("image", "label")


class Field:
    """One field of the schema: ``name``, ``kind``, ``dtype`` (numpy, or None), ``shape`` (tuple,
    or None), ``geometry`` ("", "mask", "boxes"), ``rows_of`` (a boxes field's name, or ""),
    ``spec`` (the schema element as the JSON says it)."""

    def __init__(self, spec, where, layout):
        def bad(reason):
            raise FormatError(where, "field %r: %s" % (spec.get("name") if isinstance(spec, dict) else spec, reason))

        if not isinstance(spec, dict):
            bad("a schema element is not an object")
        self.spec = spec
        unknown = sorted(set(spec) - set(MEMBERS))
        if unknown:  # FORMAT.md: a reader must reject a member it does not know
            bad("unknown member(s) %s" % ", ".join(unknown))
        name = spec.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            bad("the name must be 1 to 64 characters of a-z, 0-9 and _")
        if name in ("sample", "label"):
            bad("the name is reserved")
        self.name = name
        kind = spec.get("kind")
        if kind not in KINDS:
            bad("unknown kind %r" % (kind,))
        self.kind = kind
        enc = spec.get("encoding")
        if enc != ENCODING_RAW:
            bad("unknown encoding %r (this reader knows %r)" % (enc, ENCODING_RAW))
        self.geometry = spec.get("geometry") or ""
        self.rows_of = spec.get("rows_of") or ""
        self.dtype = self.shape = None
        if kind in ("ndarray", "image"):
            self.dtype = DTYPES.get(spec.get("dtype")) if isinstance(spec.get("dtype"), str) else None
            if self.dtype is None:
                bad("dtype %r is not one of %s" % (spec.get("dtype"), ", ".join(DTYPES)))
            shape = spec.get("shape")
            if (not isinstance(shape, list) or not 1 <= len(shape) <= 8
                    or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape)):
                bad("shape %r must be a list of 1 to 8 integers" % (shape,))
            self.shape = tuple(shape)
        elif any(spec.get(k) not in (None, "") for k in ("dtype", "shape", "geometry", "rows_of")):
            bad("a %s field has no dtype, shape, geometry or rows_of" % kind)
        if kind == "ndarray":
            if any(d < 1 and not (d == -1 and j == 0) for j, d in enumerate(self.shape)):
                bad("shape %r: dimensions are >= 1, and only the first may be -1" % (list(self.shape),))
            if self.dtype.itemsize * int(np.prod([d for d in self.shape if d > 0], dtype=object)) > MAX_VALUE:
                bad("shape %r is more than the record size limit" % (list(self.shape),))
        if kind == "image":
            self._image_layout(layout, bad)
        if self.geometry == "mask" and kind != "image":
            bad("geometry mask is for an image field")
        if self.geometry == "boxes" and (kind != "ndarray" or self.dtype != DTYPES["float32"]
                                         or self.shape != (-1, 4) or self.rows_of):
            bad("geometry boxes is for a float32 [-1, 4] ndarray field without rows_of")
        if self.geometry not in ("", "mask", "boxes"):
            bad("unknown geometry %r" % (self.geometry,))
        if self.rows_of and (kind != "ndarray" or self.shape[0] != -1):
            bad("rows_of is for an ndarray field of a variable row count")
        # variable: the value's size varies between records (not an image field: its size follows
        # the sample's height and width, fixed where the sample's is)
        self.variable = kind in ("text", "bytes", "json") or (kind == "ndarray" and self.shape[0] == -1)
        self.row_size = 1
        if kind == "ndarray":
            self.row_size = self.dtype.itemsize * int(np.prod(self.shape[1:], dtype=np.int64))
        self.size = None  # bytes of a fixed ndarray
        if kind == "ndarray" and not self.variable:
            self.size = self.dtype.itemsize * int(np.prod(self.shape, dtype=np.int64))

    def _image_layout(self, layout, bad):
        """An image field's shape is in the sample's layout with -1 for height and width:
        [-1, -1, C] for hwc, [C, -1, -1] for chw (1 <= C <= 4096); no other layout has image
        fields."""
        frame = layout
        if self.dtype != DTYPES["uint8"]:
            bad("an image field is uint8")
        if frame not in ("hwc", "chw"):
            bad("an image field needs an hwc or chw sample, not %r" % (layout,))
        if len(self.shape) != 3:
            bad("shape %r is not an image's in the sample layout %r" % (list(self.shape), layout))
        self.hwc_pos = (frame.index("h"), frame.index("w"), frame.index("c"))
        h, w, c = (self.shape[j] for j in self.hwc_pos)
        if self.rows_of:
            bad("rows_of is for an ndarray field")
        if h != -1 or w != -1 or not 1 <= c <= 4096:
            bad("shape %r: an image field has -1 for height and width, in the sample layout %r"
                % (list(self.shape), layout))
        self.channels = c

    def image_shape(self, height, width):
        sh = list(self.shape)
        sh[self.hwc_pos[0]], sh[self.hwc_pos[1]] = height, width
        return tuple(sh)


class Schema:
    """The fields of a dataset, in schema order; ``Schema(None)`` (no fields) is empty and
    false. ``layout`` is the sample's (image fields follow it)."""

    def __init__(self, fields, where, sample_spec=None):
        spec = sample_spec if isinstance(sample_spec, dict) else {}
        self.layout = spec.get("layout") if isinstance(spec.get("layout"), str) else ""
        self.sample_shape = tuple(spec.get("shape") or ())
        self.fields = []
        self.by_name = {}
        self.hw_index = (0, 1)
        if fields is None:
            return
        if not isinstance(fields, list) or not fields:
            raise FormatError(where, "fields must be a non-empty list of field descriptions")
        if len(fields) > MAX_FIELDS:
            raise FormatError(where, "%d fields exceed the limit %d" % (len(fields), MAX_FIELDS))
        seen = {}
        for f in fields:
            fd = Field(f, where, self.layout)
            if fd.name in seen:
                raise FormatError(where, "field name %r is used twice" % fd.name)
            seen[fd.name] = fd
            self.fields.append(fd)
        for fd in self.fields:
            if fd.rows_of:
                b = seen.get(fd.rows_of)
                if b is None or b.geometry != "boxes":
                    raise FormatError(where, "field %r: rows_of %r is not a boxes field of the schema"
                                      % (fd.name, fd.rows_of))
        self.by_name = seen
        if any(f.kind == "image" for f in self.fields):
            # image fields are only for hwc and chw samples (Field checks the layout)
            if len(self.sample_shape) != 3:
                raise FormatError(where, "an image field needs a sample of shape %s to follow its layout %r"
                                  % (list(self.sample_shape), self.layout))
            self.hw_index = (self.layout.index("h"), self.layout.index("w"))

    def __bool__(self):
        return bool(self.fields)

    def __len__(self):
        return len(self.fields)

    def specs(self):
        return [dict(f.spec) for f in self.fields]

    def names(self):
        return [f.name for f in self.fields]

    def record_hw(self, rec_shape):
        return rec_shape[self.hw_index[0]], rec_shape[self.hw_index[1]]

    # -- values ----------------------------------------------------------------------------
    def decode(self, raws, rec_shape, where, record):
        """{name: value} of one record from its fields' raw bytes (schema order): text -> str,
        json -> the parsed value, bytes -> bytes, ndarray and image -> ndarray. A value that does
        not fit its field is a FormatError naming ``where`` (a path, or one per field) and the
        record."""
        out = {}
        for k, (f, raw) in enumerate(zip(self.fields, raws)):
            out[f.name] = self.decode_one(f, raw, rec_shape, where[k] if isinstance(where, list) else where, record)
        return out

    def decode_one(self, f, raw, rec_shape, where, record):
        def bad(reason):
            raise FormatError(where, "record %d: field %r: %s" % (record, f.name, reason))

        if f.kind == "bytes":
            return bytes(raw)
        if f.kind in ("text", "json"):
            try:
                s = bytes(raw).decode("utf-8")
            except UnicodeDecodeError as e:
                bad("not UTF-8 (%s)" % e.reason)
            if f.kind == "text":
                return s
            try:
                return json.loads(s, parse_constant=_no_constant)
            except ValueError as e:
                bad("not one JSON value (%s)" % e)
        n = len(raw)
        if f.kind == "image":
            h, w = self.record_hw(rec_shape)
            shape = f.image_shape(h, w)
            if n != h * w * f.channels:
                bad("%d bytes, an image of %s is %d" % (n, list(shape), h * w * f.channels))
        elif f.variable:
            if n % f.row_size:
                bad("%d bytes is not a whole number of %d-byte rows" % (n, f.row_size))
            shape = (n // f.row_size,) + f.shape[1:]
        else:
            if n != f.size:
                bad("%d bytes, shape %s is %d" % (n, list(f.shape), f.size))
            shape = f.shape
        arr = np.frombuffer(raw, dtype=f.dtype) if n else np.zeros(0, f.dtype)
        if not arr.flags.writeable:
            arr = arr.copy()
        return arr.reshape(shape)

    def check_keys(self, where, pad=False):
        """Refuse a schema whose names would collide with the dict's own keys."""
        names = set(self.names())
        for k in DICT_KEYS:
            if k in names:
                raise FormatError(where, "field %r has the name of the record dict's %r entry; this reader "
                                  "cannot hand it out in a dict (read it with ds.field(i, %r))" % (k, k, k))
        if pad:
            for f in self.fields:
                if f.kind == "ndarray" and f.variable and f.name + "_lengths" in names:
                    raise ValueError("pad=True: field %r's lengths would be %r, the name of another field"
                                     % (f.name, f.name + "_lengths"))

    # -- batches ---------------------------------------------------------------------------
    def collate(self, images, labels, values, stack_images, pad=False, image_dtype=np.uint8):
        """A batch dict: "image" ([B, ...] array when ``stack_images``, else a list), "label"
        (int64 [B]), and per field: fixed-size ndarrays and image fields of fixed-size samples
        stacked [B, ...]; variable ndarrays a list of arrays (``pad``: one zero-padded array
        [B, max rows, ...] and NAME_lengths, int64 [B] rows); text, json and bytes a list."""
        batch = {"image": np.stack(images) if stack_images and images else images,
                 "label": np.asarray(labels, dtype=np.int64)}
        if stack_images and not images:
            batch["image"] = np.zeros((0,) + self.sample_shape, dtype=image_dtype)
        for f in self.fields:
            vals = [v[f.name] for v in values]
            if f.kind == "ndarray" and not f.variable:
                batch[f.name] = np.stack(vals) if vals else np.zeros((0,) + f.shape, f.dtype)
            elif f.kind == "image" and stack_images:
                empty = (0,) + f.image_shape(*self.record_hw(self.sample_shape))
                batch[f.name] = np.stack(vals) if vals else np.zeros(empty, f.dtype)
            elif f.kind == "ndarray" and pad:
                lengths = np.array([len(v) for v in vals], dtype=np.int64)
                rows = int(lengths.max()) if vals else 0
                out = np.zeros((len(vals), rows) + f.shape[1:], dtype=f.dtype)
                for j, v in enumerate(vals):
                    out[j, :len(v)] = v
                batch[f.name] = out
                batch[f.name + "_lengths"] = lengths
            else:
                batch[f.name] = vals
        return batch


def _no_constant(name):
    raise ValueError("%s is not JSON" % name)
