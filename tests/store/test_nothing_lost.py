"""Issue 49 ("nothing lost, part 2"), items 1-11, 15, 16: output files never overwrite the store
and appear whole or not at all, Parquet exports likewise, a store is replaced only when it is
one (and nobody else writes it), errors are not masked and name what the user gave, names reach
the terminal escaped, stores open without extension downloads, and a killed `convert --jobs`
leaves nothing running or lying about.

Full disks and failed ROLLBACKs are simulated (a patched write that fails with ENOSPC): the
machine gives no small disk to fill, and real captures cannot make DuckDB lose its transaction.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from conftest import FIXTURES, need
from tracekit.cli import main
from tracekit.store import Store, writing

NSYS = FIXTURES / "nsys" / "matmul.sqlite"
NCU = FIXTURES / "ncu" / "mm_raw.csv"


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def cli(*args, timeout=120, **kw):
    return subprocess.run([sys.executable, "-m", "tracekit.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, **kw)


def one_line(code, err, *needles):
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def digest(p: Path) -> str:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


@pytest.fixture
def store(tmp_path):
    db = tmp_path / "s.duckdb"
    with writing(db) as st:
        st.convert(need(NSYS))
    return db


def kernels(db) -> int:
    with Store(db, read_only=True) as st:
        return st.one("select count(*) from kernels")


# -- 1. -o naming the store ------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["sql-csv", "sql-parquet", "sql-table", "diagnose", "perfetto", "diff",
                                 "link"])
def test_output_that_is_the_store_is_refused(store, how):
    before = digest(store)
    n = kernels(store)
    assert n == 6  # matmul.sqlite's kernels
    out = store
    if how == "link":  # another spelling of the same file
        out = store.parent / "alias.duckdb"
        out.symlink_to(store)
    args = {"sql-csv": ["sql", "select 1 as x", "--format", "csv"],
            "link": ["sql", "select 1 as x", "--format", "csv"],
            "sql-parquet": ["sql", "select 1 as x", "--format", "parquet"],
            "sql-table": ["sql", "select 1 as x"],
            "diagnose": ["diagnose"], "perfetto": ["export", "perfetto"],
            "diff": ["diff", store, "--base-source", "0", "--new-source", "0"]}[how]
    code, _, err = run(*args, "--db", store, "-o", out) if how != "diff" else run(*args, "-o", out)
    one_line(code, err, "is the store", "choose another output file")
    assert digest(store) == before and kernels(store) == n


# -- 5. -o written whole or not at all ------------------------------------------------------------
def _full_disk_after(monkeypatch, nbytes: int):
    """Writes to the files opened by tracekit.outputs fail with ENOSPC after ``nbytes`` bytes
    (synthetic: no small disk to fill here)."""
    import tracekit.outputs as O

    real = os.fdopen

    class Full:
        def __init__(self, f):
            self.f, self.n = f, 0

        def write(self, b):
            if self.n + len(b) > nbytes:
                self.f.write(b[: max(0, nbytes - self.n)])
                self.f.flush()
                raise OSError(errno.ENOSPC, "No space left on device")
            self.n += len(b)
            return self.f.write(b)

        def __getattr__(self, k):
            return getattr(self.f, k)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

    monkeypatch.setattr(O.os, "fdopen", lambda *a, **k: Full(real(*a, **k)))


@pytest.mark.parametrize("fmt", ["csv", "json", "table"])
def test_sql_output_on_a_full_disk_keeps_the_old_file(store, tmp_path, monkeypatch, fmt):
    out = tmp_path / "k.out"
    out.write_text("old result\n")
    os.chmod(out, 0o640)
    _full_disk_after(monkeypatch, 10)
    code, _, err = run("sql", "select * from kernels", "--db", store, "--format", fmt, "-o", out)
    line = one_line(code, err, "No space left on device", str(out))
    assert ".tmp-" not in line
    assert out.read_text() == "old result\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".k.out")) == []
    monkeypatch.undo()
    code, _, err = run("sql", "select * from kernels", "--db", store, "--format", "csv", "-o", out)
    assert code == 0, err
    assert len(out.read_text().splitlines()) == 1 + 6
    assert stat.S_IMODE(out.stat().st_mode) == 0o640  # the file's mode kept


def test_full_standard_output_is_named(store):
    r = subprocess.run(f"{sys.executable} -m tracekit.cli sql 'select * from kernels' --db {store} "
                       "--format csv > /dev/full", shell=True, capture_output=True, text=True)
    one_line(r.returncode, r.stderr, "standard output", "No space left on device")


def test_convert_copy_on_a_full_disk_leaves_no_partial_copy(store, monkeypatch):
    real = shutil.copyfile

    def full(src, dst, **kw):
        with open(src, "rb") as f, open(dst, "wb") as g:
            g.write(f.read(4096))
        raise OSError(errno.ENOSPC, "No space left on device", str(dst))

    monkeypatch.setattr(shutil, "copyfile", full)
    before = digest(store)
    code, _, err = run("convert", need(NCU), "--db", store, "-q")
    line = one_line(code, err, "No space left on device")
    assert ".tmp-" not in line and str(store) in line
    monkeypatch.setattr(shutil, "copyfile", real)
    assert digest(store) == before
    assert [p.name for p in store.parent.iterdir() if ".tmp-" in p.name] == []


# -- 9. diagnose -o that cannot be written ---------------------------------------------------------
@pytest.mark.parametrize("where", ["missing-parent", pytest.param("read-only-folder", marks=pytest.mark.slow),
                                   pytest.param("full-disk", marks=pytest.mark.slow)])
def test_diagnose_output_that_cannot_be_written_is_one_line(store, tmp_path, monkeypatch, where):
    out = tmp_path / "nodir" / "d.txt"
    if where == "read-only-folder":
        if os.geteuid() == 0:
            # root writes into a 0555 folder: /proc is read-only for everyone
            out = Path("/proc/d.txt")
        else:
            ro = tmp_path / "ro"
            ro.mkdir(mode=0o555)
            out = ro / "d.txt"
    elif where == "full-disk":
        out = tmp_path / "d.txt"
        out.write_text("old\n")
        _full_disk_after(monkeypatch, 5)
    code, _, err = run("diagnose", "--db", store, "--format", "json", "-o", out)
    line = one_line(code, err, str(out))
    assert ".tmp-" not in line
    if where == "full-disk":
        assert out.read_text() == "old\n"
        assert "No space left on device" in line


# -- 3. --replace of a DuckDB database that is not a store -----------------------------------------
def test_replace_refuses_a_duckdb_file_that_is_not_a_store(tmp_path):
    other = tmp_path / "mine.duckdb"
    with duckdb.connect(str(other)) as con:
        con.execute("create table precious as select range as x from range(1000)")
    before = digest(other)
    code, _, err = run("convert", need(NSYS), "--db", other, "--replace", "-q")
    one_line(code, err, "not a tracekit store", "refusing to replace it")
    assert digest(other) == before
    with duckdb.connect(str(other), read_only=True) as con:
        assert con.execute("select count(*) from precious").fetchone()[0] == 1000


def test_replace_still_replaces_a_store(store):
    code, out, err = run("convert", need(NCU), "--db", store, "--replace", "-q")
    assert code == 0, err
    with Store(store, read_only=True) as st:
        assert st.one("select count(*) from sources") == 1
        assert st.one("select format from sources") == "ncu"


# -- 4. another process's DuckDB write lock --------------------------------------------------------
@pytest.mark.slow
def test_convert_refuses_a_store_another_process_writes(store):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; con = duckdb.connect(sys.argv[1]); "
         "print('ready', flush=True); sys.stdin.readline(); "
         "con.execute(\"insert into tracekit_meta values ('late', 'write')\"); con.close()", str(store)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        r = cli("convert", need(NCU), "--db", store, "-q")
        one_line(r.returncode, r.stderr, "open for writing by another process", f"PID {holder.pid}")
        r = cli("convert", need(NCU), "--db", store, "--replace", "-q")
        one_line(r.returncode, r.stderr, "open for writing by another process")
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0
    with Store(store, read_only=True) as st:  # the other process's write is there, the store whole
        assert st.one("select value from tracekit_meta where key = 'late'") == "write"
        assert st.one("select count(*) from kernels") == 6
    assert [p.name for p in store.parent.iterdir() if ".tmp-" in p.name] == []


# -- 6. read-only store; file mode kept ------------------------------------------------------------
@pytest.mark.parametrize("replace", [False, True])
def test_a_read_only_store_is_not_replaced(store, replace):
    os.chmod(store, 0o444)
    before = digest(store)
    code, _, err = run("convert", need(NCU), "--db", store, "-q", *(["--replace"] if replace else []))
    one_line(code, err, "read-only", "chmod u+w")
    assert digest(store) == before and stat.S_IMODE(store.stat().st_mode) == 0o444


def test_converting_keeps_the_store_mode(store):
    os.chmod(store, 0o640)
    code, _, err = run("convert", need(NCU), "--db", store, "-q")
    assert code == 0, err
    assert stat.S_IMODE(store.stat().st_mode) == 0o640
    with Store(store, read_only=True) as st:
        assert st.one("select count(*) from sources") == 2


# -- 7. nsys export without its kernel table -------------------------------------------------------
@pytest.mark.parametrize("how", ["dropped", "renamed"])
def test_nsys_export_lacking_its_kernel_table_says_so(tmp_path, how):
    # synthetic: a trimmed export (the fixture with its kernel table dropped or renamed)
    src = tmp_path / "trimmed.sqlite"
    shutil.copyfile(need(NSYS), src)
    with sqlite3.connect(src) as con:
        launches = con.execute("select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s on "
                               "s.id = r.nameId where s.value like '%LaunchKernel%'").fetchone()[0]
        if how == "dropped":
            con.execute("drop table CUPTI_ACTIVITY_KIND_KERNEL")
        else:
            con.execute("alter table CUPTI_ACTIVITY_KIND_KERNEL rename to CUPTI_ACTIVITY_KIND_KERNEL_V2")
    con.close()
    assert launches == 6  # cuLaunchKernelEx x4, cudaLaunchKernelExC x2
    db = tmp_path / "t.duckdb"
    code, out, err = run("convert", src, "--db", db, "-q")
    assert code == 0, err
    assert "6 kernels of launch calls: the export lacks the CUPTI_ACTIVITY_KIND_KERNEL table" in out
    if how == "renamed":
        assert "(it has CUPTI_ACTIVITY_KIND_KERNEL_V2)" in out
    with Store(db, read_only=True) as st:
        assert st.one("select sum(count) from skipped_rows where reason like '%lacks the CUPTI%'") == 6
        assert st.one("select count(*) from api_calls") == 18
    code, _, err = run("convert", src, "--db", tmp_path / "strict.duckdb", "--strict", "-q")
    one_line(code, err, "6 input rows would be skipped", "CUPTI_ACTIVITY_KIND_KERNEL")


# -- 8. a failed ROLLBACK does not hide the error --------------------------------------------------
@pytest.mark.parametrize("error", [duckdb.IOException, duckdb.OutOfMemoryException])
def test_failed_rollback_keeps_the_real_error(store, monkeypatch, error):
    import tracekit.store.convert as S  # where the conversion looks it up

    real = S.insert

    def fail(con, table, batch):
        # synthetic: DuckDB ends the transaction itself on such an error, so ROLLBACK then fails
        real(con, table, batch)
        con.execute("ROLLBACK")
        raise error("No space left on device" if error is duckdb.IOException
                    else "Out of Memory Error: could not allocate block of size 256 KiB")

    monkeypatch.setattr(S, "insert", fail)
    before = digest(store)
    code, _, err = run("convert", need(NCU), "--db", store, "-q")
    line = one_line(code, err)
    assert "no transaction is active" not in line and "cannot rollback" not in line
    assert ("no space left on device" if error is duckdb.IOException else "out of memory") in line
    assert "please report" not in line
    assert digest(store) == before


# -- 2. Parquet exports: whole or not at all -------------------------------------------------------
def _export_rows(d: Path) -> dict:
    from tracekit.store import open_parquet

    with open_parquet(d) as st:
        return {t: st.one(f"select count(*) from {t}") for t in ("sources", "kernels", "events", "ncu_metrics")}


@pytest.mark.slow
def _killed_after(delay: float, args: list, env: dict | None = None) -> int:
    """Run `tracekit ARGS`, SIGKILL it after ``delay`` seconds if it still runs; 1 if killed."""
    p = subprocess.Popen([sys.executable, "-m", "tracekit.cli", *map(str, args)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay)
    killed = p.poll() is None
    if killed:
        p.send_signal(signal.SIGKILL)
    p.wait()
    return int(killed)


@pytest.mark.slow  # (a process killed mid-export: ~10 s each)
@pytest.mark.parametrize("layout", ["flat", "partitioned"])
def test_killed_parquet_export_leaves_the_old_export_whole(tmp_path, layout):
    db, d = tmp_path / "s.duckdb", tmp_path / "pq"
    part = ["--partitioned"] if layout == "partitioned" else []
    r = cli("convert", need(NSYS), "--db", db, "--parquet", d, "-q", *part)
    assert r.returncode == 0, r.stderr
    old = _export_rows(d)
    assert old == {"sources": 1, "kernels": 6, "events": 13, "ncu_metrics": 0}
    killed = 0
    for delay in (0.0, 0.3, 0.6, 0.9, 1.2, 1.6, 2.0, 2.6):
        killed += _killed_after(delay, ["convert", need(NCU), "--db", db, "--replace", "--parquet", d, "-q", *part])
        rows = _export_rows(d)  # the old export or the new one, whole, never a mix
        assert rows in (old, {"sources": 1, "kernels": 0, "events": 0, "ncu_metrics": 13290}), (delay, rows)
        if rows != old:
            break
    assert killed >= 1
    r = cli("convert", need(NCU), "--db", db, "--replace", "--parquet", d, "-q", *part)
    assert r.returncode == 0, r.stderr
    assert _export_rows(d)["ncu_metrics"] == 13290
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".pq.")] == []  # leftovers removed


def test_a_half_written_export_is_refused(tmp_path):
    db, d = tmp_path / "s.duckdb", tmp_path / "pq"
    code, _, err = run("convert", need(NSYS), "--db", db, "--parquet", d, "-q")
    assert code == 0, err
    (d / "events.parquet").unlink()  # as a kill between two files of an export in place left it
    code, _, err = run("sql", "select count(*) from kernels", "--db", d)
    one_line(code, err, "incomplete Parquet export", "events.parquet is missing")
    code, _, err = run("convert", need(NSYS), "--db", db, "--replace", "--parquet", d, "-q")
    assert code == 0, err
    shutil.copyfile(d / "kernels.parquet", d / "events.parquet")  # a file of another export
    code, _, err = run("sql", "select count(*) from kernels", "--db", d)
    one_line(code, err, "changed since it was written", "events.parquet")


def test_export_into_a_folder_of_other_files_is_refused(tmp_path):
    d = tmp_path / "mine"
    d.mkdir()
    (d / "notes.txt").write_text("keep me")
    code, _, err = run("convert", need(NSYS), "--db", tmp_path / "s.duckdb", "--parquet", d, "-q")
    one_line(code, err, "notes.txt", "export into an empty or new folder")
    assert (d / "notes.txt").read_text() == "keep me"
    assert not (tmp_path / "s.duckdb").exists()  # nothing converted


# -- 9 / 10. what the messages name ----------------------------------------------------------------
def test_missing_store_folder_names_the_store(tmp_path):
    db = tmp_path / "nope" / "s.duckdb"
    code, _, err = run("convert", need(NSYS), "--db", db, "-q")
    line = one_line(code, err, str(db), "no such folder")
    assert ".tmp-" not in line


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "loop", "dangling"])
def test_odd_inputs_are_named_for_what_they_are(tmp_path, kind):
    p = {"dev-zero": Path("/dev/zero"), "fifo": tmp_path / "ff", "loop": tmp_path / "loop",
         "dangling": tmp_path / "dangling"}[kind]
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "loop":
        p.symlink_to(p)
    elif kind == "dangling":
        p.symlink_to(tmp_path / "gone.json")
    code, _, err = run("convert", p, "--db", tmp_path / "s.duckdb", "-q")
    want = {"dev-zero": "not a regular file (a device)", "fifo": "not a regular file (a FIFO",
            "loop": "symbolic link loop", "dangling": "symbolic link to a missing file"}[kind]
    line = one_line(code, err, want)
    assert "empty file" not in line and "no such file" not in line


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "loop"])
def test_odd_stores_are_named_for_what_they_are(tmp_path, kind):
    p = {"dev-zero": Path("/dev/zero"), "fifo": tmp_path / "ff", "loop": tmp_path / "loop"}[kind]
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "loop":
        p.symlink_to(p)
    code, _, err = run("sql", "select 1", "--db", p)
    one_line(code, err, "symbolic link loop" if kind == "loop" else "not a regular file")


@pytest.mark.slow
def test_non_utf8_names_are_one_line(tmp_path, store):
    bad = Path(os.fsdecode(bytes(tmp_path) + b"/bad\xff.sqlite"))
    shutil.copyfile(need(NSYS), bad)
    r = cli("convert", bad, "--db", tmp_path / "t.duckdb", "-q")
    line = one_line(r.returncode, r.stderr, "not UTF-8", "rename it")
    assert "internal error" not in line and "bad\\xff.sqlite" in line
    bad_db = Path(os.fsdecode(bytes(tmp_path) + b"/s\xff.duckdb"))
    shutil.copyfile(store, bad_db)
    for args in (["sql", "select 1", "--db", bad_db], ["convert", need(NSYS), "--db", bad_db, "-q"]):
        r = cli(*args)
        one_line(r.returncode, r.stderr, "not UTF-8")


@pytest.mark.slow
def test_an_nsys_export_a_writer_holds_is_said_locked(tmp_path):
    src = tmp_path / "busy.sqlite"
    shutil.copyfile(need(NSYS), src)
    writer = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys; con = sqlite3.connect(sys.argv[1], isolation_level=None); "
         "con.execute('pragma cache_size = 1'); con.execute('begin exclusive'); "
         "con.execute('delete from CUPTI_ACTIVITY_KIND_RUNTIME'); print('ready', flush=True); "
         "sys.stdin.readline(); con.execute('rollback')", str(src)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "ready"
        r = cli("convert", src, "--db", tmp_path / "s.duckdb", "-q")
        line = one_line(r.returncode, r.stderr, "locked by a writer")
        assert "corrupt" not in line
    finally:
        writer.communicate("\n", timeout=60)
    r = cli("convert", src, "--db", tmp_path / "s.duckdb", "-q")  # the writer gone: it converts
    assert r.returncode == 0, r.stderr
    assert "kernels 6" in r.stdout


# -- 11. control characters reach the terminal escaped ---------------------------------------------
@pytest.mark.slow
def test_control_characters_in_names_are_escaped(tmp_path):
    evil = tmp_path / "run\x1b]0;owned\x07.sqlite"
    shutil.copyfile(need(NSYS), evil)
    db = tmp_path / "s.duckdb"
    code, out, err = run("convert", evil, "--db", db, "-q")
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    assert "run\\x1b]0;owned\\x07.sqlite (nsys)" in out
    # a kernel name with control characters (synthetic: no real capture has one), through diff
    with duckdb.connect(str(db)) as con:
        con.execute("update kernels set short_name = 'gemm\x1b[2J\x07' where source_id = 0")
    code, out, err = run("convert", need(NSYS), "--db", db, "--allow-duplicate", "-q")
    assert code == 0, err
    for fmt in ("text", "markdown"):
        code, out, err = run("diff", db, "--base-source", "0", "--new-source", "1", "--format", fmt)
        assert code == 0, err
        assert "\x1b" not in out and "\x07" not in out
        assert "gemm\\x1b[2J\\x07" in out


# -- 15. no extension downloads; an SQLite file as --db -------------------------------------------
def test_sqlite_file_as_db_is_named_without_a_download(tmp_path):
    src = tmp_path / "export.sqlite"
    shutil.copyfile(need(NSYS), src)
    before = digest(src)
    # a proxy that does not exist: any download attempt would fail differently (or hang)
    env = dict(os.environ, http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9")
    for args in (["sql", "select 1"], ["diagnose"], ["export", "perfetto", "-o", tmp_path / "t.json"]):
        r = cli(*args, "--db", src, env=env)
        line = one_line(r.returncode, r.stderr, "an SQLite file, not a tracekit store", "tracekit convert")
        assert "download" not in line.lower() and "extension" not in line.lower()
    assert digest(src) == before


def test_store_connections_do_not_autoload_extensions(store):
    with Store(store, read_only=True, sandbox=False) as st:
        got = dict(st._con.execute(
            "select name, value from duckdb_settings() where name in "
            "('autoinstall_known_extensions', 'autoload_known_extensions')").fetchall())
    assert got == {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}
    with writing(store) as st:
        got = dict(st._con.execute(
            "select name, value from duckdb_settings() where name in "
            "('autoinstall_known_extensions', 'autoload_known_extensions')").fetchall())
    assert got == {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}


# -- 16. kill -9 of convert --jobs; partial templates ---------------------------------------------
def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_killed_parallel_convert_leaves_no_worker_running(tmp_path):
    if not Path("/proc").is_dir():
        pytest.skip("needs /proc (Linux) to find the workers, on purpose")
    ins = []
    for i in range(8):  # 8 inputs of ~0.4 s each, on 2 workers: several seconds of work
        p = tmp_path / f"r{i}.json.gz"
        shutil.copyfile(need(FIXTURES / "kineto" / "decode_b32.json.gz"), p)
        ins.append(p)
    db = tmp_path / "s.duckdb"
    parent = subprocess.Popen([sys.executable, "-m", "tracekit.cli", "convert", *map(str, ins), "--db", str(db),
                               "--jobs", "2", "--allow-duplicate", "-q"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while time.monotonic() < deadline and len(workers) < 2:
        workers = _children(parent.pid)
        time.sleep(0.05)
    assert len(workers) == 2, "the workers did not start"
    time.sleep(1.0)  # converting
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    t0 = time.monotonic()
    while any(_alive(w) for w in workers) and time.monotonic() - t0 < 10:
        time.sleep(0.02)
    gone_after = time.monotonic() - t0
    assert gone_after < 0.5, f"workers still running {gone_after:.2f} s after the kill"
    assert not db.exists()
    # the next conversion removes what the killed one left beside the store
    code, _, err = run("convert", need(NCU), "--db", db, "-q")
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".s.duckdb")) == []


@pytest.mark.slow
def test_killed_first_conversion_leaves_no_partial_template(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    env = dict(os.environ, TRACEKIT_CACHE_DIR=str(cache))
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(cache))
    killed = 0
    for i, delay in enumerate((0.5, 0.8, 1.1, 1.4, 1.7)):
        killed += _killed_after(delay, ["convert", str(need(NCU)), "--db", str(tmp_path / f"s{i}.duckdb"), "-q"], env)
        if list(cache.glob("store-template-*.duckdb")):
            break
        shutil.rmtree(cache / "verified", ignore_errors=True)
    assert killed
    # a partial template of a killed process, as one killed mid-template leaves it (synthetic
    # where the kills above came too early or too late: the pid is that of a finished process)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    cache.mkdir(exist_ok=True)
    left = cache / f".store-template-0123456789abcdef.duckdb.{dead}-140000000000000"
    left.write_bytes(b"partial")
    Path(f"{left}.wal").write_bytes(b"wal")
    code, _, err = run("convert", need(NCU), "--db", tmp_path / "last.duckdb", "-q")
    assert code == 0, err
    assert sorted(p.name for p in cache.iterdir() if p.name.startswith(".store-template")) == []
    assert len(list(cache.glob("store-template-*.duckdb"))) == 1


def test_error_lines_escape_control_characters_in_names(tmp_path):
    db = tmp_path / "st\x1b]0;x\x07.duckdb"
    code, _, err = run("sql", "select 1", "--db", db)
    line = one_line(code, err, "no such store")
    assert "\x1b" not in line and "\x07" not in line and "st\\x1b]0;x\\x07.duckdb" in line
    missing = tmp_path / "in\x1b[31m.json"
    code, _, err = run("convert", missing, "--db", tmp_path / "s.duckdb")
    line = one_line(code, err, "no such file")
    assert "\x1b" not in line and "in\\x1b[31m.json" in line


def test_output_inside_a_parquet_export_is_refused(tmp_path):
    d = tmp_path / "pq"
    code, _, err = run("convert", need(NSYS), "--db", tmp_path / "s.duckdb", "--parquet", d, "-q")
    assert code == 0, err
    code, _, err = run("sql", "select count(*) from kernels", "--db", d, "--format", "csv", "-o", d / "n.csv")
    one_line(code, err, "inside the Parquet export")
    code, out, err = run("sql", "select count(*) as n from kernels", "--db", d, "--format", "csv")
    assert code == 0 and out == "n\n6\n", err
