"""Run by test_grain.py in the Grain venv (scripts/grain-venv.sh): one process of a 2-process run
of Grain's own IndexSampler and DataLoader over packer_reader.grain.Source, writing what it saw
as JSON for the test to check. Every record's value is checked here against packer's own
iterator, every array the source hands out against jax.device_put taking it without a copy, and a
DataLoader checkpoint (get_state, set_state on a new loader over a new source) against resuming at
the same record.

    python grain_worker.py DATASET OUT.json PROCESS_INDEX PROCESS_COUNT MODE

MODE: "jax": JAX's distributed runtime on the CPU (PROCESS_COUNT processes, this one
PROCESS_INDEX; the coordinator address in PACKER_GRAIN_COORDINATOR) and
ShardByJaxProcess(drop_remainder=True);
"options": ShardOptions(PROCESS_INDEX, PROCESS_COUNT) without JAX's runtime, read by 2 Grain
worker processes (the source pickled into them)."""

import json
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import grain  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

import packer_reader  # noqa: E402
from packer_reader.grain import Source  # noqa: E402

EPOCHS = 2


def aliased(a):
    """jax.device_put(a) uses a's memory (no copy)."""
    return jax.device_put(a).unsafe_buffer_pointer() == a.ctypes.data


def main():
    path, out, k, count, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    if mode == "jax":
        jax.distributed.initialize(os.environ["PACKER_GRAIN_COORDINATOR"], num_processes=count, process_id=k)
        assert (jax.process_index(), jax.process_count()) == (k, count)
        shard = grain.sharding.ShardByJaxProcess(drop_remainder=True)
    else:
        shard = grain.sharding.ShardOptions(shard_index=k, shard_count=count, drop_remainder=False)

    # The reference: every record as packer's own iterator reads it, keyed by its bytes.
    ref = {}
    with packer_reader.open(path) as ds:
        pos = 0
        for images, labels in ds.batches(64):
            for img, label in zip(images, labels):
                ref[img.tobytes()] = (pos, int(label))
                pos += 1
        n = len(ds)
    assert len(ref) == n, "the fixture's records must differ"

    source = Source(path)
    assert len(source) == n and isinstance(source, grain.sources.RandomAccessDataSource)
    from grain._src.python.dataset import base  # the batched-read protocol Grain checks for
    assert isinstance(source, base.SupportsBatchedReadRandomAccessDataSource)
    recs = source._getitems([5, n - 1, 5, 0]) + [source[3], source[-1]]
    for r in recs:
        assert r["image"].flags.c_contiguous and aliased(r["image"]), "device_put copied a record"
        assert ref[r["image"].tobytes()][1] == r["label"]

    sampler = grain.samplers.IndexSampler(num_records=n, shard_options=shard, shuffle=True, num_epochs=EPOCHS,
                                          seed=7)
    workers = 2 if mode == "options" else 0
    if workers:  # Grain's worker processes read absl flags, which a script not run by absl.app must parse
        from absl import flags
        flags.FLAGS.mark_as_parsed()
    loader = grain.DataLoader(data_source=source, sampler=sampler, worker_count=workers,
                              read_options=grain.ReadOptions(num_threads=8, prefetch_buffer_size=64))
    seen = []
    for rec in loader:
        pos, label = ref[np.asarray(rec["image"]).tobytes()]
        assert rec["label"] == label, (pos, rec["label"], label)
        seen.append(pos)

    # A DataLoader checkpoint (Grain checks repr(source) on restore) resumes at the same record.
    loader = grain.DataLoader(data_source=source, sampler=sampler, worker_count=0)
    it = iter(loader)
    for _ in range(10):
        next(it)
    state = it.get_state()
    want = [ref[np.asarray(next(it)["image"]).tobytes()][0] for _ in range(10)]
    it2 = iter(grain.DataLoader(data_source=Source(path), sampler=sampler, worker_count=0))
    it2.set_state(state)
    assert [ref[np.asarray(next(it2)["image"]).tobytes()][0] for _ in range(10)] == want

    # Batches through Grain's Batch and onto the JAX CPU device.
    loader = grain.DataLoader(data_source=source, sampler=grain.samplers.IndexSampler(
        num_records=n, shard_options=shard, shuffle=True, num_epochs=1, seed=3),
        operations=[grain.transforms.Batch(batch_size=16, drop_remainder=False)], worker_count=0)
    batched = []
    for batch in loader:
        x = jax.device_put(batch["image"])
        assert x.shape[1:] == source.dataset.shape
        for img, label in zip(np.asarray(x), batch["label"]):
            pos, want = ref[img.tobytes()]
            assert int(label) == want
            batched.append(pos)
    with open(out, "w") as f:
        json.dump({"seen": seen, "batched": batched, "n": n}, f)
    if mode == "jax":
        jax.distributed.shutdown()


if __name__ == "__main__":
    main()
