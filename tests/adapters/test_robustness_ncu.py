"""Nsight Compute CSV corruption corpus: mutations of the real ncu CSVs (details page, details page
in base units, raw page), generated with a fixed seed.

For every variant, conversion either raises TraceError (one line naming the file) or succeeds
with every input record accounted for, counted here independently from the file format: a record
after the header whose first field is a result ID and whose width is a result row's (the header's
on the raw page; at least through Metric Value on the ragged details page) is a result row, every
other non-blank record is foreign.  Then

  metric rows + rule rows in the store + rows in skipped_rows  ==  metric cells / metric and rule
  records of the result rows + foreign records

and ncu_kernels holds one row per distinct result ID.  Any other exception is a bug; so is a
conversion that takes longer than TIME_BOUND seconds.
"""

from __future__ import annotations

import csv
import io
import random
import signal
from collections import Counter
from pathlib import Path

import pytest

from conftest import FIXTURES, need
from tracekit.adapters.base import TraceError
from tracekit.store import Store

pytestmark = pytest.mark.slow  # a corpus of damaged ncu reports

SEED = 20261131
NCU = FIXTURES / "ncu"
BASES = [NCU / "mm_details.csv", NCU / "mm_details_base.csv", NCU / "mm_raw.csv"]
TIME_BOUND = 20
ID_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context",
              "Stream", "Block Size", "Grid Size", "Device", "CC"}
BAD_VALUES = ["n/a", "", "abc", "1.234,5", "866,86", "1 024", "inf", "-inf", "nan", "-", "1e400",
              "99999999999999999999999", "-5", "0x10", "12.5.3", "\u00e9", "(1, 2)", "1,024 (512; 512)",
              "\"", "==PROF== x"]
JUNK = ["==PROF== Connected to process 961", "==WARNING== something", "hello from the program",
        ",,,,", "", "   ", "ID,oops", "0", "0,1,2", '"unterminated', "\x00\x01binary", "Section: x"]


def records(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def write(recs, delimiter=",", lineterminator="\n") -> str:
    out = io.StringIO()
    w = csv.writer(out, delimiter=delimiter, lineterminator=lineterminator, quoting=csv.QUOTE_ALL)
    w.writerows(recs)
    return out.getvalue()


def is_nvtx(h: str) -> bool:
    return "Domain:" in h or h.startswith(("thread Domain", "Id:Domain"))


# -- the corpus ----------------------------------------------------------------------------------
def corpus(tmp: Path):
    """[(path, op, forced format or None)]"""
    rng = random.Random(SEED)
    out = []
    k = 0

    def add(data: bytes, op: str, fmt=None, suffix=".csv"):
        nonlocal k
        k += 1
        p = tmp / f"v{k}{suffix}"
        p.write_bytes(data)
        out.append((p, op, fmt))

    for base in BASES:
        raw = need(base).read_bytes()
        text = raw.decode("utf-8")
        recs = records(text)
        header, body = recs[0], recs[1:]
        for _ in range(40):  # truncation at many offsets
            add(raw[: rng.randrange(len(raw))], "truncate")
        for _ in range(30):  # byte flips
            b = bytearray(raw)
            for _ in range(rng.randrange(1, 6)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            add(bytes(b), "flip")
        for d in (";", "\t", "|"):  # other delimiters
            add(write(recs, delimiter=d).encode(), f"delimiter {d!r}")
        # other encodings, BOM, line ends
        add(text.encode("utf-16"), "utf-16")
        add(text.encode("utf-16-le"), "utf-16-le")
        add(text.encode("utf-16"), "utf-16 forced", "ncu")
        add(b"\xef\xbb\xbf" + raw, "utf-8 BOM")
        add(raw.replace(b"\n", b"\r\n"), "CRLF")
        add(raw.replace(b"\n", b"\r"), "CR")
        i_name = header.index("Kernel Name")
        for enc in ("latin-1", "cp1252", "utf-8"):
            r2 = [header] + [list(r) for r in body]
            for r in r2[1:]:
                if len(r) > i_name and r[i_name]:
                    r[i_name] = r[i_name] + "_\u00e9\u00fc\u00df"
            add(write(r2).encode(enc), f"non-ascii names in {enc}")
        for _ in range(25):  # column mutations, applied to every record
            r2 = [list(r) for r in recs]
            op = rng.choice(["remove", "duplicate", "reorder", "rename"])
            j = rng.randrange(len(header))
            for r in r2:
                if op == "remove" and j < len(r):
                    del r[j]
                elif op == "duplicate" and j < len(r):
                    r.insert(j, r[j])
                elif op == "rename" and r is r2[0]:
                    r[j] = r[j] + " renamed"
            if op == "reorder":
                perm = list(range(len(header)))
                rng.shuffle(perm)
                r2 = [[r[i] for i in perm if i < len(r)] for r in r2]
            add(write(r2).encode(), f"column {op} {header[j]!r}")
        for _ in range(35):  # wrong values in cells
            r2 = [list(r) for r in recs]
            for _ in range(rng.randrange(1, 20)):
                r = r2[rng.randrange(1, len(r2))]
                if not r:
                    continue
                j = rng.randrange(len(r))
                r[j] = rng.choice(BAD_VALUES)
            add(write(r2).encode(), "values")
        for _ in range(10):  # one column entirely of bad values
            r2 = [list(r) for r in recs]
            j = rng.randrange(len(header))
            v = rng.choice(BAD_VALUES)
            for r in r2[1:]:
                if j < len(r):
                    r[j] = v
            add(write(r2).encode(), f"column {header[j]!r} = {v!r}")
        for _ in range(15):  # junk lines interleaved
            lines = text.splitlines(keepends=True)
            for _ in range(rng.randrange(1, 6)):
                lines.insert(rng.randrange(1, len(lines) + 1), rng.choice(JUNK) + "\n")
            add("".join(lines).encode(), "junk lines")
        for _ in range(5):  # junk before the header (program output)
            add(("\n".join(rng.sample(JUNK[:4], 3)) + "\n").encode() + raw, "preamble")
        for _ in range(8):  # duplicated rows
            r2 = [list(r) for r in recs]
            for _ in range(rng.randrange(1, 10)):
                i = rng.randrange(1, len(r2))
                r2.insert(i, list(r2[i]))
            add(write(r2).encode(), "duplicate rows")
        add(write([header]).encode(), "header only")
        add(write([header, body[0]]).encode(), "header + first row")
        add(write(recs + [header] + body[:3]).encode(), "second header")
        add(write([header] + [r[:5] for r in body]).encode(), "short rows")
        add(write([header] + [r + ["x", "y"] for r in body]).encode(), "long rows")
        add(raw[: len(raw) // 2].rsplit(b"\n", 1)[0] + b"\n", "cut at a line end")
        add(raw + b'"0","1"', "cut last row")
    for data, op in ((b"", "empty"), (b"\n\n", "blank"), (b"ID\n", "ID only"),
                     (b'"ID","Process ID"\n"0","1"\n', "no kernel name"),
                     (b'"ID","Kernel Name"\n"0","k"\n', "no metrics"),
                     (b"\xff\xfe\x00\x00garbage", "garbage"), (b"NVR\x00garbage", "bad report")):
        add(data, op, "ncu")
    add(b"NVR\x00garbage", "bad report", None, ".ncu-rep")
    add(b"garbage", "bad report", None, ".ncu-rep")
    return out


# -- independent counting --------------------------------------------------------------------------
def expected(data: bytes):
    """(entries, distinct result IDs) or None when the file is not a readable comma-separated
    ncu table (then only a TraceError is acceptable... or a reading we cannot check)."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        text = data.decode("utf-16")
    else:
        text = data.decode("utf-8", "replace")
        if text.startswith("\ufeff"):
            text = text[1:]
    f = io.StringIO(text, newline="")
    for line in f:
        if line.startswith(('"ID",', "ID,")):
            break
    else:
        return None
    try:
        header = next(csv.reader([line.rstrip("\r\n")]))
        rows = list(csv.reader(f, strict=True))
    except csv.Error:
        return None
    col = {}
    for i, h in enumerate(header):
        col.setdefault(h, i)
    detail = "Metric Name" in col or "Metric Value" in col
    entries = 0
    ids = set()
    if not detail and rows and rows[0] and rows[0][0] == "" and not any(
            rows[0][i] for i in (col.get("ID", 0), col.get("Kernel Name", 0)) if i < len(rows[0])):
        rows = rows[1:]  # the units row
    metric_cols = [i for i, h in enumerate(header) if h not in ID_COLUMNS and not is_nvtx(h)]
    for r in rows:
        if not r or (len(r) == 1 and not r[0].strip()):
            continue
        if detail:
            ok = r[0].isdigit() and col["Metric Value"] + 1 <= len(r) <= len(header) + 1
        else:
            # (one more field is a trailing delimiter only when it is empty)
            ok = r[0].isdigit() and (len(r) == len(header) or (len(r) == len(header) + 1 and r[-1] == ""))
        if not ok:
            entries += 1  # foreign: skipped
            continue
        if detail:
            entries += 1  # a metric, a rule or a row with neither (skipped), or a repeat (skipped)
        elif int(r[0]) in ids:
            entries += 1  # a result ID given again: the row is skipped, not merged
        else:
            entries += sum(1 for i in metric_cols if r[i] != "")
        ids.add(int(r[0]))
    return entries, len(ids), detail


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def test_ncu_corruption_corpus(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no ncu: reports give the documented error
    variants = corpus(tmp_path)
    assert len(variants) >= 400
    outcomes: Counter = Counter()
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        with Store(tmp_path / "c.duckdb") as st:
            for path, op, fmt in variants:
                before = st.one("select count(*) from sources")
                signal.alarm(TIME_BOUND)
                try:
                    summary = st.convert(path, format=fmt)
                except TraceError as e:
                    line = e.one_line()
                    assert "\n" not in line and str(path) in line, (op, line)
                    assert st.one("select count(*) from sources") == before, op
                    outcomes["error"] += 1
                    continue
                except Hang:
                    pytest.fail(f"variant {path.name} ({op}) took more than {TIME_BOUND} s")
                finally:
                    signal.alarm(0)
                sid = summary.source_id
                exp = expected(path.read_bytes())
                if exp is None:
                    outcomes["unverifiable"] += 1
                else:
                    entries, n_ids, detail = exp
                    # metric rows that stand for a cell of the input (not identity columns kept
                    # once per result as metrics)
                    metric_q = ("select count(*) from ncu_metrics where source_id = ? and raw_unit is not null"
                                if detail else
                                "select count(*) from ncu_metrics where source_id = ? and name not in "
                                f"({', '.join(repr(c) for c in sorted(ID_COLUMNS))})")
                    got = st.one(metric_q, [sid]) + st.one(
                        "select count(*) from ncu_rules where source_id = ?", [sid])
                    skipped = st.one("select coalesce(sum(count), 0) from skipped_rows where source_id = ? "
                                     "and split_part(reason, ':', 1) not in ('ncu_kernels', 'devices', "
                                     "'processes')", [sid])
                    kernel_skips = st.one("select coalesce(sum(count), 0) from skipped_rows where "
                                          "source_id = ? and reason like 'ncu_kernels:%'", [sid])
                    assert got + skipped == entries, (path.name, op, got, skipped, entries)
                    assert st.one("select count(*) from ncu_kernels where source_id = ?", [sid]) \
                        + kernel_skips == n_ids, (path.name, op)
                outcomes["partial" if summary.skipped else "clean"] += 1
    finally:
        signal.signal(signal.SIGALRM, old)
    print(f"\nncu corpus: {len(variants)} variants: {dict(outcomes)}")
    assert outcomes["error"] > 50 and outcomes["partial"] > 50
