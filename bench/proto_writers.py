"""Benchmark (issue 23): the .pftrace writer, hand-encoded (tracekit.export.protowire) vs Perfetto's
official Python package (`perfetto` on PyPI: the generated `perfetto_trace_pb2` classes, and its
`trace_builder.StreamingTraceProtoBuilder`).

    python bench/proto_writers.py [--db STORE] [--repeat 3]

Each writer exports the same store (default: every Kineto and nsys capture of fixtures/ in one
store, built once at /tmp/tk_bench_fixtures.duckdb, its sources aligned to one start) in a fresh
child process: wall time of the export, CPU time (all threads, the steadier figure on a shared
machine), peak RSS of the child.  Then the writer alone: the writer calls of one export are
recorded and replayed into each writer (bytes discarded), CPU time per replay.  The outputs are
decoded with the official classes (tests/pftrace.py) and must be equal.

Writers:
  protowire  tracekit's ProtoWriter (bytes built by hand, tracekit/export/protowire.py)
  pb2        the same packets as perfetto_trace_pb2.TracePacket messages, SerializeToString()
  builder    pb2 packets written through perfetto.trace_builder's StreamingTraceProtoBuilder
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DB = Path("/tmp/tk_bench_fixtures.duckdb")


# -- the writers built on the official classes (same interface as proto_writer.ProtoWriter) ------------
def pb_writer_class(streaming_builder: bool):
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
    from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder

    from tracekit.export.protowire import varint

    TE = pb.TrackEvent
    NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
    SEQ = 1

    class _Chunks:  # the file object StreamingTraceProtoBuilder writes to: chunks for the Sink
        def __init__(self, w):
            self.w = w

        def write(self, b):
            self.w.buf.append(b)
            if len(self.w.buf) >= 8192:
                self.w.flush()

    class PbWriter:
        text = False

        def __init__(self, sink):
            self.sink = sink
            self.buf: list[bytes] = []
            self.slices = self.flows = self.samples = 0
            self.names: dict[str, int] = {}
            self.cats: dict[str, int] = {}
            self.arg_names: dict[str, int] = {}
            self.builder = StreamingTraceProtoBuilder(_Chunks(self)) if streaming_builder else None
            p = pb.TracePacket()
            p.trusted_packet_sequence_id = SEQ
            p.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            p.first_packet_on_sequence = True
            self._packet(p)

        def _packet(self, p):
            if self.builder is not None:
                self.builder.write_packet(p)
                return
            body = p.SerializeToString()
            self.buf.append(b"\x0a" + varint(len(body)) + body)
            if len(self.buf) >= 8192:
                self.flush()

        def flush(self):
            if self.buf:
                self.sink.write(b"".join(self.buf))
                self.buf = []

        def on_process(self, proc):
            p = pb.TracePacket(timestamp=0)
            td = p.track_descriptor
            td.uuid = proc.uuid
            td.process.pid = proc.pid
            td.process.process_name = proc.name
            td.process.legacy_sort_index = proc.sort & 0x7FFFFFFF
            td.child_ordering = pb.TrackDescriptor.EXPLICIT
            self._packet(p)

        def on_thread(self, t):
            p = pb.TracePacket(timestamp=0)
            td = p.track_descriptor
            td.uuid = t.uuid
            td.parent_uuid = t.process.uuid
            td.thread.pid = t.pid
            td.thread.tid = t.tid
            td.thread.thread_name = t.name
            td.thread.legacy_sort_index = t.sort & 0x7FFFFFFF
            td.sibling_order_rank = t.sort & 0x7FFFFFFF
            self._packet(p)

        def on_counter_track(self, t, name, key, unit):
            p = pb.TracePacket(timestamp=0)
            td = p.track_descriptor
            td.uuid = t.uuid
            td.parent_uuid = t.process.uuid
            td.name = t.name
            td.counter.SetInParent()
            if unit:
                td.counter.unit_name = unit
            self._packet(p)

        def _intern(self, table, s, add):
            iid = table.get(s)
            if iid is None:
                iid = table[s] = len(table) + 1
                add(iid=iid, name=s)
            return iid

        def end(self, t, ts):
            self._packet(pb.TracePacket(timestamp=ts, trusted_packet_sequence_id=SEQ, sequence_flags=NEEDS,
                                        track_event=TE(type=TE.TYPE_SLICE_END, track_uuid=t.uuid)))

        def slice(self, t, ts, name, cat, args, out_links=None, in_link=None, instant=False):
            p = pb.TracePacket(timestamp=ts, trusted_packet_sequence_id=SEQ, sequence_flags=NEEDS)
            te = p.track_event
            te.type = TE.TYPE_INSTANT if instant else TE.TYPE_SLICE_BEGIN
            te.track_uuid = t.uuid
            idata = p.interned_data
            te.name_iid = self._intern(self.names, name or "[No name]", idata.event_names.add)
            te.category_iids.append(self._intern(self.cats, cat or "other", idata.event_categories.add))
            if args:
                te.debug_annotations.add(name_iid=self._intern(self.arg_names, "args",
                                                                idata.debug_annotation_names.add),
                                         legacy_json_value=args)
            if out_links is not None:
                te.flow_ids.extend(out_links)
                self.flows += len(out_links)
            elif in_link is not None:
                te.terminating_flow_ids.append(in_link)
            if not (idata.event_names or idata.event_categories or idata.debug_annotation_names):
                p.ClearField("interned_data")
            self._packet(p)
            self.slices += 1

        def counter(self, t, name, key, ts, value):
            self._packet(pb.TracePacket(timestamp=ts, trusted_packet_sequence_id=SEQ, sequence_flags=NEEDS,
                                        track_event=TE(type=TE.TYPE_COUNTER, track_uuid=t.uuid,
                                                       double_counter_value=value)))
            self.samples += 1

        def finish(self, top):
            self.flush()

    return PbWriter


CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[4])
import tracekit
from tracekit.export import ExportOptions, export_perfetto
from tracekit.export.perfetto import export as ex
db, out, writer = sys.argv[1], sys.argv[2], sys.argv[3]
if writer != "protowire":
    import proto_writers
    ex.ProtoWriter = proto_writers.pb_writer_class(writer == "builder")
with tracekit.open(db) as st:
    align = {sid: 1_700_000_000_000_000_000 - start for sid, start in
             st.sql("SELECT source_id, start_ns FROM sources WHERE start_ns IS NOT NULL").fetchall()}
    t = time.perf_counter()
    r = export_perfetto(st, out, ExportOptions(align=align))
    wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"export_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "slices": r.slices, "flows": r.flows,
                  "samples": r.counter_samples, "bytes": r.bytes_written, "maxrss_mb": ru.ru_maxrss / 1024}))
"""


def replay(db: Path, repeat: int) -> dict:
    """CPU seconds of each writer alone: the calls of one export, recorded, replayed."""
    import gc
    import time

    from tracekit.export import ExportOptions, export_perfetto
    from tracekit.export.perfetto import export as ex
    from tracekit.export.perfetto.proto_writer import ProtoWriter
    from tracekit.store import Store

    calls = []

    class Rec(ProtoWriter):
        def on_process(self, p):
            calls.append(("on_process", (p,)))
            super().on_process(p)

        def on_thread(self, t):
            calls.append(("on_thread", (t,)))
            super().on_thread(t)

        def on_counter_track(self, *a):
            calls.append(("on_counter_track", a))
            super().on_counter_track(*a)

        def end(self, *a):
            calls.append(("end", a))
            super().end(*a)

        def slice(self, t, ts, name, cat, args, out_links=None, in_link=None, instant=False):
            out_links = list(out_links) if out_links is not None else None
            calls.append(("slice", (t, ts, name, cat, args, out_links, in_link, instant)))
            super().slice(t, ts, name, cat, args, out_links, in_link, instant)

        def counter(self, *a):
            calls.append(("counter", a))
            super().counter(*a)

    saved, ex.ProtoWriter = ex.ProtoWriter, Rec
    try:
        with Store(db, read_only=True) as st:
            align = {sid: 1_700_000_000_000_000_000 - start for sid, start in
                     st.con.sql("SELECT source_id, start_ns FROM sources WHERE start_ns IS NOT NULL").fetchall()}
            export_perfetto(st, "/tmp/tk_bench_record.pftrace", ExportOptions(align=align))
    finally:
        ex.ProtoWriter = saved

    class Null:
        def write(self, b):
            pass

    writers = {"protowire": ProtoWriter, "pb2": pb_writer_class(False), "builder": pb_writer_class(True)}
    out: dict = {w: [] for w in writers}
    for _ in range(repeat):
        for name, cls in writers.items():
            gc.collect()
            t = time.process_time()
            w = cls(Null())
            for m, a in calls:
                getattr(w, m)(*a)
            w.finish({})
            out[name].append(time.process_time() - t)
    print(f"writer alone, {len(calls):,} writer calls replayed:")
    for name, ts in out.items():
        print(f"{name:10s} CPU {statistics.median(ts):5.2f} s (median of {len(ts)}: "
              f"{', '.join(format(x, '.2f') for x in ts)})")
    return out


def build(db: Path) -> None:
    from tracekit.store import Store

    f = REPO / "fixtures"
    files = [p for d in ("kineto", "roofline", "labelled") for p in sorted((f / d).glob("*.json.gz"))]
    files += [p for d in ("nsys", "roofline", "labelled") for p in sorted((f / d).glob("*.sqlite"))]
    with Store(db, replace=True) as st:
        for p in files:
            st.convert(p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", type=Path, default=DEFAULT_DB)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--replay-only", action="store_true", help="only the writer-alone figures")
    a = ap.parse_args()
    sys.path.insert(0, str(REPO))
    if not a.db.exists():
        build(a.db)
    replay(a.db, max(a.repeat, 5))
    if a.replay_only:
        return
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    outs, res = {}, {}
    for _i in range(a.repeat):
        for w in ("protowire", "pb2", "builder"):
            out = Path(f"/tmp/tk_bench_{w}.pftrace")
            p = subprocess.run([sys.executable, "-c", CHILD, str(a.db), str(out), w, str(REPO / "bench")],
                               capture_output=True, text=True, env=env)
            if p.returncode:
                sys.exit(p.stderr)
            res.setdefault(w, []).append(json.loads(p.stdout))
            outs[w] = out
    for w, rs in res.items():
        r = rs[0]
        print(f"{w:10s} export {statistics.median(x['export_s'] for x in rs):6.2f} s (median of {len(rs)}; "
              f"{', '.join(format(x['export_s'], '.2f') for x in rs)})  cpu {statistics.median(x['cpu_s'] for x in rs):6.2f} s  "
              f"peak RSS {max(x['maxrss_mb'] for x in rs):6.0f} MB  {r['bytes'] / 1e6:.1f} MB  "
              f"{r['slices']:,} slices {r['flows']:,} flows {r['samples']:,} samples")
    sys.path.insert(0, str(REPO / "tests"))
    import pftrace

    forms = {w: pftrace.as_json_like(pftrace.decode(p)) for w, p in outs.items()}
    same = all(f == forms["protowire"] for f in forms.values())
    print("decoded with perfetto_trace_pb2: the outputs are", "equal" if same else "NOT equal")


if __name__ == "__main__":
    main()
