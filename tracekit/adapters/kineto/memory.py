"""GPU memory records: the `[memory]` instants of torch.profiler(profile_memory=True) moved from
`events` to `memory_events` (every field kept: the ones no column holds stay in args)."""

from __future__ import annotations

from collections import defaultdict

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ... import schema

_MEMORY = pa.scalar("[memory]", pa.string())  # typed: see kineto/scanned.py, _X


def split_memory(batch: pa.RecordBatch, source_id: int, accounting):
    """The `[memory]` instants (profile_memory=True) of an events batch go to memory_events;
    one whose args are not an allocation record (no integer Bytes) stays an event."""
    mask = pc.and_(pc.equal(batch.column("name"), _MEMORY), batch.column("is_instant")).fill_null(False)
    if not pc.any(mask).as_py():
        yield "events", batch
        return
    idx = pc.indices_nonzero(mask).to_pylist()
    mem = batch.take(pa.array(idx, pa.int64()))
    args = mem.column("args").to_pylist()
    keep, rows = [], defaultdict(list)
    known = ("Bytes", "Addr", "Total Allocated", "Total Reserved", "Device Type", "Device Id")
    for i, (text, ts, pid, tid) in enumerate(zip(args, mem.column("start_ns").to_pylist(),
                                                 mem.column("pid").to_pylist(), mem.column("tid").to_pylist())):
        try:
            a = orjson.loads(text) if text else {}
        except orjson.JSONDecodeError:
            a = {}
        nbytes = a.get("Bytes") if isinstance(a, dict) else None
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or not -2**63 < nbytes < 2**63:
            keep.append(idx[i])
            continue
        dtype, dev = a.get("Device Type"), a.get("Device Id")
        ints = {k: a.get(k) if isinstance(a.get(k), int) and not isinstance(a.get(k), bool)
                and -2**63 <= a.get(k) < 2**63 else None for k in known}
        rows["device_id"].append(dev if dtype == 1 and ints["Device Id"] is not None and -2**31 <= dev < 2**31 else None)
        rows["ts_ns"].append(ts)
        rows["kind"].append("free" if nbytes < 0 else "alloc")
        rows["address"].append(ints["Addr"])
        rows["bytes"].append(abs(nbytes))
        rows["allocated_bytes"].append(ints["Total Allocated"])
        rows["reserved_bytes"].append(ints["Total Reserved"])
        rows["allocator"].append("pytorch")
        rows["memory_kind"].append("device" if dtype == 1 else "host" if dtype == 0 else f"device_type_{dtype}")
        rows["pid"].append(pid)
        rows["tid"].append(tid)
        # every field not in a column stays in args: other keys, non-integer values of known
        # ones, and the Device Id of host memory (no device_id there)
        rest = {k: v for k, v in a.items() if k not in known or (ints[k] is None and v is not None)}
        if rows["device_id"][-1] is None and ints["Device Id"] is not None:
            rest["Device Id"] = dev
        rows["args"].append(orjson.dumps(rest).decode() if rest else None)
    others = pc.invert(mask)
    if keep:
        others = pc.or_(others, pc.is_in(pa.array(range(batch.num_rows), pa.int64()),
                                          value_set=pa.array(keep, pa.int64())))
    ev = batch.filter(others)
    if ev.num_rows:
        yield "events", ev
    if rows:
        n = len(rows["ts_ns"])
        t = schema.table("memory_events")
        cols = {"source_id": pa.repeat(pa.scalar(source_id, pa.int32()), n)}
        cols.update({c: pa.array(rows.get(c, [None] * n), t.arrow.field(c).type) for c in t.column_names[1:]})
        moved = n
        accounting.converted["events"] -= moved
        accounting.converted["memory_events"] += moved
        yield "memory_events", pa.RecordBatch.from_pydict(cols, schema=t.arrow)

