"""Nothing lost, nothing leaked (issue 22): each finding of the attack run reproduced and fixed.

The inputs are the bundled real captures, mutated here (synthetic edge cases: real captures do not
contain them)."""

from __future__ import annotations

import errno
import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

import tracekit
from conftest import FIXTURES, need

KINETO = FIXTURES / "kineto" / "matmul.json.gz"
NSYS = FIXTURES / "nsys" / "matmul.sqlite"
NCU_RAW = FIXTURES / "ncu" / "lat_raw.csv.gz"
EXE = [sys.executable, "-m", "tracekit.cli"]


def cli(*args):
    from tracekit.cli import main

    r = CliRunner().invoke(main, [str(a) for a in args])
    return r.exit_code, r.stdout, r.stderr


def run(*args, **kw):
    r = subprocess.run([*EXE, *map(str, args)], capture_output=True, text=True, **kw)
    return r.returncode, r.stdout, r.stderr


def events_doc() -> dict:
    return json.loads(gzip.open(need(KINETO)).read())


def tables(db) -> dict:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                for t in ("kernels", "events", "api_calls", "memops", "flows")}
    finally:
        con.close()


# -- 1. the compiled scanner and integers beyond 2^64 ------------------------------------------

@pytest.mark.parametrize("ts", ["18446744073709551621", "36893488147419103237", "-18446744073709551621"])
def test_huge_ts_is_skipped_not_wrapped(tmp_path, ts):
    doc = events_doc()
    text = json.dumps(doc).replace('"ph": "X", "cat": "kernel"', '"ph": "X", "cat": "kernel", "ts_": 0', 1)
    k = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    raw = json.dumps(k)
    mutated = raw.replace(f'"ts": {json.dumps(k["ts"])}', f'"ts": {ts}')
    assert mutated != raw
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc).replace(raw, mutated, 1))
    del text
    [s] = tracekit.convert([str(p)], db=str(tmp_path / "s.duckdb"))
    assert s.skipped.get("'X' event with ts out of range") == 1
    con = duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM kernels").fetchall()[0][0] == 5  # 6 - the mutated one
    assert con.execute("SELECT min(start_ns) FROM kernels").fetchall()[0][0] > 10**9


# -- 2-4, 6. the store under concurrency, failures and leftovers -------------------------------

@pytest.mark.slow
def test_concurrent_converts_keep_every_source(tmp_path):
    db = tmp_path / "c.duckdb"
    inputs = [FIXTURES / "kineto" / "decode_b1.json.gz", FIXTURES / "nsys" / "decode_b1.sqlite",
              FIXTURES / "kineto" / "ddp_rank0.json.gz", NCU_RAW]
    procs = [subprocess.Popen([*EXE, "convert", str(need(p)), "--db", str(db), "-q"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for p in inputs]
    assert [p.wait(timeout=300) for p in procs] == [0] * len(inputs)
    con = duckdb.connect(str(db), read_only=True)
    got = sorted(r[0] for r in con.execute("SELECT path FROM sources").fetchall())
    con.close()
    assert got == sorted(str(p) for p in inputs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.duckdb"]  # no lock, copy or part left


def test_failed_replace_keeps_the_old_store(tmp_path):
    db = tmp_path / "s.duckdb"
    assert cli("convert", KINETO, "--db", db)[0] == 0
    before = tables(db)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, out, err = cli("convert", bad, "--db", db, "--replace")
    assert code == 2 and "bad.json" in err
    assert tables(db) == before
    # and with a good input beside the bad one, --replace still keeps the old store whole
    code, out, err = cli("convert", NSYS, bad, "--db", db, "--replace")
    assert code == 2 and "not replaced" in err and tables(db) == before


def test_failed_convert_writes_no_store(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[")
    code, out, err = cli("convert", bad, "--db", tmp_path / "new.duckdb")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]


def test_store_never_overwrites_an_input(tmp_path):
    t = tmp_path / "t.sqlite"
    shutil.copyfile(need(NSYS), t)
    data = t.read_bytes()
    code, _, err = cli("convert", t, "--db", t, "--replace")
    assert code == 2 and "is also an input" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli("convert", KINETO, "--db", t, "--replace")
    assert code == 2 and "SQLite database" in err and "refusing to replace" in err
    assert t.read_bytes() == data


def test_leftovers_of_killed_conversions_are_removed(tmp_path):
    db = tmp_path / "s.duckdb"
    dead = 2**22 + 12345  # above pid_max's default: no such process
    (tmp_path / f".s.duckdb.tmp-{dead}").write_bytes(b"x" * 1000)
    (tmp_path / f".s.duckdb.tmp-{dead}.wal").write_bytes(b"x")
    parts = tmp_path / f".s.duckdb.parts-{dead}"
    parts.mkdir()
    (parts / "0.duckdb").write_bytes(b"x" * 1000)
    mine = tmp_path / f".s.duckdb.tmp-{os.getpid()}-other"  # a live process's: kept
    mine.write_bytes(b"x")
    assert cli("convert", KINETO, "--db", db)[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["s.duckdb", mine.name])


# -- 5. environment faults: one line, never a traceback ---------------------------------------

def test_sql_output_on_a_full_disk():
    st = FIXTURES / "kineto" / "matmul.json.gz"
    with CliRunner().isolated_filesystem():
        assert cli("convert", st, "--db", "s.duckdb")[0] == 0
        for fmt in ("table", "csv", "json", "parquet"):
            code, out, err = cli("sql", "--db", "s.duckdb", "select * from kernels", "--format", fmt,
                                 "-o", "/dev/full")
            assert code == 2 and err.startswith("tracekit: error: ") and len(err.strip().splitlines()) == 1, (fmt, err)
            assert "/dev/full" in err


def test_export_on_a_full_or_readonly_disk(tmp_path, monkeypatch):
    db = tmp_path / "s.duckdb"
    assert cli("convert", KINETO, "--db", db)[0] == 0
    real_open = open

    def no_space(path, mode="r", *a, **kw):
        if "w" in mode and str(path).endswith(".tmp"):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, mode, *a, **kw)

    monkeypatch.setattr("builtins.open", no_space)
    code, out, err = cli("export", "perfetto", "--db", db, "-o", tmp_path / "t.json")
    assert code == 2 and "Read-only file system" in err and len(err.strip().splitlines()) == 1
    monkeypatch.undo()
    code, out, err = cli("export", "perfetto", "--db", db, "-o", "/dev/full")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert Path("/dev/full").is_char_device()


def test_convert_on_a_full_disk(tmp_path, monkeypatch):
    db = tmp_path / "s.duckdb"
    assert cli("convert", KINETO, "--db", db)[0] == 0
    before = tables(db)

    def full(*a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device", str(a[1]) if len(a) > 1 else None)

    monkeypatch.setattr(shutil, "copyfile", full)
    code, out, err = cli("convert", NSYS, "--db", db)
    assert code == 2 and "No space left on device" in err and "free some space" in err
    assert len(err.strip().splitlines()) == 1
    monkeypatch.undo()
    assert tables(db) == before


def test_unwritable_parquet_dir_converts_nothing(tmp_path):
    db = tmp_path / "s.duckdb"
    (tmp_path / "afile").write_text("x")
    code, out, err = cli("convert", KINETO, "--db", db, "--parquet", tmp_path / "afile" / "sub")
    assert code == 2 and "--parquet" in err and len(err.strip().splitlines()) == 1
    assert not db.exists()


@pytest.mark.parametrize("damage", ["version_text", "version_missing", "column_dropped", "table_dropped"])
def test_damaged_store_is_one_line(tmp_path, damage):
    db = tmp_path / "s.duckdb"
    assert cli("convert", KINETO, "--db", db)[0] == 0
    con = duckdb.connect(str(db))
    con.execute({"version_text": "UPDATE tracekit_meta SET value = 'three' WHERE key = 'schema_version'",
                 "version_missing": "DELETE FROM tracekit_meta",
                 "column_dropped": "ALTER TABLE kernels DROP COLUMN grid_x",
                 "table_dropped": "DROP TABLE memops"}[damage])
    con.close()
    for args in (("sql", "--db", db, "select count(*) from hotspots"), ("diagnose", "--db", db),
                 ("convert", NSYS, "--db", db)):
        code, out, err = cli(*args)
        assert code == 2 and err.startswith("tracekit: error: ") and len(err.strip().splitlines()) == 1, (args, err)


# -- 7. dangling references, repeated ids ------------------------------------------------------

def test_nsys_dangling_string_ids_are_counted(tmp_path):
    p = tmp_path / "d.sqlite"
    shutil.copyfile(need(NSYS), p)
    c = sqlite3.connect(p)
    c.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 99999999 WHERE rowid = 1")
    c.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = 99999997 WHERE rowid = 1")
    c.commit()
    c.close()
    tracekit.convert([str(p)], db=str(tmp_path / "s.duckdb"))
    st = tracekit.open(tmp_path / "s.duckdb")
    rep = json.loads(st.one("SELECT metadata->>'tracekit_repairs' FROM sources"))
    assert rep["CUPTI_ACTIVITY_KIND_KERNEL.demangledName: ids not found in StringIds (name left NULL)"] == 1
    assert rep["CUPTI_ACTIVITY_KIND_RUNTIME.nameId: ids not found in StringIds (name left NULL)"] == 1
    assert st.one("SELECT count(*) FROM kernels") == 6  # the rows are kept, their names counted as repaired
    assert st.one("SELECT count(*) FROM api_calls WHERE name IS NULL") == 1
    st.close()


@pytest.mark.parametrize("page", ["raw", "details"])
def test_ncu_repeated_result_ids_are_not_merged(tmp_path, page):
    src = need(FIXTURES / "ncu" / f"lat_{page}.csv.gz")
    lines = gzip.open(src, "rt").read().splitlines(True)
    rows = [ln for ln in lines if ln.startswith('"0"')]  # the first result's rows
    p = tmp_path / f"dup_{page}.csv"
    p.write_text("".join(lines + rows))  # the first result again, after all the others
    [s] = tracekit.convert([str(p)], db=str(tmp_path / "s.duckdb"))
    [s0] = tracekit.convert([str(src)], db=str(tmp_path / "s0.duckdb"))
    assert s.converted == s0.converted
    assert sum(n for r, n in s.skipped.items() if "result ID" in r) == len(rows)


# -- 8, 10, 11. hostile documents ---------------------------------------------------------------

def _doc_with(tmp_path, name, extra_event: str) -> Path:
    text = gzip.open(need(KINETO)).read().decode()
    i = text.index('"traceEvents"')
    j = text.index("[", i) + 1
    p = tmp_path / name
    p.write_text(text[:j] + extra_event + "," + text[j:])
    return p


@pytest.mark.parametrize("depth", [1000, 20000])
def test_deep_nesting_skips_one_event(tmp_path, depth):
    ev = ('{"ph": "X", "cat": "cpu_op", "name": "deep", "pid": 1, "tid": 1, "ts": 1, "dur": 1, '
          '"args": {"x": ' + "[" * depth + "]" * depth + "}}")
    p = _doc_with(tmp_path, "deep.json", ev)
    [s] = tracekit.convert([str(p)], db=str(tmp_path / "s.duckdb"))
    [s0] = tracekit.convert([str(KINETO)], db=str(tmp_path / "s0.duckdb"))
    assert s.converted == s0.converted
    assert s.skipped["event nested deeper than the JSON decoder allows (~1000 levels)"] == 1


@pytest.mark.slow
def test_decompression_bomb_is_refused_in_bounded_memory(tmp_path):
    text = gzip.open(need(KINETO)).read()
    j = text.index(b"[", text.index(b'"traceEvents"')) + 1
    p = tmp_path / "bomb.json.gz"
    with gzip.open(p, "wb", compresslevel=9) as f:
        f.write(text[:j])
        for _ in range(64):
            f.write(b" " * (16 * 2**20))  # 1 GiB of whitespace, ~1 MB of gzip
        f.write(text[j:])
    # in a fresh process that reports its own peak (RUSAGE_CHILDREN would be the largest child so far)
    prog = ("import resource, sys\nfrom tracekit.cli import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit as e:\n    code = e.code\n"
            "print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, code)")
    r = subprocess.run([sys.executable, "-c", prog, "convert", str(p), "--db", str(tmp_path / "s.duckdb"), "-q"],
                       capture_output=True, text=True)
    peak_kb, code = r.stdout.split()[-2:]
    assert code == "2" and "decompression bomb" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    # refused after reading at most the allowed inflation (100x the file) and a block: not 1 GiB
    import re as _re

    read, size = (int(x.replace(",", "")) for x in _re.search(r"\(([\d,]+) bytes from ([\d,]+)\)", r.stderr).groups())
    assert read <= 100 * size + 8 * 2**20 + 2**20 and read < 2**28, (read, size)
    # the process's peak: 0.3-0.5 GB alone, up to 1.5 GB measured under CI's load (before: 2.5 GB for
    # this 1 GiB bomb, 4.3 GB for a 2 GiB one)
    assert int(peak_kb) / 1024 < 2048, peak_kb


@pytest.mark.parametrize("kind", [pytest.param("utf8_bom", marks=pytest.mark.slow), "utf16", pytest.param("utf16le_nobom", marks=pytest.mark.slow),
                                  "gzip_junk", pytest.param("lone_surrogate", marks=pytest.mark.slow)])
def test_encodings_and_wrappers_read_like_the_plain_file(tmp_path, kind):
    import codecs

    base = gzip.open(need(KINETO)).read()
    p = tmp_path / f"{kind}.json"
    if kind == "utf8_bom":
        p.write_bytes(codecs.BOM_UTF8 + base)
    elif kind == "utf16":
        p.write_bytes(base.decode().encode("utf-16"))
    elif kind == "utf16le_nobom":
        p.write_bytes(base.decode().encode("utf-16-le"))
    elif kind == "gzip_junk":
        p = tmp_path / "j.json.gz"
        p.write_bytes(gzip.compress(base) + b"\x00garbage appended by a copy\n")
    else:
        p.write_bytes(base.replace(b'"name": "aten::', b'"name": "\\ud800aten::', 1))
    tracekit.convert([str(p)], db=str(tmp_path / "s.duckdb"))
    tracekit.convert([str(KINETO)], db=str(tmp_path / "s0.duckdb"))
    a, b = tables(tmp_path / "s.duckdb"), tables(tmp_path / "s0.duckdb")
    if kind == "lone_surrogate":
        names = [r for r in a["events"] if "\ufffd" in str(r)]
        assert len(names) == 1
    else:
        assert a == b
    st = tracekit.open(tmp_path / "s.duckdb")
    rep = st.one("SELECT metadata->>'tracekit_repairs' FROM sources")
    st.close()
    assert rep is not None  # the repair is noted


# -- 9. --strict is a gate: fails on losses only -------------------------------------------------

def test_strict_passes_real_captures_and_records_why(tmp_path):
    db = tmp_path / "s.duckdb"
    code, out, err = cli("convert", need(FIXTURES / "nsys" / "decode_b1.sqlite"),
                         need(FIXTURES / "kineto" / "decode_b1.json.gz"), "--db", db, "--strict")
    assert code == 0, err
    st = tracekit.open(db)
    assert st.one("SELECT count(*) FROM skipped_rows WHERE NOT by_design") == 0
    assert st.one("SELECT count(*) FROM skipped_rows WHERE by_design") >= 3
    st.close()


# -- 12. the SQL is sandboxed ---------------------------------------------------------------------

@pytest.mark.parametrize("query", [
    "COPY (SELECT 1) TO '{tmp}/x.csv'",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "ATTACH '{tmp}/other.duckdb' AS o",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "RESET lock_configuration",
    "SET lock_configuration = false",
])
def test_sql_is_sandboxed(tmp_path, query):
    db = tmp_path / "s.duckdb"
    assert cli("convert", KINETO, "--db", db)[0] == 0
    q = query.format(tmp=tmp_path)
    code, out, err = cli("sql", "--db", db, q)
    assert code == 2 and "query failed" in err, (q, out, err)
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "other.duckdb").exists()
    st = tracekit.open(db)
    with pytest.raises(duckdb.Error):
        st.sql(q).fetchall()
    assert st.one("SELECT count(*) FROM hotspots") > 0  # the views still work
    st.close()


def test_sql_unsafe_and_outputs(tmp_path):
    db = tmp_path / "s.duckdb"
    assert cli("convert", KINETO, "--db", db)[0] == 0
    code, out, err = cli("sql", "--db", db, "--unsafe", "SELECT count(*) AS n FROM glob('/etc/host*')")
    assert code == 0, err
    for fmt, name in (("csv", "h.csv"), ("parquet", "h.parquet"), ("json", "h.json")):
        code, out, err = cli("sql", "--db", db, "select * from hotspots", "--format", fmt, "-o", tmp_path / name)
        assert code == 0 and (tmp_path / name).stat().st_size > 100, (fmt, err)
    st = tracekit.open(db, sandbox=False)
    assert st.sql("SELECT count(*) FROM glob('/etc/host*')").fetchall()[0][0] >= 1
    st.close()


# -- 13. names printed on a terminal, evidence pasted into a shell -----------------------------

def test_control_characters_are_escaped_and_evidence_is_shell_safe(tmp_path):
    doc = events_doc()
    bad = "ker\x1b[2J\x1b]0;pwned\x07nel`touch PWNED`$(touch PWNED2)\"'\r"
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["name"] = bad + e["name"]
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    db = tmp_path / "s.duckdb"
    assert cli("convert", p, "--db", db)[0] == 0
    code, out, err = cli("sql", "--db", db, "select name from kernels limit 1")
    assert code == 0 and "\x1b" not in out and "\r" not in out and "\x07" not in out
    assert "\\x1b[2J" in out
    code, out, err = cli("diagnose", "--db", db, "--evidence", "1")
    assert code == 0 and "\x1b" not in out and "\r" not in out
    cmds, cur = [], None  # the command under each "evidence (...):" line: lines indented 4
    for line in out.splitlines():
        if line.startswith("  evidence (") and line.endswith(":"):
            cur = []
            cmds.append(cur)
        elif cur is not None and line.startswith("    ") and not line.startswith("      "):
            cur.append(line)
        else:
            cur = None
    cmds = ["\n".join(c) for c in cmds if c]
    assert cmds and all(c.lstrip().startswith(f"tracekit sql --db {db} ") for c in cmds), cmds[:1]
    for cmd in cmds:  # pasted into a shell, with `tracekit` a no-op: nothing in it runs
        subprocess.run(["bash", "-c", "tracekit() { :; }; " + cmd], cwd=tmp_path, check=True)
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "PWNED2").exists()


def test_convert_into_a_readonly_folder(tmp_path, monkeypatch):
    """A store in a folder the user cannot write (simulated: the tests may run as root, where
    permissions do not bind): one line, nothing written."""
    import tracekit.store as S

    def readonly(path, read_only):
        raise duckdb.IOException(f'IO Error: Cannot open file "{path}": Read-only file system')

    monkeypatch.setattr(S.core, "connect", readonly)
    monkeypatch.setattr(S.write, "connect", readonly)
    code, out, err = cli("convert", KINETO, "--db", tmp_path / "s.duckdb")
    assert code == 2 and "Read-only file system" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s.duckdb").exists()
