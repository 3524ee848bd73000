"""tracekit: one schema and one SQL layer for Nsight Systems, Nsight Compute and torch.profiler traces."""

__version__ = "0.1.0"
#: The distribution name (pyproject.toml's [project] name): what `pip install` takes.  The import
#: package, the command and the store stay `tracekit`; on PyPI, `tracekit` is an unrelated project.
DISTRIBUTION = "tracekit-gpu"


#: pyarrow's memory pool in a process tracekit owns (`own_process`): glibc's malloc, through
#: ARROW_DEFAULT_MEMORY_POOL, which pyarrow reads once. pyarrow's default, mimalloc, keeps more
#: of what was freed: ~30 MB (~10 %) more peak RSS for a conversion, in the same time
#: (docs/scaling.md, "Knobs").
OWN_ARROW_POOL = "system"


def own_process() -> None:
    """Mark this process as tracekit's own (the `tracekit` command, its conversion workers, a
    benchmark job), so that it may be tuned as a whole: pyarrow's memory pool (OWN_ARROW_POOL,
    unless ARROW_DEFAULT_MEMORY_POOL is set or pyarrow is loaded already: call this first) and,
    while converting, the garbage collector (store.OWN_PROCESS). A program that uses tracekit as
    a library does not call it, and nothing process-wide changes."""
    import os
    import sys

    if "pyarrow" not in sys.modules:
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", OWN_ARROW_POOL)
    with _imports_without_gc():
        from . import store

    store.OWN_PROCESS = True


class _imports_without_gc:
    """Python's cyclic garbage collector paused while a process tracekit owns imports DuckDB,
    pyarrow and tracekit, whose many long-lived objects would set off ~70 collections (~7 % of
    the imports' time); then those objects are frozen (`gc.freeze`: module-level objects,
    which live as long as the process; else the first collection after would go over them all)
    and the collector restored as it was."""

    def __enter__(self):
        import gc

        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        import gc

        if self.was:
            gc.freeze()
            gc.enable()


def _command() -> None:
    """The `tracekit` command (and `python -m tracekit`): its own process, then the CLI."""
    with _imports_without_gc():
        own_process()
        from .cli import entry

    entry()


def install_hint(extra: str) -> str:
    """How to install an optional extra, from an index and from a clone of the repository."""
    return f"pip install '{DISTRIBUTION}[{extra}]' (in a clone: pip install -e '.[{extra}]')"


def open(path="tracekit.duckdb", read_only=True, sandbox=None):  # noqa: A001
    """Open a store: ``tracekit.open("tracekit.duckdb").sql("select * from hotspots")``.

    ``.sql()`` returns a DuckDB relation: ``.to_arrow_table()``, ``.pl()`` (polars), ``.fetchall()``.
    A read-only store is sandboxed: its SQL cannot read or write other files, reach the network
    or load extensions, and cannot change that (``tracekit.store.SANDBOX``); pass
    ``sandbox=False`` for a store whose SQL you write yourself and that needs more.
    ``path`` may also be the folder of a Parquet export (``convert --parquet DIR``, flat or
    ``--partitioned``): the same views over its files (``tracekit.store.open_parquet``).
    """
    from .api import open_store

    return open_store(path, read_only=read_only, sandbox=sandbox)


def convert(paths, db="tracekit.duckdb", replace=False, jobs=1, own_process=False, allow_duplicate=False,
            memory_budget=None):
    """Convert trace files into a store (`tracekit.api.convert`, as ``tracekit convert`` does);
    returns the per-source summaries.  A bad input raises (TraceError) and leaves the store as it
    was; so does a store that cannot be written (StoreError, one line).  ``jobs``: convert up to that many inputs at once,
    each in a worker process (None: one per CPU); the store is the same as with ``jobs=1``
    (tracekit/parallel.py).  ``own_process``: the caller owns this process, so the conversion may
    pause the garbage collector and switch pyarrow's memory pool while it runs (~10 % faster;
    store.OWN_PROCESS); by default it changes nothing process-wide.  An input whose content is
    already a source of the store, or given twice, raises StoreError and nothing is converted,
    unless ``allow_duplicate`` (tracekit/fingerprint.py).  ``memory_budget``: the peak memory of
    the conversion per process, e.g. ``"400MB"`` (None: $TRACEKIT_MEMORY_BUDGET, else 400 MB;
    tracekit/budget.py); a bad value raises BudgetError (a ValueError) before any work."""
    from .api import convert as convert_inputs
    from .native import missing_notice

    note = missing_notice()
    if note:
        import warnings

        warnings.warn(note.removeprefix("tracekit: note: "), RuntimeWarning, stacklevel=2)
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [paths]
    return convert_inputs(paths, db, replace=replace, jobs=jobs, own_process=own_process,
                          allow_duplicate=allow_duplicate, memory_budget=memory_budget).summaries


def profile(db="tracekit.duckdb", **kwargs):
    """Capture with torch.profiler and convert into ``db`` on exit (see tracekit.capture)::

        with tracekit.profile("run.duckdb") as cap:
            model(x)
        print(cap.diagnose())
    """
    from .capture import profile as _profile

    return _profile(db, **kwargs)
