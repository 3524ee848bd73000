"""tracekit: one schema and one SQL layer for Nsight Systems, Nsight Compute and torch.profiler traces."""

__version__ = "0.1.0"


def open(path="tracekit.duckdb", read_only=True):  # noqa: A001
    """Open a store: ``tracekit.open("tracekit.duckdb").sql("select * from hotspots")``.

    ``.sql()`` returns a DuckDB relation: ``.to_arrow_table()``, ``.pl()`` (polars), ``.fetchall()``.
    """
    from .store import Store

    return Store(path, read_only=read_only)


def convert(paths, db="tracekit.duckdb", replace=False):
    """Convert trace files into a store; returns the per-source summaries."""
    from .store import writing

    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [paths]
    with writing(db, replace=replace) as st:
        return [st.convert(p) for p in paths]


def profile(db="tracekit.duckdb", **kwargs):
    """Capture with torch.profiler and convert into ``db`` on exit (see tracekit.capture)::

        with tracekit.profile("run.duckdb") as cap:
            model(x)
        print(cap.diagnose())
    """
    from .capture import profile as _profile

    return _profile(db, **kwargs)
