"""Scaled benchmark inputs built from real captures (bench/run.py builds them on first use).

* ``replicate_kineto(src, dst, copies)``: a Kineto trace whose events are ``copies`` back-to-back
  copies of the source's events, each shifted in time by the source's span (rounded up to whole
  µs, so the decimal text of every ``ts`` keeps its digits) and given fresh ids (``correlation``,
  ``External id``, flow ``id`` + copy × (the source's largest id + 1), so that ids grow as they do
  in a capture that is ``copies`` times longer: copy 9 of a trace whose ids reach 910,330 ends at
  9.1 M, one more digit, where a step of 10^8 made them 9-10 digits and the replica costlier per
  byte than a real capture).  Written as torch.profiler writes it (one event over several lines,
  the same top-level keys), gzipped.
* ``replicate_nsys(src, dst, kernels)``: an nsys SQLite export with at least ``kernels`` kernel
  rows: every activity table with a time range (kernels, memcpy, memset, sync, runtime, NVTX,
  OS runtime) replicated the same way (times shifted by the span, correlationId + copy × (the
  largest correlationId + 1)).
* ``tiny_kineto(dst, events)``: a synthetic Kineto trace of ``events`` tiny events (the shape of a
  launch-bound loop: groups of five, an ``aten::add`` cpu_op holding two short cpu_ops and a
  ``cudaLaunchKernel``, and the kernel it launches, 1-4 µs each, minimal ``args``), written as
  torch.profiler writes events; the case "millions of tiny events" of issue 24.

VERSION names the replication rule; bench/run.py puts it in the names of the inputs it caches, so
a change of rule builds them again.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sqlite3
import sys
from pathlib import Path

import msgspec

_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_NUMBERS = re.compile(rb'"(ts|id|correlation|External id|external id)": (\d+)')
_TS_US = re.compile(rb'"ts": (\d+)')
VERSION = 2


def _read(path: Path) -> bytes:
    data = Path(path).read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def split_kineto(raw: bytes) -> tuple[bytes, bytes, bytes]:
    """(text up to and including the '[' of traceEvents, the events text, the rest from ']')."""
    m = _EVENTS_KEY.search(raw)
    if not m:
        raise ValueError("no traceEvents array")
    p = len(raw)
    while True:  # the ']' that closes the array: what follows it is the rest of the object
        p = raw.rfind(b"]", 0, p)
        rest = raw[p + 1:].strip()
        try:
            if rest == b"}" or (rest[:1] == b"," and msgspec.json.decode(b"{" + rest[1:]) is not None):
                break
        except msgspec.DecodeError:
            pass
    return raw[:m.end()], raw[m.end():p].strip(), raw[p:]


def replicate_kineto(src: Path, dst: Path, copies: int) -> dict:
    raw = _read(src)
    head, body, tail = split_kineto(raw)
    del raw
    ts = [int(x) for x in _TS_US.findall(body)]
    span_us = max(ts) - min(ts) + 1000  # whole µs, plus a 1 ms pause between copies
    n_events = len(msgspec.json.decode(b"[" + body + b"]", type=list[msgspec.Raw]))
    id_step = max((int(m.group(2)) for m in _NUMBERS.finditer(body) if m.group(1) != b"ts"), default=0) + 1
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".part")
    with gzip.open(tmp, "wb", compresslevel=1) as f:
        f.write(head + b"\n  ")
        for k in range(copies):
            if k:
                shift, ids = k * span_us, k * id_step

                def sub(m, shift=shift, ids=ids):
                    add = shift if m.group(1) == b"ts" else ids
                    return b'"%s": %d' % (m.group(1), int(m.group(2)) + add)

                f.write(b",\n  ")
                f.write(_NUMBERS.sub(sub, body))
            else:
                f.write(body)
        f.write(b"\n  " + tail)
    tmp.replace(dst)
    return {"events": n_events * copies, "copies": copies}


def replicate_nsys(src: Path, dst: Path, kernels: int) -> dict:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".part")
    shutil.copyfile(src, tmp)
    con = sqlite3.connect(tmp)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    timed = []
    for t in tables:
        cols = [(r[1], r[5]) for r in con.execute(f'PRAGMA table_info("{t}")')]
        names = {c for c, _ in cols}
        if {"start", "end"} <= names and t != "TARGET_INFO_SESSION_START_TIME":
            timed.append((t, cols))
    n0 = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    ranges = [con.execute(f'SELECT min(start), max("end") FROM "{t}"').fetchone() for t, _ in timed]
    lo = min(r[0] for r in ranges if r[0] is not None)
    hi = max(r[1] for r in ranges if r[1] is not None)
    span = hi - lo + 1_000_000
    copies = -(-kernels // n0)
    id_step = max((con.execute(f'SELECT max("correlationId") FROM "{t}"').fetchone()[0] or 0
                   for t, cols in timed if "correlationId" in {c for c, _ in cols}), default=0) + 1
    con.execute("CREATE TEMP TABLE copies (k INTEGER)")
    con.executemany("INSERT INTO copies VALUES (?)", [(k,) for k in range(1, copies)])
    for t, cols in timed:
        keep = [c for c, pk in cols if not pk]  # an INTEGER PRIMARY KEY renumbers itself
        expr = []
        for c in keep:
            if c in ("start", "end"):
                expr.append(f'"{c}" + k * {span}')
            elif c == "correlationId":
                expr.append(f'"{c}" + k * {id_step}')
            else:
                expr.append(f'"{c}"')
        con.execute(f'CREATE TEMP TABLE src AS SELECT * FROM "{t}"')
        con.execute(f'INSERT INTO "{t}" ({", ".join(chr(34) + c + chr(34) for c in keep)}) '
                    f'SELECT {", ".join(expr)} FROM src, copies ORDER BY k')
        con.execute("DROP TABLE src")
        con.commit()
    n = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.close()
    tmp.replace(dst)
    return {"kernels": n, "copies": copies}


def tiny_kineto(dst: Path, events: int) -> dict:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".part")
    head = (b'{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "NVIDIA H200", '
            b'"computeMajor": 9, "computeMinor": 0, "numSms": 132}],\n  "traceEvents": [\n')
    group = (
        '  {{\n    "ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 7, "tid": 7,\n'
        '    "ts": {t0}.000, "dur": 8.000,\n    "args": {{"External id": {c}}}\n  }},\n'
        '  {{\n    "ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 7, "tid": 7,\n'
        '    "ts": {t0}.500, "dur": 1.000,\n    "args": {{"External id": {c}}}\n  }},\n'
        '  {{\n    "ph": "X", "cat": "cpu_op", "name": "aten::view", "pid": 7, "tid": 7,\n'
        '    "ts": {t2}.000, "dur": 1.000,\n    "args": {{"External id": {c}}}\n  }},\n'
        '  {{\n    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7,\n'
        '    "ts": {t4}.000, "dur": 3.000,\n    "args": {{"External id": {c}, "correlation": {c}}}\n  }},\n'
        '  {{\n    "ph": "X", "cat": "kernel", "name": "add_kernel", "pid": 0, "tid": 7,\n'
        '    "ts": {t6}.000, "dur": 2.000,\n    "args": {{"External id": {c}, "correlation": {c}, '
        '"device": 0, "stream": 7, "grid": [1, 1, 1], "block": [128, 1, 1]}}\n  }}')
    groups = -(-events // 5)
    with gzip.open(tmp, "wb", compresslevel=1) as f:
        f.write(head)
        t = 1_000_000_000
        for g0 in range(0, groups, 10_000):
            parts = []
            for g in range(g0, min(groups, g0 + 10_000)):
                t0 = t + g * 10
                parts.append(group.format(t0=t0, t2=t0 + 2, t4=t0 + 4, t6=t0 + 6, c=g + 1))
            f.write(((",\n" if g0 else "") + ",\n".join(parts)).encode())
        f.write(b'\n  ]\n}\n')
    tmp.replace(dst)
    return {"events": groups * 5}


def main(argv: list[str]) -> None:
    """``python bench/inputs.py kineto SRC DST COPIES``, ``nsys SRC DST KERNELS`` or
    ``tiny DST EVENTS`` (a synthetic trace of tiny events, no source): bench/run.py
    builds its inputs in this separate process, so that its own memory stays small (a child's peak
    RSS as the kernel reports it includes the peak of the process that forked it)."""
    if len(argv) == 3 and argv[0] == "tiny":
        print(json.dumps(tiny_kineto(Path(argv[1]), int(argv[2]))))
        return
    if len(argv) != 4 or argv[0] not in ("kineto", "nsys"):
        raise SystemExit(main.__doc__)
    fn = replicate_kineto if argv[0] == "kineto" else replicate_nsys
    print(json.dumps(fn(Path(argv[1]), Path(argv[2]), int(argv[3]))))
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
