"""Perfetto TrackEvent protobuf writer (hand-encoded with tracekit.export.protowire)."""

from __future__ import annotations

from .. import protowire as pw
from .sink import Sink
from .tracks import Process, Track

# Perfetto proto field numbers (protos/perfetto/trace/trace_packet.proto, track_event/*.proto)
TP_TIMESTAMP, TP_TRACK_EVENT, TP_SEQ_ID, TP_INTERNED, TP_SEQ_FLAGS, TP_TRACK_DESC = 8, 11, 10, 12, 13, 60
TP_FIRST_ON_SEQ = 87
SEQ_CLEARED, SEQ_NEEDS = 1, 2
TD_UUID, TD_NAME, TD_PROCESS, TD_THREAD, TD_PARENT, TD_COUNTER = 1, 2, 3, 4, 5, 8
TD_CHILD_ORDERING, TD_SIBLING_RANK = 11, 12
PD_PID, PD_NAME, PD_SORT = 1, 6, 3
THD_PID, THD_TID, THD_NAME, THD_SORT = 1, 2, 5, 3
CD_UNIT, CD_UNIT_NAME = 3, 6
TE_CAT_IIDS, TE_NAME_IID, TE_TYPE, TE_TRACK, TE_DOUBLE_VALUE = 3, 10, 9, 11, 44
TE_DEBUG, TE_FLOW_IDS, TE_TERM_FLOW_IDS, TE_CORRELATION = 4, 47, 48, 52
TYPE_BEGIN, TYPE_END, TYPE_INSTANT, TYPE_COUNTER = 1, 2, 3, 4
ID_CATS, ID_NAMES, ID_ARG_NAMES = 1, 2, 3
DA_NAME_IID, DA_LEGACY_JSON = 1, 9
SEQ = 1


class ProtoWriter:
    """Perfetto TrackEvent protobuf: one packet sequence, interned names, categories and arg
    names; descriptors written before the first event of each track."""

    text = False

    def __init__(self, sink: Sink):
        self.sink = sink
        self.buf: list[bytes] = []
        self.nbuf = 0
        self.slices = self.flows = self.samples = 0
        self.names: dict[str, int] = {}
        self.cats: dict[str, int] = {}
        self.arg_names: dict[str, int] = {}
        self.seq_tail = pw.f_varint(TP_SEQ_ID, SEQ) + pw.f_varint(TP_SEQ_FLAGS, SEQ_NEEDS)
        first = pw.f_varint(TP_SEQ_ID, SEQ) + pw.f_varint(TP_SEQ_FLAGS, SEQ_CLEARED) \
            + pw.f_bool(TP_FIRST_ON_SEQ, True)
        self._packet(first)

    def _packet(self, body: bytes):
        self.buf.append(b"\x0a" + pw.varint(len(body)) + body)  # Trace.packet = 1
        if len(self.buf) >= 8192:
            self.flush()

    def flush(self):
        if self.buf:
            self.sink.write(b"".join(self.buf))
            self.buf = []

    # tracks
    def on_process(self, p: Process):
        desc = pw.f_varint(TD_UUID, p.uuid) + pw.f_bytes(
            TD_PROCESS, pw.f_varint(PD_PID, p.pid) + pw.f_str(PD_NAME, p.name)
            + pw.f_varint(PD_SORT, p.sort & 0x7FFFFFFF)) + pw.f_varint(TD_CHILD_ORDERING, 3)
        self._packet(pw.f_varint(TP_TIMESTAMP, 0) + pw.f_bytes(TP_TRACK_DESC, desc))

    def on_thread(self, t: Track):
        desc = pw.f_varint(TD_UUID, t.uuid) + pw.f_varint(TD_PARENT, t.process.uuid) + pw.f_bytes(
            TD_THREAD, pw.f_varint(THD_PID, t.pid) + pw.f_varint(THD_TID, t.tid) + pw.f_str(THD_NAME, t.name)
            + pw.f_varint(THD_SORT, t.sort & 0x7FFFFFFF)) + pw.f_varint(TD_SIBLING_RANK, t.sort & 0x7FFFFFFF)
        self._packet(pw.f_varint(TP_TIMESTAMP, 0) + pw.f_bytes(TP_TRACK_DESC, desc))
        t.end_packet = pw.f_bytes(TP_TRACK_EVENT, pw.f_varint(TE_TYPE, TYPE_END) + pw.f_varint(TE_TRACK, t.uuid)) \
            + self.seq_tail

    def on_counter_track(self, t: Track, name, key, unit):
        cd = pw.f_str(CD_UNIT_NAME, unit) if unit else b""
        desc = pw.f_varint(TD_UUID, t.uuid) + pw.f_varint(TD_PARENT, t.process.uuid) \
            + pw.f_str(TD_NAME, t.name) + pw.f_bytes(TD_COUNTER, cd)
        self._packet(pw.f_varint(TP_TIMESTAMP, 0) + pw.f_bytes(TP_TRACK_DESC, desc))
        t.end_packet = pw.f_bytes(TP_TRACK_EVENT, pw.f_varint(TE_TYPE, TYPE_COUNTER)
                                  + pw.f_varint(TE_TRACK, t.uuid))

    # interning
    def _intern(self, table: dict, s: str, new: list) -> int:
        iid = table.get(s)
        if iid is None:
            iid = table[s] = len(table) + 1
            new.append((iid, s))
        return iid

    def _interned_data(self, new_names, new_cats, new_args) -> bytes:
        body = b""
        for iid, s in new_cats:
            body += pw.f_bytes(ID_CATS, pw.f_varint(1, iid) + pw.f_str(2, s))
        for iid, s in new_names:
            body += pw.f_bytes(ID_NAMES, pw.f_varint(1, iid) + pw.f_str(2, s))
        for iid, s in new_args:
            body += pw.f_bytes(ID_ARG_NAMES, pw.f_varint(1, iid) + pw.f_str(2, s))
        return pw.f_bytes(TP_INTERNED, body)

    # events
    def end(self, t: Track, ts: int):
        self._packet(pw.f_varint(TP_TIMESTAMP, ts) + t.end_packet)

    def slice(self, t: Track, ts: int, name, cat, args: str | None, out_links=None, in_link=None,
              instant=False):
        """args: a JSON object as text, written as one debug annotation "args" whose
        legacy_json_value trace processor flattens into debug.args.* (like JSON's args.*)."""
        new_names, new_cats, new_args = [], [], []
        te = pw.f_varint(TE_TYPE, TYPE_INSTANT if instant else TYPE_BEGIN) + pw.f_varint(TE_TRACK, t.uuid) \
            + pw.f_varint(TE_NAME_IID, self._intern(self.names, name or "[No name]", new_names)) \
            + pw.f_varint(TE_CAT_IIDS, self._intern(self.cats, cat or "other", new_cats))
        if args:
            te += pw.f_bytes(TE_DEBUG, pw.f_varint(DA_NAME_IID, self._intern(self.arg_names, "args", new_args))
                             + pw.f_str(DA_LEGACY_JSON, args))
        if out_links is not None:
            for fid in out_links:
                te += pw.f_fixed64(TE_FLOW_IDS, fid)
            self.flows += len(out_links)
        elif in_link is not None:
            te += pw.f_fixed64(TE_TERM_FLOW_IDS, in_link)
        pkt = pw.f_varint(TP_TIMESTAMP, ts) + pw.f_bytes(TP_TRACK_EVENT, te)
        if new_names or new_cats or new_args:
            pkt += self._interned_data(new_names, new_cats, new_args)
        self._packet(pkt + self.seq_tail)
        self.slices += 1

    def counter(self, t: Track, name: str, key: str, ts: int, value: float):
        self._packet(pw.f_varint(TP_TIMESTAMP, ts) + pw.f_bytes(
            TP_TRACK_EVENT, pw.f_varint(TE_TYPE, TYPE_COUNTER) + pw.f_varint(TE_TRACK, t.uuid)
            + pw.f_double(TE_DOUBLE_VALUE, value)) + self.seq_tail)
        self.samples += 1

    def finish(self, top: dict):
        self.flush()
