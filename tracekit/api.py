"""The Python API that `tracekit` (tracekit/cli.py), `tracekit.convert`, `tracekit.profile` and
the tests share: each operation a plain function that raises StoreError, TraceError, BudgetError
or OutputError with a one-line message, and prints nothing (what it reports goes to callbacks).
The SQL command's statements and result writers are in tracekit/api_sql.py."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import budget, views
from .adapters.base import TraceError
from .store import DEFAULT_DB, Rollback, SourceSummary, Store, StoreError, os_error_line, writing
from .store import open as store_open


def open_store(path: str | os.PathLike = DEFAULT_DB, read_only: bool = True, sandbox: bool | None = None) -> Store:
    """A store opened for queries, read-only and sandboxed unless told (`tracekit.open`); a
    folder is a Parquet export."""
    return store_open(path, read_only=read_only, sandbox=sandbox)


# -- parameters -----------------------------------------------------------------------------------
def param_value(text: str) -> int | float | str:
    """A parameter's value: an integer, else a number, else the text."""
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_params(items: Sequence[str], option: str = "--param") -> dict:
    """``["NAME=VALUE", ...]`` as ``{name: value}`` (`param_value`); a name no view reads is
    refused (it would change nothing), naming the parameters the views read."""
    out = {}
    for p in items or ():
        name, sep, value = p.partition("=")
        if not sep or not name.isidentifier():
            raise StoreError(f"{option} {p!r}: expected NAME=VALUE")
        if name not in views.all_parameters():
            raise StoreError(f"{option} {name}: no view reads a parameter of that name; the parameters are "
                             f"{', '.join(views.all_parameters())} (`tracekit views --doc VIEW` says which view "
                             "reads which)")
        out[name] = param_value(value)
    return out


def set_params(store: Store, values: dict) -> None:
    """The view parameters ``{name: value}`` set on the store's connection (DuckDB variables)."""
    for name, value in values.items():
        if value is not None:
            store.con.execute(f"SET VARIABLE {name} = ?", [value])


def parse_pairs(items: Sequence[str], option: str, example: str) -> dict:
    """``KEY=VALUE`` options (e.g. --spark-conf) as a dict; a pair without '=' or a key is refused."""
    out = {}
    for p in items or ():
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            raise StoreError(f"{option} {p!r}: expected KEY=VALUE, e.g. {example}")
        out[key.strip()] = value
    return out


def spark_only(master, conf) -> None:
    """StoreError when a Spark option (--master, --spark-conf) is given without --engine spark."""
    if master or conf:
        raise StoreError(("--master" if master else "--spark-conf") + " needs --engine spark")


# -- conversion -----------------------------------------------------------------------------------
def memory_budget(value, option: str = "memory budget") -> int | None:
    """The memory budget ``value`` in bytes (None: none given), checked with the one in force
    ($TRACEKIT_MEMORY_BUDGET), before any work: BudgetError in one line."""
    n = None if value is None else budget.parse(value, option)
    with budget.using(n):
        budget.current()
    return n


def expand_directories(inputs: Sequence[str | os.PathLike],
                       skipped: Callable[[Path, str], None] | None = None) -> list[Path]:
    """A directory input stands for the trace files directly inside it (HTA's trace_dir), in name
    order, one source each; every other file in it is skipped, ``skipped(path, why)``: not a
    format tracekit reads (by content), a JSON file that is not a trace, a subdirectory (not
    searched), an .nsys-rep / .qdrep whose .sqlite export lies beside it (the same capture)."""
    out: list[Path] = []
    for d in map(Path, inputs):
        if not d.is_dir():
            out.append(d)
            continue
        try:
            entries = sorted(d.iterdir(), key=lambda p: p.name)
        except OSError as e:
            raise StoreError(os_error_line(e, d)) from None
        names = {p.name for p in entries}
        found = 0
        for p in entries:
            why = _not_a_trace(p, names)
            if why:
                if skipped:
                    skipped(p, why)
            else:
                out.append(p)
                found += 1
        if not found:
            raise StoreError(f"{d}: no trace files in it (Kineto .json / .json.gz, nsys .sqlite / .nsys-rep, "
                             "ncu CSV / .ncu-rep, detected by content); pass a folder holding traces, or the files")
    return out


def _not_a_trace(p: Path, names: set[str]) -> str | None:
    """Why the file ``p`` of a directory input is skipped, or None to convert it."""
    from .adapters.detect import Probe, sniff

    if p.is_dir():
        return "a directory (not searched: pass it as an input)"
    if p.suffix.lower() in (".nsys-rep", ".qdrep") and p.stem + ".sqlite" in names:
        return f"the same capture as {p.stem}.sqlite beside it, which is converted"
    try:
        if sniff(p) == "kineto":
            probe = Probe(p)
            head = probe.head
            if probe.error is not None:
                return probe.error.what
            if b'"traceEvents"' not in head and b'"ph"' not in head:
                return "JSON without 'traceEvents' or 'ph' in its first 64 KiB: not a trace"
    except TraceError as e:
        return e.what
    except OSError as e:
        return os_error_line(e, p)
    return None


def check_not_store(inputs: Sequence[Path], db) -> None:
    """StoreError when an input is the store itself (the conversion would overwrite it)."""
    for p in inputs:
        if Path(db).exists() and p.exists() and os.path.samefile(p, db):
            raise StoreError(f"{db}: is also an input; the store would overwrite it: choose another --db")


@dataclass
class Outcome:
    """One input's result: its summary, or the one-line error (nothing of it was added)."""

    path: Path
    summary: SourceSummary | None = None
    error: str | None = None
    exception: Exception | None = None


@dataclass
class Converted:
    """What `convert` did: the summaries of the inputs converted, how many failed, a note when
    the store was kept as it was, and the files of the Parquet export."""

    summaries: list[SourceSummary] = field(default_factory=list)
    failed: int = 0
    note: str | None = None
    exported: list[str] | None = None


#: ``progress(label, size, fraction)``: the conversion's progress, ``label`` naming what converts
#: ("converting NAME", or "converting N inputs (K at once)"), ``size`` its bytes.
Progress = Callable[[str, int, float], None]


def convert(inputs: Sequence[str | os.PathLike], db: str | os.PathLike = DEFAULT_DB, *, format: str | None = None,
            rank: int | None = None, strict: bool = False, replace: bool = False, allow_duplicate: bool = False,
            jobs: int | None = 1, memory_budget: int | str | None = None, parquet: str | os.PathLike | None = None,
            partitioned: bool = False, keep_going: bool = False, own_process: bool = False,
            on_result: Callable[[Outcome], None] | None = None, progress: Progress | None = None,
            flags: tuple[str, str] = ("replace=True", "allow_duplicate=True")) -> Converted:
    """Convert ``inputs`` into the store ``db``, one source each, in input order, and (``parquet``)
    export it; the store is replaced atomically at the end (`store.writing`).  ``jobs``: up to that
    many inputs at once, each in a worker process (None: one per CPU; tracekit/parallel.py).
    An input already in the store, or given twice, raises StoreError before any work unless
    ``allow_duplicate`` (``flags``: how the caller spells --replace / --allow-duplicate).
    A failed input raises, leaving the store as it was; with ``keep_going`` it is reported
    (``on_result``, called for each input as it is merged) and the others are kept, unless
    ``replace`` or every input failed.  ``own_process``: see `tracekit.convert`."""
    from . import store as store_mod
    from .fingerprint import check_inputs, record
    from .parallel import default_jobs

    inputs = [Path(p) for p in inputs]
    jobs = jobs or default_jobs()
    done = Converted()
    was = store_mod.OWN_PROCESS
    store_mod.OWN_PROCESS = was or own_process
    try:
        with budget.using(memory_budget), writing(db, replace=replace) as st:
            budget.current()  # a bad $TRACEKIT_MEMORY_BUDGET raises here, before any work
            fps = check_inputs(st, inputs, allow_duplicate, replace_flag=flags[0], allow_flag=flags[1])
            for out, fp in zip(_outcomes(st, inputs, jobs, format, rank, strict, progress), fps):
                if out.error is not None:
                    if not keep_going:
                        raise out.exception
                    out.error = out.error.replace(st.path, str(db))  # the store, not its working copy
                    done.failed += 1
                else:
                    record(st, out.summary.source_id, fp)
                    done.summaries.append(out.summary)
                if on_result:
                    on_result(out)
            if done.failed and (replace or done.failed == len(inputs)):
                if replace and done.failed < len(inputs) and Path(db).exists():
                    done.note = f"{done.failed} of {len(inputs)} inputs failed; the store was not replaced"
                raise Rollback()
            if parquet:
                done.exported = _export(st, Path(parquet), partitioned)
    except OSError as e:
        raise StoreError(os_error_line(_as_store(e, db), db)) from None
    finally:
        store_mod.OWN_PROCESS = was
    return done


def _outcomes(st: Store, inputs: list[Path], jobs: int, fmt, rank, strict, progress) -> Iterator[Outcome]:
    """Each input's Outcome, in input order: in worker processes (tracekit/parallel.py) with
    ``jobs`` > 1, else here, one after the other (each with its own progress)."""
    from .parallel import convert_inputs, error_line

    if jobs > 1 and len(inputs) > 1:
        label = f"converting {len(inputs)} inputs ({min(jobs, len(inputs))} at once)"
        size = sum(p.stat().st_size for p in inputs if p.is_file())
        each = None if progress is None else (lambda frac: progress(label, size, frac))
        for o in convert_inputs(st, inputs, jobs=jobs, format=fmt, rank=rank, strict=strict, progress=each):
            yield _outcome(o.path, o.summary, o.error, error_line)
        return
    for p in inputs:
        each = None
        if progress is not None and p.exists():
            size = p.stat().st_size

            def each(done, total, _p=p, _size=size):
                progress(f"converting {_p.name}", _size, done / total if total else 1.0)
        try:
            s = st.convert(p, progress=each, format=fmt, rank=rank, strict=strict)
        except Exception as e:  # a bug, not bad input (not TraceError): still one line, and say so
            if not isinstance(e, TraceError) and os.environ.get("TRACEKIT_DEBUG"):
                raise
            yield _outcome(p, None, e, error_line)
            continue
        yield Outcome(p, summary=s)


def _outcome(path: Path, summary, error: Exception | None, error_line) -> Outcome:
    if error is None:
        return Outcome(path, summary=summary)
    return Outcome(path, error=error_line(path, error), exception=error)


def _as_store(e: OSError, db) -> OSError:
    """An error about the store's hidden working copy (``.NAME.tmp-PID``) said of the store."""
    if e.filename is not None and Path(str(e.filename)).name.startswith(f".{Path(db).name}.tmp-"):
        e.filename = str(db)
    return e


def _export(st: Store, parquet_dir: Path, partitioned: bool) -> list[str]:
    """The Parquet export, inside the conversion: a failure here leaves the store as it was too."""
    import duckdb

    try:
        return st.export_parquet(parquet_dir, partitioned=partitioned)
    except OSError as e:
        raise StoreError(f"--parquet: {os_error_line(e, parquet_dir)}; nothing was converted") from None
    except duckdb.Error as e:
        raise StoreError(f"--parquet {parquet_dir}: cannot write ({str(e).splitlines()[0]}); "
                         "nothing was converted") from None


def convert_spark(inputs: Sequence[Path], parquet_dir, *, master=None, conf=None, format=None, rank=None,
                  strict=False, replace=False, memory_budget=None) -> list:
    """One Spark task per input, each writing its partitions of the dataset ``parquet_dir``;
    returns each input's TaskResult (``.ok``, ``.line``), in input order."""
    if not parquet_dir:
        raise StoreError("--engine spark writes the partitioned Parquet dataset: give --parquet DIR")
    from .spark.convert import DatasetError, convert_dataset
    from .spark.engine import SparkUnavailable

    try:
        with budget.using(memory_budget):
            return convert_dataset(inputs, parquet_dir, master=master, fmt=format, rank=rank, strict=strict,
                                   replace=replace, conf=conf)
    except (DatasetError, SparkUnavailable) as e:
        raise StoreError(str(e)) from None


# -- what the views are -----------------------------------------------------------------------------
def view_lines() -> list[str]:
    """One line per view: its name and description."""
    all_v = views.all_views()
    w = max(len(v.name) for v in all_v)
    return [f"{v.name.ljust(w)}  {v.description}" for v in all_v]


def library_lines() -> list[str]:
    """The SQL library: per file ``lib/NAME: description``, then its macros, indented."""
    out = []
    for stem, (_path, text, macros, _includes) in views.lib_modules().items():
        out.append(f"lib/{stem}: {text.splitlines()[0].split(':', 1)[1].strip()}")
        out += [f"  {m}" for m in macros]
    return out


def view_source(name: str, sql_only: bool = False) -> str:
    """The documentation and SQL of view ``name`` (or of ``lib/NAME``), or only the SQL."""
    path = next((v.path for v in views.all_views() if v.name == name), None)
    if path is None and name in {f"lib/{p.stem}" for p, _ in views.library()}:
        path = views.sql_dir() / "lib" / f"{name[4:]}.sql"
    if path is None:
        raise StoreError(f"no view named {name!r}; `tracekit views` lists them (`--lib`: the library)")
    doc, statement = views.source_parts(path.read_text())
    return statement if sql_only else f"{doc}\n{statement}"


def schema_lines(table: str | None = None) -> list[str]:
    """The unified schema: per table its doc, then each column's name, type and meaning."""
    from . import schema

    tables = schema.TABLES
    if table:
        if table not in schema.BY_NAME:
            raise StoreError(f"no table named {table!r}; tables: {', '.join(schema.BY_NAME)}")
        tables = (schema.BY_NAME[table],)
    out = []
    for t in tables:
        out.append(f"{t.name}: {t.doc}")
        w = max(len(c.name) for c in t.columns)
        out += [f"  {c.name.ljust(w)}  {c.sql_type.ljust(7)}  {c.doc}" for c in t.columns]
        out.append("")
    return out
