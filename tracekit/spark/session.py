"""Run tracekit's views on Apache Spark over a Parquet export of a store (docs/scaling.md).

    from tracekit.spark import session as S
    tbl = S.sql("run.parquet", "select * from idle_gaps where dur_ns > 1000")  # a pyarrow.Table

``session(master)`` starts (or reuses) a SparkSession: ``local[*]`` by default, or a cluster's
master URL. ``register_dataset`` makes every table of tracekit's schema a temporary view over the
export (the Hive-partitioned ``DIR/<table>/source_id=<n>/`` dataset or the flat
``DIR/<table>.parquet`` files), ``register_views`` creates every view from its DuckDB
definition (tracekit/spark/translate.py). pyspark is imported only here, when used.

Session settings, and why:
  spark.sql.ansi.enabled=false        DuckDB's semantics where the views rely on them: a division
                                      by zero or a list index out of range is NULL, not an error
  spark.sql.parser.quotedRegexColumnNames=true
                                      SELECT * EXCLUDE (a) is translated to a regex column
  spark.sql.legacy.sizeOfNull=false   (for a user's size(x)): NULL for NULL, as DuckDB
  spark.sql.session.timeZone=UTC      no local time zone in any result
  spark.sql.shuffle.partitions        local masters only: 4 (the default 200 makes every small
                                      shuffle of the views slow); a cluster keeps its own
  spark.pyspark.python                local masters only: this Python (the one with tracekit) for
                                      the workers; on a cluster, install tracekit on the executors
  spark.driver.memory 3g, spark.sql.broadcastTimeout 1800 s
                                      any master (the driver is this process): the largest
                                      views' plans need the memory (with Spark's 1g the driver
                                      runs out of heap on the fixtures' views), and a loaded
                                      machine the time
  spark.executor.memory               not set: a cluster's own (spark-defaults.conf), else Spark's
                                      1g, which is too little for every view in one session (an
                                      executor runs out of heap on steady_state): give 2g with
                                      ``conf`` / --spark-conf
``conf`` (tracekit's --spark-conf KEY=VALUE) goes over all of these.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from tracekit import schema
from tracekit.spark import translate as T

INSTALL = "pip install 'tracekit-gpu[spark]'"

_CONF = {
    "spark.sql.ansi.enabled": "false",
    "spark.sql.parser.quotedRegexColumnNames": "true",
    "spark.sql.legacy.sizeOfNull": "false",
    "spark.sql.session.timeZone": "UTC",
}


class SparkUnavailable(RuntimeError):
    """pyspark or Java is missing (the message says how to get them)."""


def _pyspark():
    try:
        import pyspark  # noqa: F401
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkUnavailable(f"the Spark engine needs pyspark: {INSTALL} (and Java 17+)") from None
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise SparkUnavailable(f"the Spark engine needs Java 17+ on PATH (or JAVA_HOME) besides pyspark ({INSTALL})")
    return SparkSession


LOG = Path(tempfile.gettempdir()) / f"tracekit-spark-{os.getuid() if hasattr(os, 'getuid') else 0}.log"


@contextlib.contextmanager
def _java_output_to_log():
    """The JVM that pyspark starts inherits this process's standard error and prints its start-up
    lines there (the incubator-module warning, the default log level); it writes to LOG instead
    (appended; Spark's own errors are raised to tracekit, which reports them in one line)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real standard error (e.g. captured): nothing to do
        yield
        return
    try:
        with open(LOG, "ab") as log:
            os.dup2(log.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def session(master: str | None = None, conf: dict | None = None):
    """A SparkSession with tracekit's settings (see the module's doc); ``master`` defaults to
    ``local[*]``; ``conf`` adds or overrides Spark settings."""
    SparkSession = _pyspark()
    master = master or "local[*]"
    b = SparkSession.builder.master(master).appName("tracekit")
    settings = dict(_CONF)
    settings.update({"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
    if master.startswith("local"):
        # this Python (with tracekit and pyarrow) for the workers too, not the PATH's python3; Spark's
        # log lines at error level only (log4j2.properties beside this file)
        log4j = f"-Dlog4j2.configurationFile=file:{Path(__file__).with_name('log4j2.properties')}"
        settings.update({"spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable,
                         "spark.driver.extraJavaOptions": log4j, "spark.executor.extraJavaOptions": log4j})
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # what pyspark's SparkContext reads
        settings.update({"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4"})
    # any master: the driver is this process (client mode), and it plans the largest views
    settings.update({"spark.driver.memory": "3g", "spark.sql.broadcastTimeout": "1800"})
    settings.update(conf or {})
    for k, v in settings.items():
        b = b.config(k, v)
    try:
        with _java_output_to_log():
            spark = b.getOrCreate()
    except Exception as e:  # noqa: BLE001 - Java missing or not startable: one line
        raise SparkUnavailable(f"cannot start Spark ({str(e).splitlines()[0][:200]}); {INSTALL}, Java 17+") from None
    spark.sparkContext.setLogLevel("OFF")
    import logging

    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)  # a failed query: the error is raised
    for k in _CONF:  # a reused session gets them too (runtime settings; ``conf`` over them)
        spark.conf.set(k, settings[k])
    return spark


def _spark_type(t) -> str:
    import pyarrow as pa

    return {pa.int32(): "INT", pa.int64(): "BIGINT", pa.float64(): "DOUBLE", pa.string(): "STRING",
            pa.bool_(): "BOOLEAN"}[t]


def _no_glob(path: str) -> str:
    """A path as Hadoop reads it literally: its glob characters escaped (Spark expands [ ] { } * ?
    in a path it reads, so an export under `run[1]/` would match nothing)."""
    return re.sub(r"([\\\[\]{}*?])", r"\\\1", path)


def register_dataset(spark, dataset_dir: str | os.PathLike, cache: bool = False) -> list[str]:
    """Every table of tracekit's schema as a temporary view over the Parquet export in
    ``dataset_dir``, with the schema's columns and types in the schema's order (source_id, the
    partition column, included); a table with no files is an empty view of those columns.
    ``cache``: keep the tables in Spark's memory once read (the views read most tables many
    times; for a dataset that fits in the cluster's memory). Returns the table names. A path that is not a local folder (hdfs://, s3a://) is read as the
    partitioned layout."""
    d = str(dataset_dir)
    local = "://" not in d
    if local:
        p = Path(d)
        if not p.is_dir():
            raise FileNotFoundError(f"{d}: no such folder; write one with `tracekit convert TRACE --parquet {d} --partitioned`")
        flat = {t.name for t in schema.TABLES if (p / f"{t.name}.parquet").is_file()}
        parts = {t.name for t in schema.TABLES if any(p.glob(f"{t.name}/source_id=*/*.parquet"))}
        if not flat and not parts:
            raise FileNotFoundError(f"{d}: not a tracekit Parquet export (neither <table>.parquet files nor "
                                    "<table>/source_id=<n>/ folders)")
        if flat and parts:
            raise ValueError(f"{d}: holds both the flat and the partitioned layout; export into an empty folder")
    for t in schema.TABLES:
        ddl = ", ".join(f"`{c.name}` {_spark_type(c.type)}" for c in t.columns)
        cols = ", ".join(f"CAST(`{c.name}` AS {_spark_type(c.type)}) AS `{c.name}`" for c in t.columns)
        if local and t.name in flat:
            df = spark.read.parquet(_no_glob(str(Path(d) / f"{t.name}.parquet")))
        elif not local or t.name in parts:
            # the partition column's type from the schema, not inferred
            df = (spark.read.option("basePath", f"{d.rstrip('/')}/{t.name}")
                  .schema(ddl).parquet(_no_glob(f"{d.rstrip('/')}/{t.name}")))
        else:
            df = spark.createDataFrame([], ddl)
        df.createOrReplaceTempView(f"__tk_raw_{t.name}")
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW `{t.name}` AS SELECT {cols} FROM `__tk_raw_{t.name}`")
        if cache:
            spark.catalog.cacheTable(t.name)
    return [t.name for t in schema.TABLES]


def register_views(spark, params: dict | None = None, names: list[str] | None = None,
                   materialize: bool = True) -> list[str]:
    """Create tracekit's views (all, or ``names`` with the views they use) as temporary views,
    translated from their DuckDB definitions; ``params`` as `tracekit sql --param`.
    ``materialize`` (the default): each view that other views read (gpu_launches, idle_gaps,
    kernel_latency, ...) is computed once, here, and kept (_materialize); otherwise Spark inlines
    its definition at every reference."""
    from tracekit import views as V

    wanted = V.creation_order() if names is None else V.referenced(" ".join(names))
    read_by_views = {u for v in V.all_views() for u in v.uses}
    for name in wanted:
        text = T.spark_view(name, params)
        try:
            spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW `{name}` AS {text}")
        except Exception as e:  # noqa: BLE001 - Spark's analysis error, as one line
            raise RuntimeError(f"view {name} on Spark: {first_line(e)}") from None
        if materialize and name in read_by_views:
            _materialize(spark, name)
    return wanted


def _materialize(spark, name: str) -> None:
    """Replace view ``name`` by its computed rows (an eager local checkpoint: kept in the
    executors' memory, spilled to their disks), so that the views reading it plan a scan of those
    rows instead of its whole definition again. Spark inlines a view at every reference; CACHE
    LAZY TABLE reuses the rows but every plan still carries the shared views' whole plans
    (thousands of lines, hundreds of broadcasts: minutes per view and a 3 GB driver out of
    memory). With this, hotspots_bound's plan has ~120 lines and no broadcast, and the views run
    ~3x faster.
    On a cluster the rows live on the executors: a lost executor loses them (run the query again)."""
    df = spark.table(f"`{name}`").localCheckpoint(eager=True)
    df.createOrReplaceTempView(name)


def first_line(e: Exception) -> str:
    """Spark's error as one line: the Java exception's message where py4j wraps one."""
    import re

    s = str(e).strip()
    if s.startswith("An error occurred while calling"):
        m = re.search(r"(\w+(?:Exception|Error)): ([^\n]*)", s)
        if m:
            return m.group(0)[:500]
    return (s.splitlines()[0] if s else type(e).__name__)[:500]


def query(spark, q: str, params: dict | None = None):
    """A DuckDB-dialect query as a Spark DataFrame (tables and views must be registered)."""
    return spark.sql(T.to_spark(q, params))


def to_arrow(df):
    """A DataFrame's rows as a pyarrow.Table."""
    if hasattr(df, "toArrow"):  # pyspark >= 4.0
        return df.toArrow()
    import pyarrow as pa

    return pa.Table.from_pandas(df.toPandas())


def sql(dataset_dir: str | os.PathLike, q: str, master: str | None = None, params: dict | None = None,
        spark=None):
    """Run a DuckDB-dialect query over a Parquet export on Spark, every view available; the rows
    as a pyarrow.Table."""
    from tracekit import views as V

    spark = spark or session(master)
    register_dataset(spark, dataset_dir)
    register_views(spark, params, names=V.referenced(q))
    return to_arrow(query(spark, q, params))
