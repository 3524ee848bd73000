#!/usr/bin/env python3
"""Every tracekit view on Apache Spark SQL against DuckDB, with timings (docs/scaling.md).

    python bench/spark_views.py OUT TRACE... [--view NAME]... [--master URL] [--conf KEY=VALUE]...

Converts the traces into OUT/store.duckdb, exports it as the partitioned Parquet dataset
OUT/parquet (docs/scaling.md), starts one Spark session (local[*] unless --master), registers the
tables and every view (tracekit/spark: each view translated from its one DuckDB definition), and
prints one line per view: its rows, Spark's time, and whether the rows are DuckDB's (the
comparison of tests/spark_rows.py). tests/scale/test_spark.py is the test; this is the tool to try
other traces or a cluster. Needs pyspark and Java 17+ (pip install 'tracekit-gpu[spark]').
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--view", action="append", default=[])
    ap.add_argument("--master", default=None)
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting, as tracekit's --spark-conf (e.g. spark.executor.memory=2g)")
    a = ap.parse_args(argv)

    import tracekit
    from spark_rows import same_rows
    from tracekit.spark import session as S
    from tracekit.spark import translate as T
    from tracekit.store import Store

    out = Path(a.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    tracekit.convert(a.traces, db=str(out / "store.duckdb"))
    with Store(str(out / "store.duckdb"), sandbox=False) as st:
        st.export_parquet(out / "parquet", partitioned=True)
    spark = S.session(a.master, dict(c.split("=", 1) for c in a.conf))
    S.register_dataset(spark, out / "parquet")
    st = tracekit.open(str(out / "store.duckdb"))
    same = 0
    views = T.spark_views()
    for name, text in views:
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW `{name}` AS {text}")
        if a.view and name not in a.view:
            continue
        t = time.perf_counter()
        try:
            got = S.to_arrow(spark.sql(f"SELECT * FROM `{name}`")).to_pylist()
        except Exception as e:  # noqa: BLE001
            print(f"{name:26s} did not run on Spark: {S.first_line(e)[:200]}")
            continue
        dt = time.perf_counter() - t
        why = same_rows(st.con.sql(f"SELECT * FROM {name}").to_arrow_table().to_pylist(), got)
        same += why is None
        print(f"{name:26s} {len(got):7d} rows {dt:7.2f} s  {'same as DuckDB' if why is None else 'DIFFERENT: ' + why[:200]}")
    st.close()
    spark.stop()
    print(f"{same} of {len(a.view) or len(views)} views gave DuckDB's rows on Spark")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
