"""Chrome JSON writer, and the guards that keep integers outside int64 out of Perfetto's reader."""

from __future__ import annotations

import math
import re

import orjson

from .sink import Sink
from .tracks import Process, Track

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

_DUMPS = orjson.dumps


_BIG_DIGITS = re.compile(r"-?\d{19,}")


def has_big_int(text: str) -> bool:
    """True when text has a digit run outside int64 (Perfetto reads such numbers as -1.0)."""
    return any(not INT64_MIN <= int(m) <= INT64_MAX for m in _BIG_DIGITS.findall(text))


_DIGIT_TO_0 = bytes.maketrans(b"123456789", b"000000000")
_NINETEEN = b"0" * 19


def maybe_big(data: bytes) -> bool:
    """True when data may hold an integer outside int64: a run of 19+ digits (found at C speed
    on a copy with every digit turned into '0') whose value is out of range.  Digit runs inside
    strings or fractions only cost the careful per-line path."""
    t = data.translate(_DIGIT_TO_0)
    i = t.find(_NINETEEN)
    n = len(t)
    while i >= 0:
        j = i + 19
        while j < n and t[j] == 48:
            j += 1
        v = int(data[i:j])
        if i > 0 and data[i - 1] == 45:  # '-'
            v = -v
        if not INT64_MIN <= v <= INT64_MAX:
            return True
        i = t.find(_NINETEEN, j)
    return False


def _fix_lines(lines: list[str]) -> list[str]:
    """JSON event lines whose args hold integers outside int64: those become strings."""
    import json

    out = []
    for ln in lines:
        if has_big_int(ln):
            ev = json.loads(ln)
            if "args" in ev:
                ev["args"] = _fix_ints(ev["args"])
            ln = orjson.dumps(ev).decode()
        out.append(ln)
    return out


def fix_big_ints(text: str) -> str:
    """Args JSON whose integers outside int64 become strings (Perfetto reads them as -1.0)."""
    import json

    try:
        d = json.loads(text)
    except ValueError:
        return text
    return orjson.dumps(_fix_ints(d)).decode()


def _fix_ints(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v if -INT64_MAX - 1 <= v <= INT64_MAX else str(v)
    if isinstance(v, dict):
        return {k: _fix_ints(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_fix_ints(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v

class JsonWriter:
    """Chrome JSON, object form.  Event text is built by DuckDB around the pid/tid (``pre`` and
    ``post``), so Python only places each row on its track and concatenates; metadata events (M)
    go at the end, once every track is known."""

    text = True  # wants the SQL-built pre/post columns

    def __init__(self, sink: Sink):
        self.sink = sink
        self.buf: list[str] = []
        self.first = True
        self.slices = self.flows = self.samples = 0
        self.procs: list[Process] = []
        self.tracks: list[Track] = []
        sink.write(b'{"traceEvents":[\n')

    # tracks
    def on_process(self, p: Process):
        self.procs.append(p)

    def on_thread(self, t: Track):
        self.tracks.append(t)
        t.end_packet = f'"pid":{t.pid},"tid":{t.tid},'

    def on_counter_track(self, t: Track, name, key, unit):
        pass

    def end(self, track: Track, ts: int):
        pass

    # events (slices: appended to buf directly by _Exporter._stream, the hot loop)
    def counter(self, t: Track, name: str, key: str, ts: int, value: float):
        self.buf.append(_DUMPS({"ph": "C", "name": name, "pid": t.pid, "ts": ts / 1000,
                                "args": {key: value}}).decode())
        self.samples += 1
        if len(self.buf) >= 8192:
            self.flush()

    def flush(self):
        if not self.buf:
            return
        data = ",\n".join(self.buf).encode("utf-8", "surrogatepass")
        if maybe_big(data):
            data = ",\n".join(_fix_lines(self.buf)).encode("utf-8", "surrogatepass")
        self.buf = []
        if b"\x7f" in data:  # Perfetto's tokenizer rejects raw DEL; it only occurs inside strings
            data = data.replace(b"\x7f", b"\\u007f")
        if not self.first:
            data = b",\n" + data
        self.first = False
        self.sink.write(data)

    def finish(self, top: dict):
        for p in self.procs:
            for ev in ({"ph": "M", "name": "process_name", "pid": p.pid, "ts": 0, "args": {"name": p.name}},
                       {"ph": "M", "name": "process_sort_index", "pid": p.pid, "ts": 0,
                        "args": {"sort_index": p.sort}}):
                self.buf.append(_DUMPS(ev).decode())
        for t in self.tracks:
            for ev in ({"ph": "M", "name": "thread_name", "pid": t.pid, "tid": t.tid, "ts": 0,
                        "args": {"name": t.name}},
                       {"ph": "M", "name": "thread_sort_index", "pid": t.pid, "tid": t.tid, "ts": 0,
                        "args": {"sort_index": t.sort}}):
                self.buf.append(_DUMPS(ev).decode())
        self.flush()
        # the keys after the events on one line: no "},\n" there, which line-oriented readers
        # (tracekit's Kineto adapter among them) take for an event boundary
        tail = b"\n]"
        for k, v in top.items():
            tail += b"," + _DUMPS(k) + b":" + _DUMPS(v)
        self.sink.write(tail + b"}\n")
