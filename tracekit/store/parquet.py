"""A store as Parquet: the export of its tables (`export`: whole or not at all, with a manifest)
and the connection over an export's files that `open_parquet` puts the views on."""

from __future__ import annotations

import glob
import os
import re
import shutil
from pathlib import Path

import duckdb
import orjson

from .. import __version__, schema
from .db import fit_threads, sql_str
from .errors import StoreError
from .files import pid_alive


def export(con: duckdb.DuckDBPyConnection, directory: str | os.PathLike, partitioned: bool = False) -> list[str]:
    """Write every table of the store open on ``con`` (`Store.export_parquet`) as ``DIR/<table>.parquet``; returns the paths.  ``partitioned``:
    a Hive-partitioned dataset instead, one folder per table and per source,
    ``DIR/<table>/source_id=<n>/data_0.parquet`` (docs/scaling.md), which `open_parquet`
    and any Parquet engine read back.

    Whole or not at all: the export is written into a hidden folder beside DIR
    (``.<name>.export-<pid>``), its manifest (`EXPORT_MANIFEST`: every file and its size,
    every table's rows) last, and then swapped with DIR in one rename (``renameat2``
    RENAME_EXCHANGE; elsewhere two renames), so a reader sees the old export or the new one,
    never a mix; a kill leaves DIR as it was, and the next export removes the leftovers.
    DIR may hold nothing but an export (a folder of other files is refused, not replaced)."""
    d = Path(directory)
    _check_export_dir(d)
    d.parent.mkdir(parents=True, exist_ok=True)
    _clean_stale_exports(d)
    tmp = d.parent / f".{d.name}.export-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        rows = {}
        for t in schema.TABLES:
            if partitioned:
                p = tmp / t.name
                con.execute(f"COPY {t.name} TO '{sql_str(str(p))}' (FORMAT parquet, "
                                  "COMPRESSION zstd, PARTITION_BY (source_id), OVERWRITE_OR_IGNORE)")
            else:
                p = tmp / f"{t.name}.parquet"
                con.execute(f"COPY {t.name} TO '{sql_str(str(p))}' (FORMAT parquet, COMPRESSION zstd)")
            rows[t.name] = con.execute(f"SELECT count(*) FROM {t.name}").fetchall()[0][0]
        files = {str(f.relative_to(tmp)): f.stat().st_size for f in sorted(tmp.rglob("*")) if f.is_file()}
        manifest = {"tracekit_version": __version__, "schema_version": schema.SCHEMA_VERSION,
                    "layout": "partitioned" if partitioned else "flat", "rows": rows, "files": files}
        part = tmp / f".{EXPORT_MANIFEST}.part"
        part.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
        os.replace(part, tmp / EXPORT_MANIFEST)
        _swap_in(tmp, d)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [str(d / (t.name if partitioned else f"{t.name}.parquet")) for t in schema.TABLES]


#: The file an export (`Store.export_parquet`) writes last: its files with their sizes and its
#: tables' rows; `open_parquet` refuses an export whose files differ from it.
EXPORT_MANIFEST = "tracekit_export.json"


def _export_names() -> set[str]:
    return {EXPORT_MANIFEST} | {n for t in schema.TABLES for n in (t.name, f"{t.name}.parquet")}


def _check_export_dir(d: Path) -> None:
    """An export replaces DIR whole: only a folder holding an export (or nothing) may be replaced."""
    if not d.exists():
        return
    if not d.is_dir():
        raise StoreError(f"--parquet {d}: exists and is not a folder; choose another --parquet DIR")
    other = sorted(p.name for p in d.iterdir() if p.name not in _export_names())
    if other:
        raise StoreError(f"--parquet {d}: holds files that are not a tracekit export (e.g. {other[0]}), "
                         "which writing the export would remove; export into an empty or new folder")


def _clean_stale_exports(d: Path) -> None:
    """Remove the hidden folders of exports into DIR whose process is gone (killed mid-export)."""
    pat = re.compile(rf"^\.{re.escape(d.name)}\.(export|old)-(\d+)$")
    try:
        entries = list(d.parent.iterdir())
    except OSError:
        return
    for p in entries:
        m = pat.match(p.name)
        if m and not pid_alive(int(m.group(2))):
            shutil.rmtree(p, ignore_errors=True)


def _swap_in(new: Path, d: Path) -> None:
    """Put folder ``new`` at ``d`` in one step; the old ``d`` (if any) ends up at ``new``, for the
    caller to remove."""
    if not os.path.lexists(d):
        os.rename(new, d)
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
        AT_FDCWD, RENAME_EXCHANGE = -100, 2
        if renameat2(AT_FDCWD, os.fsencode(new), AT_FDCWD, os.fsencode(d), RENAME_EXCHANGE) == 0:
            return
    except (AttributeError, OSError):
        pass
    old = d.parent / f".{d.name}.old-{os.getpid()}"
    os.rename(d, old)
    os.rename(new, d)
    os.rename(old, new)


def connect(directory: str | os.PathLike, sandbox: bool = False) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB whose tables are views over the files of a Parquet export (`open_parquet`:
    the flat ``DIR/<table>.parquet`` files, or the Hive-partitioned ``DIR/<table>/source_id=<n>/*.parquet``
    dataset, also made by other tools; not loaded: a filter on source_id reads only that source's
    partitions).  Tables without files are empty.  ``sandbox``: the tables are read into memory
    instead (``CREATE TABLE ... AS SELECT``), for a connection then locked (`SANDBOX`), which DuckDB
    would let reach the files only through ``allowed_paths`` (SQL could overwrite them too)."""
    d = Path(directory)
    if not d.is_dir():
        raise StoreError(f"{d}: no such folder; write a Parquet export with "
                         f"`tracekit convert TRACE --parquet {d}`")
    _check_manifest(d)
    flat = {t.name: d / f"{t.name}.parquet" for t in schema.TABLES if (d / f"{t.name}.parquet").is_file()}
    parts = {t.name: d / t.name for t in schema.TABLES if any(d.glob(f"{t.name}/source_id=*/*.parquet"))}
    if not flat and not parts:
        raise StoreError(f"{d}: not a tracekit Parquet export (neither <table>.parquet files nor "
                         "<table>/source_id=<n>/ folders); write one with "
                         f"`tracekit convert TRACE --parquet {d} [--partitioned]`")
    if flat and parts:
        raise StoreError(f"{d}: holds both the flat (<table>.parquet) and the partitioned "
                         "(<table>/source_id=<n>/) layout; export into an empty folder")
    con = fit_threads(duckdb.connect())
    kind = "TABLE" if sandbox else "VIEW"
    try:
        for t in schema.TABLES:
            cols = ", ".join('"' + c.name + '"' for c in t.arrow)
            # the folder's own name is escaped: DuckDB reads a path as a glob pattern, so a folder
            # named run[1] or a*b would match other folders or none (glob.escape: [[], [*], [?])
            if t.name in flat:
                src = f"read_parquet('{sql_str(glob.escape(str(flat[t.name])))}')"
            elif t.name in parts:
                src = (f"read_parquet('{sql_str(glob.escape(str(parts[t.name])))}/*/*.parquet', "
                       "hive_partitioning = true, hive_types = {'source_id': INTEGER})")
            else:
                con.execute(t.ddl().replace("CREATE TABLE IF NOT EXISTS", "CREATE TABLE", 1))
                continue
            con.execute(f"CREATE {kind} {t.name} AS SELECT {cols} FROM {src}")
    except duckdb.Error as e:
        con.close()
        raise StoreError(f"{d}: not a Parquet export of this tracekit's tables "
                         f"({str(e).splitlines()[0]}); export it again with `tracekit convert --parquet`") from None
    return con


def _check_manifest(d: Path) -> None:
    """An export written by tracekit (`Store.export_parquet`) holds exactly the files its manifest
    lists, each of its size; any other (a half-written or mixed export, a file changed since) is
    refused.  A folder without a manifest (other tools' datasets, exports of older tracekits) is
    read as it is."""
    m = d / EXPORT_MANIFEST
    if not m.exists():
        return
    redo = f"export it again (`tracekit convert TRACE --parquet {d}`)"
    try:
        files = orjson.loads(m.read_bytes())["files"]
        have = {str(f.relative_to(d)): f.stat().st_size for f in d.rglob("*")
                if f.is_file() and f.name != EXPORT_MANIFEST}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise StoreError(f"{d}: unreadable export manifest {EXPORT_MANIFEST} ({e}); {redo}") from None
    for name, size in files.items():
        if name not in have:
            raise StoreError(f"{d}: incomplete Parquet export ({name} is missing); {redo}")
        if have[name] != size:
            raise StoreError(f"{d}: Parquet export changed since it was written ({name}: {have[name]:,} "
                             f"bytes, the manifest says {size:,}); {redo}")
    extra = sorted(set(have) - set(files))
    if extra:
        raise StoreError(f"{d}: Parquet export mixed with other files ({extra[0]} is not one of its "
                         f"files); {redo}")
