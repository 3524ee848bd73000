"""tracekit's views on Apache Spark: the DuckDB definitions translated (translate.py, no pyspark
needed) and run over a Parquet export of a store (session.py, pyspark imported when used)."""
