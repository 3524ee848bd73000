"""Nsight Systems corruption corpus: mutations of real exports, generated with a fixed seed.

The bases are fixtures/nsys/decode_b1.sqlite and graphs.sqlite, trimmed (the big activity tables
keep their first rows) so that the corpus stays fast, with the NOT NULL constraints of the tables
the mutations touch relaxed (so NULLs can be written).  Every variant is a copy changed with
sqlite3 or at the byte level.

For every variant, conversion either raises TraceError (one line naming the file) or succeeds with
every row of every activity table accounted for: rows in the store that came from the table +
rows counted in skipped_rows under a reason naming the table = rows of the (mutated) table,
counted here independently with sqlite3.  Any other exception is a bug; so is a conversion that
takes longer than TIME_BOUND seconds.
"""

from __future__ import annotations

import random
import shutil
import signal
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from conftest import FIXTURES, need
from tracekit.adapters.base import TraceError
from tracekit.store import Store

pytestmark = pytest.mark.slow  # a corpus of damaged nsys exports

SEED = 20261130
BASES = [FIXTURES / "nsys" / "decode_b1.sqlite", FIXTURES / "nsys" / "graphs.sqlite"]
TIME_BOUND = 20  # seconds per variant

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
GRAPH = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
CUPTI_OVERHEAD = "CUPTI_ACTIVITY_KIND_OVERHEAD"
ACTIVITY = [KERNEL, RUNTIME, MEMCPY, MEMSET, SYNC, "NVTX_EVENTS", "OSRT_API", "PROFILER_OVERHEAD"]
#: tables the mutations touch besides the activity tables
DESCRIPTIONS = ["StringIds", "ThreadNames", "PROCESSES", "TARGET_INFO_GPU", "TARGET_INFO_CUDA_DEVICE",
                "META_DATA_EXPORT", "TARGET_INFO_SESSION_START_TIME", "TARGET_INFO_SYSTEM_ENV"]
#: activity tables → (store query counting the rows they became, tables sharing that query)
GROUPS = [
    ({KERNEL, GRAPH}, "select count(*) from kernels where source_id = ?"),
    ({MEMCPY, MEMSET}, "select count(*) from memops where source_id = ?"),
    ({RUNTIME}, "select (select count(*) from api_calls where source_id = $1) + (select count(*) "
                "from events where source_id = $1 and category = 'cuda_backtrace')"),
    ({SYNC}, "select count(*) from syncs where source_id = ?"),
    ({"NVTX_EVENTS"}, "select count(*) from events where source_id = ? and category in ('nvtx', 'nvtx_mark')"),
    ({"OSRT_API"}, "select count(*) from events where source_id = ? and category = 'osrt'"),
    ({"PROFILER_OVERHEAD", CUPTI_OVERHEAD}, "select count(*) from events where source_id = ? and category = 'overhead'"),
    ({"GPU_METRICS"}, "select count(*) from counters where source_id = ?"),
]
KEEP_ROWS = 80  # rows kept of the big activity tables
BAD_VALUES = [None, "x", "", "12.5", "1e3", -1, 0, 1.5, -1.5e300, 1.5e300, 9223372036854775807,
              -9223372036854775808, 9223372036854775000, b"\xff\x00blob", "\u00e9\u4e2d",
              4294967295, 2**40]


# -- bases ---------------------------------------------------------------------------------------
def make_base(src: Path, dst: Path) -> Path:
    shutil.copyfile(need(src), dst)
    con = sqlite3.connect(dst)
    have = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
    for t in ACTIVITY + DESCRIPTIONS:
        if t not in have:
            continue
        if t in (KERNEL, RUNTIME):
            con.execute(f'delete from "{t}" where rowid > {KEEP_ROWS}')
        # a copy without NOT NULL / PRIMARY KEY constraints (types kept), so NULLs can be written
        con.execute(f'create table "tmp_{t}" as select * from "{t}"')
        con.execute(f'drop table "{t}"')
        con.execute(f'alter table "tmp_{t}" rename to "{t}"')
    con.commit()
    con.execute("vacuum")
    con.close()
    return dst


def columns(con, t) -> list[str]:
    return [r[1] for r in con.execute(f'pragma table_info("{t}")')]


# -- mutations with sqlite3 ----------------------------------------------------------------------
def mutate_sql(rng: random.Random, con: sqlite3.Connection) -> str:
    have = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
    acts = [t for t in ACTIVITY if t in have]
    descs = [t for t in DESCRIPTIONS if t in have]
    t = rng.choice(descs if descs and rng.random() < 0.3 else acts)
    cols = columns(con, t)
    rowids = [r[0] for r in con.execute(f'select rowid from "{t}"')]
    some = rng.sample(rowids, min(len(rowids), rng.randrange(1, 6))) if rowids else []
    where = f"rowid in ({', '.join(map(str, some))})" if some else "1"
    q = f'"{t}"'
    op = rng.choice(["type", "type", "type", "null", "negative", "reverse", "huge", "drop_column",
                     "rename_column", "extra_column", "drop_table", "empty", "duplicate",
                     "dangling", "missing_strings", "utf8", "all_type"])
    if op in ("type", "all_type"):
        c = rng.choice(cols)
        v = rng.choice(BAD_VALUES)
        con.execute(f'update {q} set "{c}" = ? where {where if op == "type" else "1"}', [v])
        return f"{op}:{t}.{c}={v!r}"
    if op == "null":
        c = rng.choice(cols)
        con.execute(f'update {q} set "{c}" = NULL where {where}')
        return f"null:{t}.{c}"
    if op in ("negative", "reverse", "huge"):
        if "start" not in cols:
            return mutate_sql(rng, con)
        if op == "negative":
            con.execute(f'update {q} set start = -abs(start) where {where}')
        elif op == "reverse" and "end" in cols:
            con.execute(f'update {q} set "end" = start - 10 where {where}')
        else:
            big = rng.choice([9223372036854775807, -9223372036854775808, 9223372036854775000])
            c = rng.choice(["start", "end"] if "end" in cols else ["start"])
            con.execute(f'update {q} set "{c}" = ? where {where}', [big])
        return f"{op}:{t}"
    if op == "drop_column":
        c = rng.choice(cols)
        if len(cols) == 1:
            return mutate_sql(rng, con)
        con.execute(f'alter table {q} drop column "{c}"')
        return f"drop_column:{t}.{c}"
    if op == "rename_column":
        c = rng.choice(cols)
        con.execute(f'alter table {q} rename column "{c}" to "{c}_renamed"')
        return f"rename_column:{t}.{c}"
    if op == "extra_column":
        v = rng.choice(BAD_VALUES)
        con.execute(f'alter table {q} add column "extra {rng.randrange(9)}\'x" text')
        con.execute(f'update {q} set "{columns(con, t)[-1]}" = ?', [v])
        return f"extra_column:{t}"
    if op == "drop_table":
        con.execute(f"drop table {q}")
        return f"drop_table:{t}"
    if op == "empty":
        con.execute(f"delete from {q}")
        return f"empty:{t}"
    if op == "duplicate":
        con.execute(f"insert into {q} select * from {q} where {where}")
        return f"duplicate:{t}"
    if op == "dangling":
        ref = [c for c in cols if c in ("nameId", "demangledName", "shortName", "mangledName", "textId")]
        if not ref:
            return mutate_sql(rng, con)
        c = rng.choice(ref)
        con.execute(f'update {q} set "{c}" = ? where {where}', [rng.choice([99999999, -5, 2**62])])
        return f"dangling:{t}.{c}"
    if op == "missing_strings":
        if "StringIds" not in have:
            return mutate_sql(rng, con)
        con.execute("delete from StringIds where id in (select id from StringIds order by random() limit 50)")
        return "missing_strings"
    # utf8: invalid UTF-8 in a text value
    tt = rng.choice([x for x in ("StringIds", "NVTX_EVENTS", "PROCESSES", "META_DATA_EXPORT") if x in have]
                    or ["StringIds"])
    if tt not in have:
        return mutate_sql(rng, con)
    tcols = [c for c in columns(con, tt) if c in ("value", "text", "name")]
    if not tcols:
        return mutate_sql(rng, con)
    con.execute(f'update "{tt}" set "{tcols[0]}" = cast(x\'41ff42c3\' as text) '
                f'where rowid in (select rowid from "{tt}" order by random() limit 5)')
    return f"utf8:{tt}"


# -- the corpus ----------------------------------------------------------------------------------
def corpus(tmp: Path):
    """[(path, op, extra)]: extra is 'lock' (hold an exclusive lock while converting), 'nsys'
    (pass format='nsys'), or None."""
    rng = random.Random(SEED)
    bases = [make_base(b, tmp / f"base{i}.sqlite") for i, b in enumerate(BASES)]
    out = []
    k = 0

    def new(suffix=".sqlite") -> Path:
        nonlocal k
        k += 1
        return tmp / f"v{k}{suffix}"

    for base in bases:
        raw = base.read_bytes()
        for _ in range(60):  # truncation at many offsets (header, schema pages, data pages)
            p = new()
            cut = rng.choice([rng.randrange(0, 4096), rng.randrange(0, len(raw))])
            p.write_bytes(raw[:cut])
            out.append((p, "truncate", None))
        for _ in range(60):  # byte flips
            p = new()
            b = bytearray(raw)
            for _ in range(rng.randrange(1, 9)):
                pos = rng.choice([rng.randrange(0, 100), rng.randrange(len(b))])
                b[pos] = rng.randrange(256)
            p.write_bytes(bytes(b))
            out.append((p, "flip", None))
        for _ in range(110):  # sqlite-level mutations, one to three each
            p = new()
            shutil.copyfile(base, p)
            con = sqlite3.connect(p)
            ops = [mutate_sql(rng, con) for _ in range(rng.choice([1, 1, 2, 3]))]
            con.commit()
            con.close()
            out.append((p, "+".join(ops), None))
        p = new()
        shutil.copyfile(base, p)
        out.append((p, "locked", "lock"))
        p = new()
        shutil.copyfile(base, p)
        out.append((p, "clean", None))
    # a SQLite file that is not nsys
    p = new()
    con = sqlite3.connect(p)
    con.execute("create table foo (a, b)")
    con.execute("insert into foo values (1, 2)")
    con.commit()
    con.close()
    out.append((p, "not_nsys", None))
    p = new()
    con = sqlite3.connect(p)
    con.execute("create table StringIds (id, value)")  # looks like nsys, has nothing else
    con.commit()
    con.close()
    out.append((p, "only_stringids", None))
    p = new()
    sqlite3.connect(p).close()  # a valid SQLite file with no tables (0 bytes) / an empty schema
    out.append((p, "empty_sqlite", None))
    # a directory, an empty file, other formats
    d = new("")
    d.mkdir()
    out.append((d, "directory", None))
    d2 = new(".sqlite")
    d2.mkdir()
    out.append((d2, "directory", "nsys"))
    for data, op in ((b"", "empty"), (b"SQLite format 3\x00", "magic_only"),
                     (b"SQLite format 3\x00" + bytes(200), "header_zeros"),
                     (b'{"traceEvents": []}', "json"), (b"ID,Process ID\n", "csv"),
                     (bytes(range(256)) * 40, "binary")):
        p = new()
        p.write_bytes(data)
        out.append((p, op, None))
        p = new(".bin")
        p.write_bytes(data)
        out.append((p, op + "_forced", "nsys"))
    # .nsys-rep / .qdrep that are garbage (no nsys installed: the documented one-line error)
    for data, op in ((b"NVIDIA Tegra Profiler Report" + bytes(rng.randrange(256) for _ in range(500)), "rep_magic"),
                     (bytes(rng.randrange(256) for _ in range(2000)), "rep_garbage"),
                     (b"", "rep_empty")):
        for suffix in (".nsys-rep", ".qdrep"):
            p = new(suffix)
            p.write_bytes(data)
            out.append((p, op, None))
    return out


# -- independent counting --------------------------------------------------------------------------
def input_counts(path: Path) -> dict[str, int] | None:
    """Rows per activity table, read with plain sqlite3; None when sqlite3 cannot read the file."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            have = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
            return {t: con.execute(f'select count(*) from "{t}"').fetchone()[0]
                    for g, _ in GROUPS for t in g if t in have}
        finally:
            con.close()
    except sqlite3.Error:
        return None


def reason_table(reason: str) -> str:
    return reason.split(":", 1)[0].split(".", 1)[0]


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def test_nsys_corruption_corpus(tmp_path, monkeypatch):
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nsys: the report variants give the documented error
    variants = corpus(tmp_path)
    assert len(variants) >= 400
    outcomes: Counter = Counter()
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        with Store(tmp_path / "c.duckdb") as st:
            for path, op, extra in variants:
                before = st.one("select count(*) from sources")
                lock = None
                if extra == "lock":
                    lock = sqlite3.connect(path, timeout=0)
                    lock.execute("begin exclusive")
                    lock.execute(f'delete from "{KERNEL}" where rowid = 1')  # uncommitted
                signal.alarm(TIME_BOUND)
                try:
                    summary = st.convert(path, format=extra if extra == "nsys" else None)
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
                    if lock is not None:
                        lock.rollback()
                        lock.close()
                n_in = input_counts(path)
                sid = summary.source_id
                if n_in is not None:
                    skipped = Counter()
                    for reason, count in st.rows("select reason, count from skipped_rows where source_id = ?", [sid]):
                        skipped[reason_table(reason)] += count
                    for tables, q in GROUPS:
                        want = sum(n_in.get(t, 0) for t in tables)
                        got = st.one(q, [sid]) + sum(skipped[t] for t in tables)
                        assert got == want, (path.name, op, sorted(tables), got, want)
                else:
                    outcomes["unverifiable"] += 1
                outcomes["partial" if summary.skipped else "clean"] += 1
    finally:
        signal.signal(signal.SIGALRM, old)
    print(f"\nnsys corpus: {len(variants)} variants: {dict(outcomes)}")
    assert outcomes["error"] > 50 and outcomes["partial"] > 100
