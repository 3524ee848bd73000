#!/usr/bin/env python3
"""Run tracekit's views on Apache Spark SQL over a partitioned Parquet dataset (docs/scaling.md).

    # 1. with tracekit's environment: a store, its partitioned Parquet export, DuckDB's answers
    python bench/spark_views.py prepare DIR TRACE...
    # 2. with an environment holding pyspark and sqlglot (Java 17+ on PATH), never tracekit's:
    python bench/spark_views.py spark DIR [VIEW...]

``prepare`` converts the traces into DIR/store.duckdb, writes DIR/parquet/<table>/source_id=<n>/
and each view's result as DuckDB computes it into DIR/expected/<view>.parquet.  ``spark`` starts a
local Spark session (master local[*]: the same code runs on a cluster), registers each table as
a temporary view over DIR/parquet/<table> (Spark finds the source_id partitions itself),
translates each view's SQL file from DuckDB's dialect to Spark's with sqlglot, and compares
every result with DuckDB's (same rows; floats to 1e-6 relative).  It prints one line per view:
ran and matched, ran and differed, or could not be translated/run (with Spark's reason).
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def prepare(d: Path, traces: list[str]) -> None:
    import shutil

    import pyarrow.parquet as pq

    import tracekit
    from tracekit import schema, views
    from tracekit.store import Store

    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    tracekit.convert(traces, db=d / "store.duckdb", replace=True)
    with Store(d / "store.duckdb", read_only=True) as st:
        st.export_parquet(d / "parquet", partitioned=True)
        (d / "empty").mkdir()
        for t in schema.TABLES:  # the column types of tables with no rows (no partition files)
            pq.write_table(t.arrow.empty_table(), d / "empty" / f"{t.name}.parquet")
        (d / "expected").mkdir()
        for v in views.all_views():
            try:
                st.con.execute(f"COPY (SELECT * FROM {v.name}) TO '{d / 'expected' / v.name}.parquet' "
                               "(FORMAT parquet)")
            except Exception as e:  # noqa: BLE001 - a view that needs tables this store lacks
                print(f"{v.name}: not computed by DuckDB either ({str(e).splitlines()[0]})")
    print(f"wrote {d}/store.duckdb, {d}/parquet, {d}/expected")


def _views_in_order() -> list[tuple[str, str]]:
    """(name, SELECT text) of each sql/*.sql, in file order."""
    out = []
    for p in sorted((REPO / "sql").glob("*.sql")):
        text = "\n".join(line for line in p.read_text().splitlines() if not line.lstrip().startswith("--"))
        m = re.search(r"CREATE\s+OR\s+REPLACE\s+VIEW\s+(\w+)\s+AS\s+(.*)", text, re.S | re.I)
        out.append((m.group(1), m.group(2).strip().rstrip(";")))
    return out


def _portable(sql: str) -> str:
    """The two DuckDB-only spellings the views use, in forms sqlglot carries over to Spark:
    view parameters (`getvariable('x')`, always inside coalesce(..., default)) become NULL, so
    the documented defaults apply; quantile_cont(x, q) (exact, interpolated) is Spark's
    percentile(x, q)."""
    sql = re.sub(r"getvariable\('\w+'\)", "NULL", sql, flags=re.I)
    return re.sub(r"\bquantile_cont\(", "percentile(", sql, flags=re.I)


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-6) or (
            math.isnan(float(a)) and math.isnan(float(b)))
    return a == b


def spark(d: Path, only: list[str]) -> int:
    import pyarrow.parquet as pq
    import sqlglot
    from pyspark.sql import SparkSession

    sp = (SparkSession.builder.master("local[*]").appName("tracekit-views")
          .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
          .config("spark.sql.session.timeZone", "UTC").config("spark.sql.ansi.enabled", "false")
          .getOrCreate())
    sp.sparkContext.setLogLevel("FATAL")
    for t in sorted(p.stem for p in (d / "empty").iterdir()):
        part = d / "parquet" / t
        src = part if any(part.glob("*/*.parquet")) else d / "empty" / f"{t}.parquet"
        sp.read.parquet(str(src)).createOrReplaceTempView(t)
    pending = _views_in_order()
    results = {}
    for _ in range(3):  # views using other views: retry those that failed on a missing view
        left = []
        for name, body in pending:
            try:
                sql = sqlglot.transpile(_portable(body), read="duckdb", write="spark")[0]
                sp.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {sql}")
                results[name] = None
            except Exception as e:  # noqa: BLE001
                results[name] = f"not translated/created: {str(e).splitlines()[0][:160]}"
                left.append((name, body))
        if len(left) == len(pending):
            break
        pending = left
    ok = 0
    for name, _ in _views_in_order():
        if only and name not in only:
            continue
        exp_path = d / "expected" / f"{name}.parquet"
        if results.get(name):
            print(f"{name:24s} {results[name]}")
            continue
        if not exp_path.exists():
            print(f"{name:24s} no DuckDB result to compare with")
            continue
        try:
            got = [tuple(r) for r in sp.sql(f"SELECT * FROM {name}").collect()]
        except Exception as e:  # noqa: BLE001
            m = re.search(r"(\w+(?:Exception|Error)): ([^\n]*)", str(e))
            print(f"{name:24s} did not run on Spark: {(m.group(0) if m else str(e).splitlines()[0])[:200]}")
            continue
        exp = pq.read_table(exp_path).to_pylist()
        exp = [tuple(r.values()) for r in exp]
        key = lambda r: tuple((x is None, str(x)) for x in r)  # noqa: E731
        same = len(got) == len(exp) and all(
            len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
            for a, b in zip(sorted(got, key=key), sorted(exp, key=key)))
        ok += same
        print(f"{name:24s} ran on Spark: {len(got)} rows, "
              f"{'same as DuckDB' if same else f'DIFFERENT from DuckDB ({len(exp)} rows)'}")
    sp.stop()
    print(f"{ok} views gave DuckDB's result on Spark")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("prepare", "spark"):
        print(__doc__)
        sys.exit(2)
    if sys.argv[1] == "prepare":
        prepare(Path(sys.argv[2]), sys.argv[3:])
    else:
        sys.exit(spark(Path(sys.argv[2]), sys.argv[3:]))
