"""Every view on Apache Spark gives DuckDB's rows (issue 24): one store holding every fixture trace
of tests/sql/test_same_rows.py, two ncu results and its 4 real-world captures (those left out where
../shared/realworld is absent), exported as the partitioned Parquet dataset and run on ONE
local Spark session; each view's rows are compared with DuckDB's on the same store (the same
multiset of rows; floats to a relative 1e-9; NULLs equal; lists and structs as Python values:
tests/spark_rows.py). The views come from their one DuckDB definition
(tracekit/spark/translate.py)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a local Spark session (JVM start, every view): minutes

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import view_fingerprints as F  # noqa: E402
from spark_rows import same_rows  # noqa: E402

from tracekit import views as V  # noqa: E402
from tracekit.spark import translate as T  # noqa: E402


def _why_no_spark() -> str | None:
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install 'tracekit-gpu[spark]')"
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        return "Java is not on PATH (Spark needs Java 17+)"
    return None


NO_SPARK = _why_no_spark()
needs_spark = pytest.mark.skipif(NO_SPARK is not None, reason=NO_SPARK or "")
VIEWS = V.creation_order()


def _build(tmp, name, base, stores):
    import tracekit
    from tracekit.store import Store

    files = [str(base / f) for fs in stores.values() for f in fs]
    db = tmp / f"{name}.duckdb"
    tracekit.convert(files, db=str(db))
    with Store(str(db), sandbox=False) as st:
        st.export_parquet(tmp / f"{name}_parquet", partitioned=True)
    return db, tmp / f"{name}_parquet"


@pytest.fixture(scope="module")
def spark():
    if NO_SPARK:
        pytest.skip(NO_SPARK)
    from tracekit.spark import session as S

    sp = S.session("local[2]")
    yield sp
    sp.stop()


# the ncu views (kernel_bounds, kernel_latency, ncu_timeline_match) need ncu sources: two real
# ncu results of the fixtures, beside the traces of tests/sql/test_same_rows.py
NCU = {"ncu": ["ncu/decode_steps_details.csv.gz", "ncu/lat_raw.csv.gz"]}


def _realworld_present() -> bool:
    return all((F.REALWORLD / f).exists() for fs in F.REALWORLD_STORES.values() for f in fs)


@pytest.fixture(scope="module")
def fixture_store(tmp_path_factory):
    """One store (and its partitioned dataset) of every fixture trace of tests/sql/test_same_rows.py,
    two ncu results and, where ../shared/realworld is present, its four real-world captures
    (every view compared once over all of them: 3 min on 2 cores)."""
    tmp = tmp_path_factory.mktemp("spark_fix")
    db, ds = _build(tmp, "fixtures", F.FIX, {**F.STORES, **NCU})
    if _realworld_present():
        import tracekit
        from tracekit.store import Store

        files = [str(F.REALWORLD / f) for fs in F.REALWORLD_STORES.values() for f in fs]
        tracekit.convert(files, db=str(db))
        shutil.rmtree(ds)
        with Store(str(db), sandbox=False) as st:
            st.export_parquet(ds, partitioned=True)
    return db, ds


def _duck_rows(db, query, params=None):
    import tracekit

    st = tracekit.open(str(db))
    try:
        for k, v in (params or {}).items():
            st.con.execute(f"SET VARIABLE {k} = ?", [v])
        return st.con.sql(query).to_arrow_table().to_pylist()
    finally:
        st.close()


def _compare_all(spark, db, dataset):
    from tracekit.spark import session as S

    S.register_dataset(spark, dataset)
    S.register_views(spark)
    import tracekit

    st = tracekit.open(str(db))
    bad, rows = {}, 0
    try:
        for name in VIEWS:
            expected = st.con.sql(f"SELECT * FROM {name}").to_arrow_table().to_pylist()
            try:
                got = S.to_arrow(spark.sql(f"SELECT * FROM `{name}`")).to_pylist()
            except Exception as e:  # noqa: BLE001 - Spark's error, reported per view
                bad[name] = f"did not run on Spark: {S.first_line(e)[:300]}"
                continue
            why = same_rows(expected, got)
            if why:
                bad[name] = why[:400]
            rows += len(expected)
    finally:
        st.close()
    return bad, rows


def test_every_view_translates():
    out = T.spark_views()
    assert [n for n, _ in out] == VIEWS
    for name, text in out:
        assert "getvariable" not in text.lower() and " ASOF " not in text.upper(), name
        assert not [m for m in T.macros() if re.search(rf"\b{m}\s*\(", text, re.I)], name  # all inlined


@needs_spark
def test_every_view_same_rows(spark, fixture_store):
    """Every view, Spark's rows = DuckDB's, over the fixtures (and the real-world captures)."""
    bad, rows = _compare_all(spark, *fixture_store)
    assert not bad, "\n".join(f"{k}: {v}" for k, v in bad.items())
    assert rows > (200_000 if _realworld_present() else 50_000)


USER_QUERIES = [
    "select * from idle_gaps where dur_ns > 1000",
    "select source_id, tk_kernel_type(kind, name) as kernel_type, count(*) as n, sum(dur_ns) as ns "
    "from gpu_activity group by all",
    "select name, arg_max(dur_ns, start_ns) as last_dur, quantile_cont(dur_ns, 0.5) as med "
    "from kernels group by name order by name limit 20",
    "select tk_phase(name) as phase, count(*) as n from events where tk_is_phase_range(category, is_instant, name) group by all",
]


@needs_spark
@pytest.mark.parametrize("q", USER_QUERIES)
def test_user_queries(spark, fixture_store, q):
    from tracekit.spark import session as S

    db, dataset = fixture_store
    S.register_dataset(spark, dataset)
    S.register_views(spark, names=V.referenced(q))
    expected = _duck_rows(db, q)
    got = S.to_arrow(S.query(spark, q)).to_pylist()
    assert expected, q  # the query has rows to compare
    assert same_rows(expected, got) is None


@needs_spark
def test_a_parameter_changes_rows_the_same_way(spark, fixture_store):
    from tracekit.spark import session as S

    db, dataset = fixture_store
    q = "select count(*) as n, sum(dur_ns) as ns from idle_gaps where cause = 'kernel_wait'"
    S.register_dataset(spark, dataset)
    got = {}
    for p in (None, {"kernel_wait_ns": 1_000_000}):
        S.register_views(spark, params=p, names=["idle_gaps"])
        got[str(p)] = (_duck_rows(db, q, p), S.to_arrow(S.query(spark, q, p)).to_pylist())
    (d0, s0), (d1, s1) = got.values()
    assert d0 != d1  # the parameter changes the rows
    assert same_rows(d0, s0) is None and same_rows(d1, s1) is None


@needs_spark
def test_sql_api_one_call(spark, fixture_store):
    from tracekit.spark import session as S

    db, dataset = fixture_store
    q = "select kind, count(*) as n, sum(dur_ns) as ns from gpu_activity group by kind"
    tbl = S.sql(dataset, q, spark=spark)
    assert tbl.num_rows > 1
    assert same_rows(_duck_rows(db, q), tbl.to_pylist()) is None


def test_not_a_dataset_is_one_line(tmp_path):
    from tracekit.spark import session as S

    with pytest.raises(FileNotFoundError, match="not a tracekit Parquet export"):
        S.register_dataset(None, tmp_path)


def test_to_spark_user_queries():
    assert T.to_spark("select * from idle_gaps where dur_ns > 1000") == \
        "SELECT * FROM idle_gaps WHERE dur_ns > 1000"
    # the library's macros and DuckDB's spellings work in a user's query too
    out = T.to_spark("select tk_phase(name), d[1], arg_max(a, b) from events")
    assert "tk_phase" not in out.lower() and "ELEMENT_AT(d, 1)" in out and "MAX_BY(a, CASE" in out
    with pytest.raises(T.TranslationError, match="one statement expected"):
        T.to_spark("select 1; select 2")
    with pytest.raises(T.TranslationError, match="cannot parse"):
        T.to_spark("select from where (")


@needs_spark
def test_printf_as_c(spark):
    """printf's %f and %g on Spark write DuckDB's (C's) text: ties to even (12.5 -> '12', where
    Java's half-up gives '13': kernel_latency's occupancy text), binary values below a tie
    (2.675 -> '2.67'), trailing zeros of %g dropped."""
    import duckdb

    from tracekit.spark import session as S

    values = [12.5, 13.5, 0.5, 1.5, 2.675, 1.005, -12.5, -0.5, 0.125, 7.0, 99.95, 1234567.5, 0.0606, 3e20, None]
    q = ("select x, printf('%.0f|%.2f|%.1f %%|%f|%.3g', x, x, x, x, x) as s from (values "
         + ", ".join(f"({'NULL' if v is None else repr(float(v))}::double)" for v in values) + ") t(x)")
    expected = duckdb.sql(q).fetchall()
    got = [tuple(r) for r in S.query(spark, q).collect()]
    assert sorted(got, key=str) == sorted(expected, key=str)
    assert ("12|12.50|12.5 %|12.500000|12.5") in [s for _, s in expected]


@needs_spark
@pytest.mark.parametrize("partitioned", [False, True])
def test_export_under_glob_characters_reads_back(spark, tmp_path, partitioned):
    """Issue 49 item 17 on Spark: an export under `run[1]/` (glob characters Spark would expand)
    is read literally, not matched as a pattern (a decoy export `run1/` holds other rows)."""
    import tracekit
    from tracekit.spark import session as S
    from tracekit.store import Store

    def export(src, where):
        db = tmp_path / f"{where.name}.duckdb"
        tracekit.convert([str(F.FIX / src)], db=str(db))
        with Store(str(db), sandbox=False) as st:
            st.export_parquet(where, partitioned=partitioned)
            return st.one("select count(*) from kernels")

    n = export("kineto/graphs.json.gz", tmp_path / "run[1]")
    decoy = export("kineto/decode_b1.json.gz", tmp_path / "run1")
    assert n != decoy
    S.register_dataset(spark, tmp_path / "run[1]")
    assert spark.sql("select count(*) as n from kernels").collect()[0]["n"] == n
