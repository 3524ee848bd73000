"""A converted store is usable from any DuckDB client without tracekit (issue 23): the views and
the macros of sql/lib/ are written into it; tracekit itself keeps using the views of the installed
version.  `tracekit sql --db DIR` on a Parquet export.  The distribution name in install hints."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import tracekit
from conftest import FIXTURES, REPO
from tracekit import store, views

DECODE = FIXTURES / "kineto" / "decode_b1.json.gz"  # real capture: 37 kernel names, 6,350 gaps
DDP = [FIXTURES / "kineto" / "ddp_rank0.json.gz", FIXTURES / "kineto" / "ddp_rank1.json.gz"]
HOT = "select short_name, instances, total_ns from hotspots order by total_ns desc, short_name"
GAPS = "select cause, count(*) as n, sum(dur_ns) as ns from idle_gaps group by cause order by cause"


def cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "tracekit.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    p = tmp_path_factory.mktemp("clients") / "run.duckdb"
    r = cli("convert", DECODE, "--db", p, "-q")
    assert r.returncode == 0, r.stderr
    return p


@pytest.fixture(scope="module")
def expected(db):
    with tracekit.open(db) as st:
        return {"hot": st.rows(HOT), "gaps": st.rows(GAPS)}


def plain_python(tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a Python that can import duckdb and nothing else: isolated (-I -S: no
    site-packages, no .pth, no current folder) with a sys.path of one folder holding links to the
    duckdb package only."""
    only = tmp_path / "only_duckdb"
    only.mkdir(exist_ok=True)
    site = Path(duckdb.__file__).resolve().parent.parent
    for p in site.iterdir():
        if (p.name == "duckdb" or p.name.startswith(("_duckdb", "duckdb-"))) and not (only / p.name).exists():
            (only / p.name).symlink_to(p)
    prelude = (f"import sys; sys.path[:] = [{str(only)!r}] + [p for p in sys.path if 'site-packages' not in p]\n"
               "import importlib.util\n"
               "assert importlib.util.find_spec('tracekit') is None, 'tracekit is importable'\n")
    return subprocess.run([sys.executable, "-I", "-S", "-c", prelude + code], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)


# -- (1) the views inside the store ----------------------------------------------------------------
def test_plain_duckdb_queries_hotspots_and_idle_gaps(db, expected, tmp_path):
    r = plain_python(tmp_path, f"""
import duckdb, json
con = duckdb.connect({str(db)!r}, read_only=True)
print(json.dumps({{"hot": con.execute({HOT!r}).fetchall(), "gaps": con.execute({GAPS!r}).fetchall()}}))
""")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert [tuple(x) for x in got["hot"]] == expected["hot"]
    assert [tuple(x) for x in got["gaps"]] == expected["gaps"]
    # the real numbers of the decode_b1 capture
    assert len(got["hot"]) == 37 and sum(x[1] for x in got["hot"]) == 3159
    assert [tuple(x) for x in got["gaps"]] == [("host_wait", 6206, 231712086), ("kernel_wait", 144, 712700)]


@pytest.mark.slow
def test_every_view_in_a_plain_client_matches_tracekit(db, tmp_path):
    """Every view runs in a plain client (its getvariable() parameters fall back to their
    defaults) and has tracekit's row count."""
    names = [v.name for v in views.all_views()]
    r = plain_python(tmp_path, f"""
import duckdb, json
con = duckdb.connect({str(db)!r}, read_only=True)
print(json.dumps({{n: con.execute(f"select count(*) from {{n}}").fetchone()[0] for n in {names!r}}}))
""")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    with tracekit.open(db) as st:
        want = {n: st.one(f"select count(*) from {n}") for n in names}
    assert got == want
    assert got["idle_gaps"] == 6350 and got["gpu_utilization_timeline"] == 100  # bucket_ns default: window / 100


def _duckdb_cli() -> str | None:
    here = Path(sys.executable).parent / "duckdb"
    return str(here) if here.exists() else shutil.which("duckdb")


def test_duckdb_cli_queries_the_views(db, expected):
    """The DuckDB CLI (PyPI duckdb-cli, the dev extra; DuckDB 1.5: the store is written in
    storage format v1.5.0, store.STORAGE_VERSION)."""
    exe = _duckdb_cli()
    if exe is None:
        pytest.skip("no duckdb CLI (pip install duckdb-cli)")
    r = subprocess.run([exe, "-readonly", "-json", str(db), HOT], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert [(x["short_name"], x["instances"], x["total_ns"]) for x in json.loads(r.stdout)] == expected["hot"]
    r = subprocess.run([exe, "-readonly", "-json", str(db), GAPS], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert [(x["cause"], x["n"], int(x["ns"])) for x in json.loads(r.stdout)] == expected["gaps"]  # HUGEINT as text


def test_meta_records_what_was_persisted(db):
    con = duckdb.connect(str(db), read_only=True)
    try:
        meta = dict(con.execute("select key, value from tracekit_meta").fetchall())
        have = {r[0] for r in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
        macros = {r[0] for r in con.execute(
            "select function_name from duckdb_functions() where function_type in ('macro', 'table_macro') "
            "and database_name = current_database()").fetchall()}
    finally:
        con.close()
    assert meta["schema_version"] == str(tracekit.schema.SCHEMA_VERSION)
    assert meta["views_version"] == tracekit.__version__ and meta["views_digest"] == views.digest()
    assert set(json.loads(meta["persisted_views"])) == {v.name for v in views.all_views()} == have
    assert set(json.loads(meta["persisted_macros"])) == set(views.macro_names()) <= macros


def _copy(db: Path, tmp_path: Path) -> Path:
    p = tmp_path / "copy.duckdb"
    shutil.copyfile(db, p)
    return p


def test_tracekit_uses_its_own_views_not_the_stores(db, expected, tmp_path):
    """A store whose persisted copies differ (another tracekit version, or edited by hand):
    tracekit's TEMP views and macros win, also inside a view it does not know."""
    p = _copy(db, tmp_path)
    con = duckdb.connect(str(p))
    con.execute("create or replace view hotspots as select 1 as short_name, 2 as instances, 3 as total_ns")
    con.execute("create or replace view gpu_busy as select 1 as nothing")  # idle_gaps uses it
    con.execute("create or replace macro tk_is_comm_kernel(name) as true")  # every kernel NCCL
    con.execute("create view my_view as select count(*) as n from hotspots")  # a view tracekit lacks
    con.close()
    with tracekit.open(p) as st:
        assert st.rows(HOT) == expected["hot"]
        assert st.rows(GAPS) == expected["gaps"]
        assert st.one("select count(*) from collectives") == 0
        # DuckDB resolves TEMP first, also in a persisted view's body: my_view sees tracekit's hotspots
        assert st.one("select n from my_view") == 37
    con = duckdb.connect(str(p), read_only=True)  # while a plain client sees the store's copies
    assert con.execute("select n from my_view").fetchall() == [(1,)]
    con.close()


def test_a_session_reads_the_stores_own_copies_while_they_are_unchanged(db, expected, tmp_path):
    """A read-only session uses the store's copies (no TEMP view or macro created: each carries the
    comment of this version's digest); one replaced by hand loses the comment, and the session
    then creates its own, with the same rows."""
    from tracekit import views

    p = _copy(db, tmp_path)
    with tracekit.open(p) as st:
        assert st._copies_are_current()
        assert st.rows(HOT) == expected["hot"] and st.rows(GAPS) == expected["gaps"]
        assert st.one("select count(*) from duckdb_views() where temporary and not internal") == 0
        assert st.one("select comment from duckdb_views() where view_name = 'idle_gaps'") == f"tracekit {views.digest()}"
    con = duckdb.connect(str(p))
    con.execute("create or replace macro tk_is_comm_kernel(name) as true")  # (same name, no comment)
    con.close()
    with tracekit.open(p) as st:
        assert not st._copies_are_current()
        assert st.rows(HOT) == expected["hot"] and st.rows(GAPS) == expected["gaps"]
        assert st.one("select count(*) from duckdb_views() where temporary and not internal") >= 2


def test_the_check_of_the_copies_is_recorded_until_the_file_changes(tmp_path, monkeypatch):
    """A conversion records (in the cache folder, `verified/`) that the store's copies are this
    tracekit's; a session then skips `_copies_marked` (DuckDB's catalog of every function, 20-35
    ms) while the file is unchanged, and checks again once a client wrote to it (its headers,
    size and time changed): a macro replaced by hand is still found, and its session uses its
    own TEMP copies."""
    monkeypatch.setenv(store.CACHE_ENV, str(tmp_path / "cache"))
    p = tmp_path / "s.duckdb"
    tracekit.convert(DECODE, db=p)
    checks = []
    real = store.copies.copies_marked
    monkeypatch.setattr(store.copies, "copies_marked", lambda *a: checks.append(1) or real(*a))
    with tracekit.open(p) as st:
        assert st._copies_are_current() and checks == []
    con = duckdb.connect(str(p))
    con.execute("create or replace macro tk_is_comm_kernel(name) as true")  # (same name, no comment)
    con.close()
    with tracekit.open(p) as st:
        assert not st._copies_are_current() and checks == [1]
        assert st.one("select count(*) from duckdb_functions() where function_name = 'tk_is_comm_kernel' "
                      "and database_name = 'temp'") == 1
    assert store.copies.file_state(str(p)) is not None
    (tmp_path / "s.duckdb.wal").write_bytes(b"")  # changes not checkpointed: never taken as checked
    assert store.copies.file_state(str(p)) is None and not store.copies.verified(str(p), views.digest())


def test_a_persisted_view_whose_macro_is_gone(db, expected, tmp_path):
    """A plain client gets DuckDB's one-line catalog error at query time (opening works);
    tracekit is unaffected (its own macros)."""
    p = _copy(db, tmp_path)
    con = duckdb.connect(str(p))
    con.execute("drop macro tk_stats")  # hotspots calls it
    con.close()
    con = duckdb.connect(str(p), read_only=True)
    with pytest.raises(duckdb.CatalogException, match="tk_stats"):
        con.execute(HOT).fetchall()
    assert con.execute("select count(*) from kernels").fetchone()[0] == 3159
    con.close()
    with tracekit.open(p) as st:
        assert st.rows(HOT) == expected["hot"]
    tracekit.convert(DDP[:1], db=p)  # the next conversion puts it back (same digest, macro missing)
    con = duckdb.connect(str(p), read_only=True)
    assert con.execute("select count(distinct source_id) from hotspots").fetchone()[0] == 2
    con.close()


def test_old_store_gets_views_when_a_source_is_added(db, tmp_path):
    """A store of a tracekit before issue 23 (no persisted views, no meta keys) still opens; adding
    a source writes the views into it; a user's own view stays."""
    p = _copy(db, tmp_path)
    con = duckdb.connect(str(p))
    for name in views.creation_order()[::-1]:
        con.execute(f"drop view {name}")
    con.execute("delete from tracekit_meta where key <> 'schema_version'")
    con.execute("create view mine as select 42 as x")
    con.close()
    with tracekit.open(p) as st:
        assert st.one("select count(*) from hotspots") == 37
    tracekit.convert(DDP[:1], db=p)
    con = duckdb.connect(str(p), read_only=True)
    try:
        assert con.execute("select count(*) from sources").fetchone()[0] == 2
        assert con.execute("select count(distinct source_id) from hotspots").fetchone()[0] == 2
        assert con.execute("select x from mine").fetchall() == [(42,)]
        assert con.execute("select value from tracekit_meta where key = 'views_digest'").fetchone()[0] == views.digest()
    finally:
        con.close()


def test_stale_views_dropped_and_unchanged_views_not_rewritten(db, tmp_path):
    p = _copy(db, tmp_path)
    con = duckdb.connect(str(p))
    # an older tracekit's view that this one no longer has, recorded as persisted, and an old digest
    con.execute("create view old_view as select 1 as x")
    con.execute("create macro tk_old_rule(a) as a + 1")
    names = json.loads(con.execute("select value from tracekit_meta where key = 'persisted_views'").fetchone()[0])
    macs = json.loads(con.execute("select value from tracekit_meta where key = 'persisted_macros'").fetchone()[0])
    con.execute("update tracekit_meta set value = ? where key = 'persisted_views'", [json.dumps(names + ["old_view"])])
    con.execute("update tracekit_meta set value = ? where key = 'persisted_macros'", [json.dumps(macs + ["tk_old_rule"])])
    con.execute("update tracekit_meta set value = 'older' where key = 'views_digest'")
    con.execute("create or replace view hotspots as select 1 as stale")
    con.close()
    with store.writing(p) as st:
        assert store.persist_views(st.raw_con) is True  # another digest: written again
        assert store.persist_views(st.raw_con) is False  # same digest, all there: left alone
    con = duckdb.connect(str(p), read_only=True)
    try:
        have = {r[0] for r in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
        assert "old_view" not in have and {v.name for v in views.all_views()} <= have
        assert not con.execute("select 1 from duckdb_functions() where function_name = 'tk_old_rule'").fetchall()
        assert con.execute("select count(*) from hotspots").fetchone()[0] == 37
    finally:
        con.close()


def test_replace_and_parallel_convert_write_the_views(tmp_path):
    """`--replace` starts afresh with the views; the parallel path writes them into the final store
    once (not into the workers' stores)."""
    p = tmp_path / "ddp.duckdb"
    r = cli("convert", *DDP, "--db", p, "--jobs", "2", "-q")
    assert r.returncode == 0, r.stderr
    con = duckdb.connect(str(p), read_only=True)
    assert con.execute("select count(*) from ranks").fetchone()[0] == 2
    assert con.execute("select count(distinct source_id) from hotspots").fetchone()[0] == 2
    con.close()
    r = cli("convert", DDP[0], "--db", p, "--replace", "-q")
    assert r.returncode == 0, r.stderr
    con = duckdb.connect(str(p), read_only=True)
    assert con.execute("select count(*) from ranks").fetchone()[0] == 1
    con.close()


def test_read_only_sandboxed_store_with_persisted_views(db, expected):
    with tracekit.open(db) as st:
        assert st.sandboxed and st.rows(HOT) == expected["hot"]
        with pytest.raises(duckdb.Error):
            st.rows("select * from read_text('/etc/hostname')")
        with pytest.raises(duckdb.Error, match="read-only"):  # the store's own copy (main.x is TEMP's too)
            st.con.execute(f"drop view {db.stem}.main.hotspots")


def test_a_failed_conversion_leaves_the_store_and_its_views(db, tmp_path):
    p = _copy(db, tmp_path)
    before = p.read_bytes()
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    r = cli("convert", bad, "--db", p, "--replace", "-q")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert p.read_bytes() == before


# -- (2) views over a Parquet export ------------------------------------------------------------
@pytest.mark.parametrize("layout", ["flat", "partitioned"])
@pytest.mark.slow
def test_sql_on_a_parquet_export(tmp_path, layout):
    p, d = tmp_path / "s.duckdb", tmp_path / "pq"
    r = cli("convert", *DDP, "--db", p, "--jobs", "1", "--parquet", d, *(["--partitioned"] if layout == "partitioned" else []), "-q")
    assert r.returncode == 0, r.stderr
    for q in (HOT.replace("select ", "select source_id, "), GAPS, "select * from ranks order by all"):
        a = cli("sql", q, "--db", p, "--format", "json")
        b = cli("sql", q, "--db", d, "--format", "json")
        assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
        assert json.loads(a.stdout) == json.loads(b.stdout) and json.loads(a.stdout)
    # both ranks, real numbers
    assert [x["source_id"] for x in json.loads(cli("sql", "select * from ranks order by all", "--db", d,
                                                    "--format", "json").stdout)] == [0, 1]
    # sandboxed: the export's own files are out of reach too
    b = cli("sql", f"copy (select 1) to '{d}/x.parquet'", "--db", d)
    assert b.returncode == 2 and "disabled by configuration" in b.stderr
    assert not (d / "x.parquet").exists()


def test_sql_on_a_folder_that_is_no_export(tmp_path):
    (tmp_path / "junk").mkdir()
    r = cli("sql", "select 1", "--db", tmp_path / "junk")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "not a tracekit Parquet export" in r.stderr


# -- (3) the distribution name -------------------------------------------------------------------
HINT = re.compile(r"pip install (?:-[a-zA-Z]+ )*'?(?P<what>[^'\s`\")]+)")


def _hints() -> list[tuple[str, str]]:
    out = []
    files = [*(REPO / "tracekit").rglob("*.py"), REPO / "README.md", *(REPO / "docs").glob("*.md")]
    for f in files:
        for m in HINT.finditer(f.read_text()):
            if "{" not in m.group("what"):  # install_hint's own f-string, checked below
                out.append((str(f.relative_to(REPO)), m.group("what")))
    return out


def test_every_install_hint_names_the_distribution():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == tracekit.DISTRIBUTION == "tracekit-gpu"
    extras = set(project["optional-dependencies"])
    hints = _hints()
    assert len(hints) >= 8
    for where, what in hints:
        m = re.fullmatch(r"(?P<dist>[A-Za-z0-9_.-]+|\.)(?:\[(?P<extras>[a-z,]+)\])?", what)
        assert m, (where, what)
        if m["dist"] in ("tracekit", "tracekit-gpu", "."):
            assert m["dist"] in (tracekit.DISTRIBUTION, "."), f"{where}: pip install {what}"
            assert set((m["extras"] or "").split(",")) - {""} <= extras, f"{where}: pip install {what}"
    for extra in ("report", "ncu", "capture"):
        hint = tracekit.install_hint(extra)
        assert f"pip install '{tracekit.DISTRIBUTION}[{extra}]'" in hint and f"pip install -e '.[{extra}]'" in hint


def _installed_from(repo: Path) -> list:
    """The installed distributions made from this checkout (direct_url.json: pip install [-e] .)."""
    from importlib import metadata

    urls = {repo.as_uri(), repo.resolve().as_uri()}
    out = []
    for d in metadata.distributions():
        try:
            url = json.loads(d.read_text("direct_url.json") or "{}").get("url")
        except ValueError:
            continue
        if url in urls:
            out.append(d)
    return out


def test_installed_distribution_is_the_one_hints_name():
    """importlib.metadata: the distribution installed from this checkout (pip install -e ., as the
    README and CI do) is tracekit.DISTRIBUTION, with the extras the hints name."""
    mine = _installed_from(REPO)
    if not mine:
        pytest.skip(f"tracekit is not installed from this checkout ({REPO}): pip install -e .")
    assert [d.metadata["Name"] for d in mine] == [tracekit.DISTRIBUTION]
    assert {"report", "ncu", "capture"} <= set(mine[0].metadata.get_all("Provides-Extra") or [])


def test_new_stores_start_from_the_template(tmp_path, monkeypatch):
    """A new store is a copy of the cached template (the tables, views and macros already written:
    `persist_views` has nothing to do); the template is made by the first conversion, named by a
    hash of tracekit, its SQL, schema and DuckDB, replaces other versions' templates, and the
    stores made with and without it hold the same rows, views and metadata.  Without a usable
    cache folder (TRACEKIT_CACHE_DIR empty, or a file where the folder should be) the views are
    written into the store as before."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(store.CACHE_ENV, str(cache))
    cache.mkdir()
    (cache / "store-template-0123456789abcdef.duckdb").write_bytes(b"an older version's")
    wrote = []
    real = store.persist_views

    def spy(con):
        wrote.append(real(con))
        return wrote[-1]

    monkeypatch.setattr(store.write, "persist_views", spy)
    tracekit.convert(DECODE, db=tmp_path / "a.duckdb")  # makes the template: views written there
    assert [p.name for p in cache.iterdir() if p.is_file()] == [f"store-template-{store.write.template_key()}.duckdb"]
    assert wrote == [True]  # into the template; the store, its copy, has them
    tracekit.convert(DECODE, db=tmp_path / "b.duckdb")
    assert wrote == [True]
    monkeypatch.setenv(store.CACHE_ENV, "")
    tracekit.convert(DECODE, db=tmp_path / "c.duckdb")
    assert wrote == [True, True]
    monkeypatch.setenv(store.CACHE_ENV, str(tmp_path / "a.duckdb"))  # not a folder: no template
    tracekit.convert(DECODE, db=tmp_path / "d.duckdb")
    assert wrote == [True, True, True]
    tracekit.convert(DDP[0], db=tmp_path / "d.duckdb")  # an existing store: checked, not rewritten
    assert wrote == [True, True, True, False]

    def content(p):
        con = duckdb.connect(str(p), read_only=True)
        try:
            # (names only: DuckDB renders an EXCLUDE list in no fixed order)
            views_ = con.execute("select view_name from duckdb_views() where not internal "
                                 "order by view_name").fetchall()
            meta = con.execute("select key, value from tracekit_meta where key not in ('fingerprints') "
                               "order by key").fetchall()
            return views_, meta, con.execute(HOT).fetchall(), con.execute(GAPS).fetchall()
        finally:
            con.close()

    a, b, c = (content(tmp_path / f"{x}.duckdb") for x in "abc")
    assert a == b == c and len(a[0]) >= len(views.all_views()) and len(a[2]) == 37


@pytest.mark.slow  # (the template itself: test_new_stores_start_from_the_template)
@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_a_damaged_template_is_dropped_not_fatal(tmp_path, monkeypatch, damage):
    """A template that is not a whole DuckDB file (a truncated copy, a full disk, garbage) does not
    stop conversions: the store starts empty and gets the views written, as without a cache, the
    damaged template is deleted and the next conversion makes it again."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(store.CACHE_ENV, str(cache))
    tracekit.convert(DECODE, db=tmp_path / "a.duckdb")
    tpl = store.write.template_path()
    good = tpl.read_bytes()
    tpl.write_bytes({"garbage": b"not a duckdb file", "truncated": good[:5000], "empty": b""}[damage])
    wrote = []
    real = store.persist_views
    monkeypatch.setattr(store.write, "persist_views", lambda con: wrote.append(real(con)) or wrote[-1])
    tracekit.convert(DECODE, db=tmp_path / "b.duckdb")
    assert wrote == [True] and not tpl.exists()  # views written into the store; template dropped
    tracekit.convert(DECODE, db=tmp_path / "c.duckdb")
    assert wrote == [True, True] and tpl.exists()  # made again (views written there)
    for x in "bc":
        con = duckdb.connect(str(tmp_path / f"{x}.duckdb"), read_only=True)
        try:
            assert len(con.execute(HOT).fetchall()) == 37
        finally:
            con.close()


def test_store_answers_after_a_parquet_export(tmp_path):
    """export_parquet leaves the connection usable: its row counts are fetched to the end (DuckDB
    refuses other work on a connection whose last result was not)."""
    import tracekit
    from tracekit.store import Store

    db = tmp_path / "s.duckdb"
    tracekit.convert([str(FIXTURES / "kineto" / "graphs.json.gz")], db=str(db))
    with Store(str(db), sandbox=False) as st:
        n = st.one("select count(*) from kernels")
        st.export_parquet(tmp_path / "out", partitioned=False)
        assert st.one("select count(*) from kernels") == n == 768
