#!/usr/bin/env python3
"""Differential fuzz of tracekit's fidelity: mutate one value of a real capture, convert, and check
against the mutation itself (known by construction, read with json / sqlite3 / csv) that the value
is stored exactly, or that its loss or change is counted with a reason.

Per variant, the outcome is one of:
  stored     the row is there and the field holds exactly the mutated value (times in exact ns)
  kept       the row is there and the raw value is kept in its `args` (a value the column can't hold:
             `_raw_<field>`, adapters/base.py's one rule, in every adapter)
  repaired   the row is there, changed, and the source's `tracekit_repairs` names the repair
  skipped    the row is not there and `skipped_rows` counts one more row, with a reason
  rejected   the whole input was refused with a one-line error (TraceError)
  LOST       none of the above: a silent loss (a failure)
  CRASH      any other exception (a failure)
Environment variants (kills mid-conversion, concurrent conversions) check that the store is
either as before or has the new source, never damaged, and nothing is left behind.

    python bench/fuzz.py [--seed N] [--kineto N] [--nsys N] [--ncu N] [--env N]

tests/adapters/test_fuzz.py runs it with the CI counts (>= 3,000 variants) and asserts 0 LOST, 0 CRASH.
Bases: fixtures/kineto/matmul.json.gz, fixtures/nsys/matmul.sqlite, fixtures/ncu/mm_raw.csv (real
H200 captures, fixtures/README.md).
"""

from __future__ import annotations

import argparse
import collections
import csv
import gzip
import io
import json
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

import duckdb

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "fixtures"
KINETO_BASE = FIX / "kineto" / "matmul.json.gz"
NSYS_BASE = FIX / "nsys" / "matmul.sqlite"
NCU_BASE = FIX / "ncu" / "mm_raw.csv"
NSYS_BIG = FIX / "nsys" / "decode_b1.sqlite"

# ------------------------------------------------------------------------------------------------
# value catalogs


def _text(rng: random.Random) -> str:
    pools = ["abc", "aten::mm", "名前", "😀", "\u00e9\u0301", "tab\there", "new\nline", "quote\"q", "back\\slash",
             "\x1b[31m", "\x00nul", "\u2028", "\ufeff", " ", "", "x" * rng.choice([1, 300, 5000])]
    return "".join(rng.choice(pools) for _ in range(rng.randint(1, 3)))


def _us_number(rng: random.Random):
    """(JSON text, exact ns or None when out of tracekit's range) of a time in µs."""
    kind = rng.randrange(10)
    if kind < 4:
        v = rng.randrange(0, 10**13)
        return str(v), v * 1000
    if kind < 7:
        ip, fp = rng.randrange(0, 10**12), rng.randrange(0, 1000)
        d = rng.choice([1, 2, 3])
        text = f"{ip}.{str(fp).zfill(3)[:d]}"
        return text, int((Decimal(text) * 1000).to_integral_value())
    if kind == 7:  # sub-ns digits: rounded half to even
        text = f"{rng.randrange(0, 10**9)}.{rng.randrange(0, 10**6):06d}"
        return text, int((Decimal(text) * 1000).to_integral_value())
    if kind == 8:
        text = rng.choice(["18446744073709551621", "9223372036854775807", "-18446744073709551621",
                           "1e300", "4611686018427387904", "123456789012345678901234567890"])
        return text, None
    text = f"{rng.randrange(1, 9999)}.{rng.randrange(0, 99)}e{rng.randrange(-3, 6)}"
    return text, int((Decimal(text) * 1000).to_integral_value())


def _json_value(rng: random.Random, depth: int = 0):
    k = rng.randrange(9)
    if k == 0:
        return rng.randrange(-2**63, 2**63)
    if k == 1:
        return rng.choice([2**64 + 5, -2**70, 10**30])
    if k == 2:
        return rng.random() * 10 ** rng.randrange(-5, 20)
    if k == 3:
        return _text(rng)
    if k == 4:
        return rng.choice([None, True, False])
    if k == 5 and depth < 4:
        return [_json_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if k == 6 and depth < 4:
        return {_text(rng)[:20] or "k": _json_value(rng, depth + 1) for _ in range(rng.randrange(3))}
    return rng.randrange(0, 100)


# ------------------------------------------------------------------------------------------------
# helpers


class Result(collections.Counter):
    def __init__(self):
        super().__init__()
        self.failures: list[str] = []

    def add(self, fmt: str, outcome: str, what: str) -> None:
        self[(fmt, outcome)] += 1
        if outcome in ("LOST", "CRASH"):
            self.failures.append(f"{fmt}: {outcome}: {what}")


class _Conn:
    """The adapter's output as in-memory Arrow tables behind a DuckDB connection, plus the source's
    accounting: what the store would hold (the store adds only generic steps: nesting, views)."""

    def __init__(self, ad, out: dict):
        import pyarrow as pa

        from tracekit import schema

        self.con = duckdb.connect()
        for t in schema.TABLES:
            batches = out.get(t.name) or []
            tbl = pa.Table.from_batches(batches, schema=t.arrow) if batches else t.arrow.empty_table()
            self.con.register(t.name, tbl)
        acc = ad.accounting
        meta = (ad.source or {}).get("metadata") or {}
        if isinstance(meta, str):
            meta = json.loads(meta)
        self.skipped = acc.total_skipped
        self.repairs = meta.get("tracekit_repairs") or {}

    def execute(self, q, params=None):
        return self.con.execute(q, params or [])

    def close(self):
        self.con.close()


def _convert(path: Path, db: Path = None):
    """(outcome 'ok' | 'rejected', connection or None, error text)."""
    from tracekit.adapters.base import TraceError
    from tracekit.adapters.detect import adapter_for

    try:
        ad = adapter_for(path)
        out: dict = {}
        for name, batch in ad.read(path, 0, None):
            out.setdefault(name, []).append(batch)
    except TraceError as e:
        return "rejected", None, e.one_line()
    return "ok", _Conn(ad, out), ""


def _source_info(con) -> tuple[int, dict]:
    return con.skipped, con.repairs


# ------------------------------------------------------------------------------------------------
# Kineto: one value of one X event


KINETO_TABLE = {"kernel": "kernels", "cpu_op": "events", "user_annotation": "events",
                "cuda_runtime": "api_calls", "cuda_driver": "api_calls", "gpu_memset": "memops",
                "gpu_user_annotation": "events"}


def kineto_variant(rng: random.Random, doc: dict, base_skipped: int, work: Path) -> tuple[str, str]:
    evs = [i for i, e in enumerate(doc["traceEvents"]) if e.get("ph") == "X" and e.get("cat") in KINETO_TABLE]
    i = rng.choice(evs)
    d = json.loads(json.dumps(doc))
    e = d["traceEvents"][i]
    table = KINETO_TABLE[e["cat"]]
    field = rng.choice(["name", "ts", "dur", "pid", "tid", "arg", "arg"])
    marker_ts = "987654321.125"
    raw_patch = None
    expect = None
    if field != "ts":
        e["ts"] = "__TS__"
        raw_patch = ('"__TS__"', marker_ts)
    if field == "name":
        v = rng.choice([_text(rng), _text(rng), 123, None, "__SURROGATE__"])
        if v == "__SURROGATE__":
            e["name"] = "a__SURR__b"
            expect = "a\ufffdb"
        else:
            e["name"] = v
            expect = v
    elif field in ("ts", "dur"):
        text, ns = _us_number(rng)
        if rng.random() < 0.15:
            text, ns = rng.choice([('"12.5"', 12500), ('"abc"', None), ("null", None), ("true", None),
                                   ("[]", None), ("{}", None), ("-5", None if field == "dur" else -5000)])
        e[field] = f"__{field.upper()}__"
        expect = ns
        e["name"] = "fuzz-locator"
        raw_patch2 = (f'"__{field.upper()}__"', text)
    elif field in ("pid", "tid"):
        v = rng.choice([rng.randrange(-2**31, 2**31), 2**40, 2**63 - 1, 2**64 + 1, "12", "rank0", "0x1f", None, 1.5])
        e[field] = v
        expect = v
    else:
        key = "fuzz key " + _text(rng)[:10]
        v = _json_value(rng)
        e.setdefault("args", {})[key] = v
        expect = (key, v)
    text = json.dumps(d, ensure_ascii=rng.random() < 0.5)
    if raw_patch:
        text = text.replace(*raw_patch, 1)
    if field in ("ts", "dur"):
        text = text.replace(*raw_patch2, 1)
    text = text.replace("__SURR__", "\\ud800")
    p = work / "k.json"
    p.write_text(text, encoding="utf-8", errors="surrogatepass")
    what = f"event {i} ({e['cat']}) {field} = {text[text.find(str(expect)[:20]) if expect else 0:][:0]}{str(expect)[:60]!r}"
    outcome, con, err = _convert(p, work / "k.duckdb")
    if outcome == "rejected":
        return "rejected", what + " | " + err
    try:
        skipped, repairs = _source_info(con)
        if field in ("ts", "dur"):
            rows = con.execute(f"SELECT start_ns, dur_ns, args FROM {table} WHERE name = 'fuzz-locator'").fetchall()
        else:
            ids = {"kernels": "device_id, stream_id", "memops": "device_id, stream_id",  # a GPU op's: GPU, stream
                   "events": "coalesce(pid, device_id), coalesce(tid, stream_id)"}.get(table, "pid, tid")
            rows = con.execute(f"SELECT name, {ids}, args FROM {table} WHERE start_ns = 987654321125").fetchall()
        if not rows:
            return ("skipped" if skipped > base_skipped else "LOST"), what
        r = rows[0]
        if field in ("ts", "dur"):
            got = r[0] if field == "ts" else r[1]
            if expect is not None and got == expect:
                return "stored", what
            return ("repaired" if repairs else "LOST"), what + f" -> {got}"
        name, pid, tid, args = r
        a = json.loads(args) if args else {}
        if field == "name":
            if name == expect or (isinstance(expect, (int, float)) and not isinstance(expect, bool)
                                  and name == json.dumps(expect)):
                return "stored", what
            if expect is not None and not isinstance(expect, str) and a.get("name") == expect:
                return "kept", what
            if name is None and expect is None:
                return "stored", what
            return ("repaired" if repairs else "LOST"), what + f" -> {name!r}"
        if field in ("pid", "tid"):
            got = pid if field == "pid" else tid
            if got == expect or (isinstance(expect, str) and expect.isdigit() and got == int(expect)) or (
                    isinstance(expect, str) and expect.lower().startswith("0x") and got == int(expect, 16)):
                return "stored", what
            if _same_json(a.get(field), expect) or _same_json(a.get("_raw_" + field), expect):
                return "kept", what
            if expect is None and got is None:
                return "stored", what
            return ("repaired" if repairs else "LOST"), what + f" -> {got!r}"
        key, v = expect
        if key in a and _same_json(a[key], v):
            return "stored", what
        return ("repaired" if repairs else "LOST"), what + f" -> {a.get(key, '<missing>')!r}"
    finally:
        con.close()


def _same_json(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return float(a) == float(b) or (a != a and b != b)
        except (TypeError, ValueError):
            return False
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    return a == b and type(a) is type(b) or (isinstance(a, int) and isinstance(b, int) and a == b)


# ------------------------------------------------------------------------------------------------
# nsys: one cell of one row of the export

NSYS_CELLS = {  # table: (marker column, marker value, store table, store marker column, {column: store column})
    "CUPTI_ACTIVITY_KIND_KERNEL": ("gridZ", 777, "kernels", "grid_z",
                                   {"start": "start_ns", "end": "end_ns", "deviceId": "device_id",
                                    "streamId": "stream_id", "correlationId": "correlation_id",
                                    "gridX": "grid_x", "blockX": "block_x",
                                    "registersPerThread": "registers_per_thread", "demangledName": "name"}),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("returnValue", 4242, "api_calls", "return_value",
                                    {"start": "start_ns", "end": "end_ns", "correlationId": "correlation_id",
                                     "nameId": "name"}),
}


def _nsys_value(rng: random.Random):
    k = rng.randrange(8)
    if k < 3:
        return rng.randrange(0, 2**40)
    if k == 3:
        return rng.choice([-1, -2**40, 2**63 - 1, -2**63])
    if k == 4:
        return rng.choice([1.5, 2.0**70, -0.25])
    if k == 5:
        return rng.choice(["abc", "12", "", _text(rng)])
    if k == 6:
        return rng.choice([b"\x00\x01blob", b""])
    return None


def nsys_variant(rng: random.Random, base_skipped: int, work: Path, base_db: Path) -> tuple[str, str]:
    table = rng.choice(list(NSYS_CELLS))
    mcol, mval, stable, smcol, cols = NSYS_CELLS[table]
    col = rng.choice(list(cols))
    p = work / "n.sqlite"
    shutil.copyfile(NSYS_BASE, p)
    c = sqlite3.connect(p)
    rowids = [r[0] for r in c.execute(f"SELECT rowid FROM {table}")]
    rid = rng.choice(rowids)
    v = _nsys_value(rng)
    if col in ("demangledName", "nameId") and rng.random() < 0.6:
        # a name: an existing string id, a dangling id, or a new string
        if rng.random() < 0.5:
            sid = 900000 + rng.randrange(1000)
            txt = _text(rng)
            c.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (sid, txt))
            v, expect_name = sid, txt
        else:
            v, expect_name = 99999999, None
    else:
        expect_name = None
    c.execute(f"UPDATE {table} SET {mcol} = ? WHERE rowid = ?", (mval, rid))
    try:
        c.execute(f"UPDATE {table} SET {col} = ? WHERE rowid = ?", (v, rid))
    except sqlite3.IntegrityError:  # a NOT NULL column: a value instead
        v = rng.choice([-1, 2**63 - 1, "abc", 1.5])
        c.execute(f"UPDATE {table} SET {col} = ? WHERE rowid = ?", (v, rid))
    stored_v = c.execute(f"SELECT {col}, typeof({col}) FROM {table} WHERE rowid = ?", (rid,)).fetchall()[0]
    if col in ("demangledName", "nameId") and expect_name is None and stored_v[1] == "integer":
        hit = c.execute("SELECT value FROM StringIds WHERE id = ?", (stored_v[0],)).fetchall()
        expect_name = hit[0][0] if hit else None  # an id that exists names that string
    c.commit()
    c.close()
    what = f"{table} rowid {rid}: {col} = {stored_v[0]!r} ({stored_v[1]})"
    outcome, con, err = _convert(p, work / "n.duckdb")
    if outcome == "rejected":
        return "rejected", what + " | " + err
    try:
        skipped, repairs = _source_info(con)
        scol = cols[col]
        rows = con.execute(f"SELECT {scol}, args FROM {stable} WHERE {smcol} = {mval}").fetchall()
        if not rows:
            return ("skipped" if skipped > base_skipped else "LOST"), what
        got, args = rows[0]
        a = json.loads(args) if args else {}
        val, typ = stored_v
        if scol == "name":
            if expect_name is not None and got == expect_name:
                return "stored", what
            if repairs:
                return "repaired", what
            return "LOST", what + f" -> {got!r}"
        if typ == "integer" and got == val:
            return "stored", what
        if typ == "null" and got is None:
            return "stored", what
        if col in a and (a[col] == val or str(a[col]) == str(val)):
            return "kept", what
        raw = a.get(f"_raw_{col}", a.get(f"_raw_{scol}"))  # the one rule (adapters/base.py: fit)
        if raw is not None and (raw == val or str(raw) == str(val) or (
                isinstance(val, bytes) and raw == "hex:" + val.hex().upper())):
            return "kept", what
        if repairs:
            return "repaired", what + f" -> {got!r}"
        return "LOST", what + f" -> {got!r}"
    finally:
        con.close()


# ------------------------------------------------------------------------------------------------
# ncu: one cell of the raw page


def ncu_variant(rng: random.Random, rows: list, base_skipped: int, work: Path) -> tuple[str, str]:
    header = rows[0]
    data_idx = [i for i, r in enumerate(rows) if r and r[0].isdigit()]
    ri = rng.choice(data_idx)
    new = [list(r) for r in rows]
    r = new[ri]
    col = rng.randrange(len(header))
    name = header[col]
    k = rng.randrange(6)
    v = (_text(rng) if k < 2 else str(rng.randrange(-10**12, 10**12)) if k == 2 else
         f"{rng.random() * 1e6:.3f}" if k == 3 else rng.choice(["n/a", "1,234.5", "1e400", "-0", "  7  "]) if k == 4
         else "")
    v = v.replace("\x00", "")  # csv cannot carry NUL
    r[col] = v
    rid = r[0]
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(new)
    p = work / "c.csv"
    p.write_text(buf.getvalue())
    what = f"result row {ri} column {name!r} = {v[:60]!r}"
    outcome, con, err = _convert(p, work / "c.duckdb")
    if outcome == "rejected":
        return "rejected", what + " | " + err
    try:
        skipped, repairs = _source_info(con)
        if col == 0:
            ok = v.isdigit() and con.execute(f"SELECT count(*) FROM ncu_kernels WHERE id = {int(v)}").fetchall()[0][0]
            if ok:
                return "stored", what
            return ("skipped" if skipped > base_skipped else "LOST"), what
        if not rid.isdigit():
            return "skipped" if skipped > base_skipped else "LOST", what
        if v == "":
            return "stored", what  # an empty cell: nothing to keep (not collected)
        got = con.execute("SELECT raw_value FROM ncu_metrics WHERE id = ? AND name = ?", [int(rid), name]).fetchall()
        if any(g[0] == v for g in got):
            return "stored", what
        kcols = {"Kernel Name": "name", "Process Name": "process_name", "Stream": "stream_id",
                 "Context": "context_id", "Device": "device_id", "Process ID": "pid"}
        if name in kcols:
            g = con.execute(f"SELECT {kcols[name]} FROM ncu_kernels WHERE id = ?", [int(rid)]).fetchall()
            want = v
            if isinstance(g and g[0][0], int):
                try:
                    want = int(v.strip())
                except ValueError:
                    pass
            if g and g[0][0] == want:
                return "stored", what
        if name == "CC":  # the first result's CC is its device's compute capability
            g = con.execute("SELECT compute_capability FROM devices").fetchall()
            if any(x[0] == v.strip() for x in g):
                return "stored", what
        if repairs:
            return "repaired", what
        return "LOST", what + f" -> {got[:1]}"
    finally:
        con.close()


# ------------------------------------------------------------------------------------------------
# environment: kills and concurrency


def _snapshot(db: Path):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT source_id, path FROM sources ORDER BY 1").fetchall(), \
            con.execute("SELECT count(*) FROM kernels").fetchall()[0][0]
    finally:
        con.close()


def env_variant(rng: random.Random, k: int, work: Path) -> tuple[str, str]:
    import tracekit

    d = work / f"env{k}"
    d.mkdir()
    db = d / "s.duckdb"
    tracekit.convert([str(KINETO_BASE)], db=str(db))
    before = _snapshot(db)
    exe = [sys.executable, "-m", "tracekit", "convert", "-q"]
    if k % 2 == 0:  # kill -9 at a random moment of a conversion into the store
        proc = subprocess.Popen([*exe, str(NSYS_BIG), "--db", str(db)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.05, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        after = _snapshot(db)
        if after != before and not (len(after[0]) == 2 and after[0][0] == before[0][0]):
            return "LOST", f"kill: store changed to {after}"
        tracekit.convert([str(NSYS_BASE)], db=str(db))  # the next conversion works and cleans up
        left = sorted(p.name for p in d.iterdir())
        if left != ["s.duckdb"]:
            return "LOST", f"kill: leftovers {left}"
        return "stored", "kill"
    procs = [subprocess.Popen([*exe, str(p), "--db", str(db), "--allow-duplicate"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)  # (KINETO_BASE is in the store already)
             for p in (NSYS_BASE, NCU_BASE, KINETO_BASE)]
    codes = [p.wait(timeout=300) for p in procs]
    after = _snapshot(db)
    if codes != [0, 0, 0] or len(after[0]) != 4:
        return "LOST", f"concurrent: codes {codes}, sources {after[0]}"
    if sorted(p.name for p in d.iterdir()) != ["s.duckdb"]:
        return "LOST", "concurrent: leftovers"
    return "stored", "concurrent"


# ------------------------------------------------------------------------------------------------

def run(seed: int = 0, n_kineto: int = 1500, n_nsys: int = 1000, n_ncu: int = 500, n_env: int = 20,
        log=None) -> Result:
    rng = random.Random(seed)
    res = Result()
    doc = json.loads(gzip.open(KINETO_BASE).read())
    with tempfile.TemporaryDirectory(prefix="tkfuzz") as tmp:
        work = Path(tmp)
        def base_skipped(p):
            _, c, _ = _convert(p)
            n = c.skipped
            c.close()
            return n

        kin_skipped, nsys_skipped, ncu_skipped = (base_skipped(p) for p in (KINETO_BASE, NSYS_BASE, NCU_BASE))
        with open(NCU_BASE, newline="") as f:
            ncu_rows = list(csv.reader(f))
        plan = [("kineto", n_kineto), ("nsys", n_nsys), ("ncu", n_ncu), ("env", n_env)]
        for fmt, n in plan:
            t = time.perf_counter()
            for k in range(n):
                try:
                    if fmt == "kineto":
                        out, what = kineto_variant(rng, doc, kin_skipped, work)
                    elif fmt == "nsys":
                        out, what = nsys_variant(rng, nsys_skipped, work, work / "bn.duckdb")
                    elif fmt == "ncu":
                        out, what = ncu_variant(rng, ncu_rows, ncu_skipped, work)
                    else:
                        out, what = env_variant(rng, k, work)
                except Exception as e:  # noqa: BLE001 - a traceback is a finding
                    import traceback

                    out, what = "CRASH", f"{type(e).__name__}: {e}\n{traceback.format_exc()[-800:]}"
                res.add(fmt, out, what)
            if log:
                log(f"{fmt}: {n} variants in {time.perf_counter() - t:.1f} s: "
                    + ", ".join(f"{o} {c}" for (f, o), c in sorted(res.items()) if f == fmt))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kineto", type=int, default=1500)
    ap.add_argument("--nsys", type=int, default=1000)
    ap.add_argument("--ncu", type=int, default=500)
    ap.add_argument("--env", type=int, default=20)
    a = ap.parse_args()
    res = run(a.seed, a.kineto, a.nsys, a.ncu, a.env, log=print)
    total = sum(res.values())
    print(f"{total} variants: " + ", ".join(f"{o} {sum(c for (f, oo), c in res.items() if oo == o)}"
                                            for o in ("stored", "kept", "repaired", "skipped", "rejected",
                                                      "LOST", "CRASH")))
    for f in res.failures[:30]:
        print("  " + f)
    sys.exit(1 if res.failures else 0)


if __name__ == "__main__":
    main()
