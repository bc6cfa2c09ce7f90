"""Writes the same images as WebDataset shards, TFRecord files and Parquet files, with the real
clients (webdataset's TarWriter, protobuf + crc32c for tf.train.Example/TFRecord, pyarrow in the
Hugging Face Image layout), for scripts/bench_sources.sh.

    python make_record_sources.py FOLDER OUT [REPEAT]

FOLDER is an image folder (class subfolders); every image is written REPEAT times (default 1),
in the folder's order (classes sorted, files sorted), label = class index, into
OUT/webdataset/*.tar, OUT/tfrecord/*.tfrecord and OUT/parquet/*.parquet, each about 256 MB
per file.
"""
import json
import os
import struct
import sys

import crc32c
import pyarrow as pa
import pyarrow.parquet as pq
import webdataset as wds
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

folder, out = sys.argv[1], sys.argv[2]
repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 1
classes = sorted(d for d in os.listdir(folder) if not d.startswith("."))
items = []
for label, c in enumerate(classes):
    for f in sorted(os.listdir(os.path.join(folder, c))):
        if not f.startswith("."):
            items.append((os.path.join(folder, c, f), label))

# tf.train.Example, from a descriptor of TensorFlow's example.proto / feature.proto.
fd = descriptor_pb2.FileDescriptorProto(name="example.proto", package="tensorflow", syntax="proto3")
F = descriptor_pb2.FieldDescriptorProto
def msg(name, fields, entry=None, oneof=None):
    m = fd.message_type.add(name=name)
    for fname, num, typ, label, tname, oi in fields:
        f = m.field.add(name=fname, number=num, type=typ, label=label)
        if tname:
            f.type_name = tname
        if oi is not None:
            f.oneof_index = oi
    if oneof:
        m.oneof_decl.add(name=oneof)
    if entry:
        e = m.nested_type.add(name=entry[0])
        e.options.map_entry = True
        e.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
        e.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=entry[1])
R, O = F.LABEL_REPEATED, F.LABEL_OPTIONAL
msg("BytesList", [("value", 1, F.TYPE_BYTES, R, None, None)])
msg("FloatList", [("value", 1, F.TYPE_FLOAT, R, None, None)])
msg("Int64List", [("value", 1, F.TYPE_INT64, R, None, None)])
msg("Feature", [("bytes_list", 1, F.TYPE_MESSAGE, O, ".tensorflow.BytesList", 0),
                ("float_list", 2, F.TYPE_MESSAGE, O, ".tensorflow.FloatList", 0),
                ("int64_list", 3, F.TYPE_MESSAGE, O, ".tensorflow.Int64List", 0)], oneof="kind")
msg("Features", [("feature", 1, F.TYPE_MESSAGE, R, ".tensorflow.Features.FeatureEntry", None)],
    entry=("FeatureEntry", ".tensorflow.Feature"))
msg("Example", [("features", 1, F.TYPE_MESSAGE, O, ".tensorflow.Features", None)])
pool = descriptor_pool.DescriptorPool()
pool.Add(fd)
desc = pool.FindMessageTypeByName("tensorflow.Example")
Example = message_factory.GetMessageClass(desc) if hasattr(message_factory, "GetMessageClass") else message_factory.MessageFactory(pool).GetPrototype(desc)

def masked(b):
    c = crc32c.crc32c(b)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

LIMIT = 256 << 20
for d in ("webdataset", "tfrecord", "parquet"):
    os.makedirs(os.path.join(out, d), exist_ok=True)

def stream():
    n = 0
    for r in range(repeat):
        for path, label in items:
            with open(path, "rb") as f:
                yield n, f.read(), label, os.path.basename(path)
            n += 1

# WebDataset
shard, size, sink = 0, 0, None
for n, data, label, name in stream():
    if sink is None or size > LIMIT:
        if sink:
            sink.close()
        sink = wds.TarWriter(os.path.join(out, "webdataset", "shard-%06d.tar" % shard))
        shard, size = shard + 1, 0
    sink.write({"__key__": "%09d" % n, "jpg": data, "cls": label})
    size += len(data)
sink.close()

# TFRecord
shard, size, f = 0, 0, None
for n, data, label, name in stream():
    if f is None or size > LIMIT:
        if f:
            f.close()
        f = open(os.path.join(out, "tfrecord", "train.tfrecord-%05d" % shard), "wb")
        shard, size = shard + 1, 0
    ex = Example()
    ex.features.feature["image/encoded"].bytes_list.value.append(data)
    ex.features.feature["image/class/label"].int64_list.value.append(label)
    b = ex.SerializeToString()
    head = struct.pack("<Q", len(b))
    f.write(head + struct.pack("<I", masked(head)) + b + struct.pack("<I", masked(b)))
    size += len(b)
f.close()

# Parquet (Hugging Face Image struct, ClassLabel names), row groups of 1000 rows
itype = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
schema = pa.schema([("image", itype), ("label", pa.int64())], metadata={b"huggingface": json.dumps(
    {"info": {"features": {"image": {"_type": "Image"}, "label": {"names": classes, "_type": "ClassLabel"}}}}).encode()})
shard, size, w, rows = 0, 0, None, []
def flush():
    global rows
    if rows:
        w.write_table(pa.table({"image": pa.array([r[0] for r in rows], type=itype),
                                "label": pa.array([r[1] for r in rows], type=pa.int64())}, schema=schema))
        rows = []
for n, data, label, name in stream():
    if w is None or size > LIMIT:
        if w:
            flush()
            w.close()
        w = pq.ParquetWriter(os.path.join(out, "parquet", "train-%05d.parquet" % shard), schema)
        shard, size = shard + 1, 0
    rows.append(({"bytes": data, "path": name}, label))
    size += len(data)
    if len(rows) == 1000:
        flush()
flush()
w.close()
print("make_record_sources: %d images x %d into %s" % (len(items), repeat, out))
