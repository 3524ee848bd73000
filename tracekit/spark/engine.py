"""`tracekit sql --engine spark` and the Python API: one Spark session over a Parquet dataset,
with every view registered, answering queries written in DuckDB's dialect as Arrow tables.

    from tracekit.spark import SparkEngine
    with SparkEngine("dataset/", master="local[*]") as eng:
        gaps = eng.query("select * from idle_gaps order by dur_ns desc limit 10")  # pyarrow.Table

The views and the query are translated from DuckDB's SQL by `translate` (one definition of each
view: its sql/*.sql file); `session` starts Spark and registers the dataset's tables.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ..store import StoreError
from .session import SparkUnavailable, first_line

__all__ = ["SparkEngine", "SparkQueryError", "SparkUnavailable"]


class SparkQueryError(Exception):
    """A query could not be translated or failed on Spark (one line: Spark's reason)."""


class SparkEngine:
    """A Spark session over the tracekit Parquet dataset ``dataset`` (partitioned or flat; a
    local folder, or an hdfs:// / s3a:// URL read as the partitioned layout), its tables
    registered; each query registers the views it reads.  ``params``: view parameters
    (``--param``).  ``conf``: Spark settings over tracekit's (`session.session`).  ``spark``: an
    existing SparkSession (left running by `close`)."""

    def __init__(self, dataset, master: str | None = None, params: dict | None = None, spark=None,
                 conf: dict | None = None):
        from . import session as s

        d = str(dataset)
        if "://" not in d and not Path(d).is_dir():
            raise StoreError(f"{d}: not a folder; --engine spark reads a Parquet export: write one with "
                             f"`tracekit convert TRACE --parquet {d} --partitioned`")
        self.params = dict(params or {})
        self._own = spark is None
        self.spark = spark if spark is not None else s.session(master, conf)
        try:
            s.register_dataset(self.spark, d)
        except (FileNotFoundError, ValueError) as e:
            self.close()
            raise StoreError(str(e)) from None

    def query(self, sql: str) -> pa.Table | None:
        """The rows of one statement (DuckDB's dialect) as an Arrow table."""
        from .. import views
        from . import session as s
        from .translate import to_spark

        try:
            text = to_spark(sql, self.params)
        except Exception as e:  # noqa: BLE001 - sqlglot's parse / unsupported errors
            raise SparkQueryError(f"cannot translate to Spark SQL: {first_line(e)}") from None
        try:
            s.register_views(self.spark, self.params, names=views.referenced(sql))
            return s.to_arrow(self.spark.sql(text))
        except Exception as e:  # noqa: BLE001 - Spark's AnalysisException, ParseException, ...
            raise SparkQueryError(first_line(e)) from None

    def close(self) -> None:
        if self._own:
            self.spark.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
