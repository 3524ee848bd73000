"""tracekit on Apache Spark: the views' DuckDB definitions translated (translate.py, no pyspark
needed), run over a Parquet dataset (session.py, engine.SparkEngine; pyspark imported when used), and
many inputs converted as Spark tasks (convert.py)."""


def __getattr__(name):  # SparkEngine without importing pyspark until it is used
    if name in ("SparkEngine", "SparkQueryError", "SparkUnavailable"):
        from . import engine

        return getattr(engine, name)
    raise AttributeError(name)
