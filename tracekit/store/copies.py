"""The store's own copies of the views and macros: written by a conversion (`persist_views`), for
DuckDB clients without tracekit, each marked with the digest of this tracekit's SQL; a read-only
session uses them while they are current (`copies_are_current`), and records that it checked
(in the cache folder, `CACHE_ENV`) so that the next session of an unchanged file need not."""

from __future__ import annotations

import builtins
import os
import threading
from pathlib import Path

import duckdb
import orjson

from .. import __version__, views
from .db import roll_back, sql_lit


def persist_views(con: duckdb.DuckDBPyConnection) -> bool:
    """Write the macros of ``sql/lib/`` and every view of ``sql/`` into the store (not TEMP:
    `views.persist`), so that DuckDB clients without tracekit find them; replace the copies an
    earlier conversion wrote and drop those this tracekit no longer has.  ``tracekit_meta``
    records them: ``persisted_views`` / ``persisted_macros`` (JSON lists of names),
    ``views_version`` (the tracekit version that wrote them) and ``views_digest`` (`views.digest`
    of their SQL).  One transaction: all or nothing.  Creating them binds every view: 0.62-0.65 s
    of CPU on one thread (registering them all TEMP: 0.57-0.59 s; `roofline` and `phase_roofline`
    the most) and +0.5 MB of file (4.7 -> 5.3 MB, decode_b1), so a store whose copies have this
    digest and are all there (views and macros) is left alone (adding sources: ~0.01 s); returns
    whether it wrote them.

    Each copy gets the comment ``tracekit <digest>``: a read-only session uses the copies only
    while all of them carry it (`copies_are_current`); otherwise it creates its own as
    TEMP objects, which DuckDB resolves first (also inside a persisted view's body), so a store
    written by another tracekit version, or edited by hand, gives this version's results.
    ``schema_version`` is about the tables only."""
    con.execute("BEGIN TRANSACTION")
    try:
        old = dict(con.execute("SELECT key, value FROM tracekit_meta WHERE key IN "
                               "('persisted_views', 'persisted_macros', 'views_digest')").fetchall())
        cat = con.execute("SELECT current_database()").fetchall()[0][0]
        digest = views.digest()
        if old.get("views_digest") == digest and copies_marked(con, cat, digest):  # (all there, unchanged)
            con.execute("COMMIT")
            return False
        macros, names = views.persist(con)
        where = '"' + cat.replace('"', '""') + '".main.'
        mark = sql_lit(f"tracekit {digest}")  # (`copies_marked`)
        for v in names:
            con.execute(f'COMMENT ON VIEW {where}"{v}" IS {mark}')
        for m, kind in con.execute(
                "SELECT DISTINCT function_name, function_type FROM duckdb_functions() WHERE database_name = $c "
                "AND schema_name = 'main' AND function_type IN ('macro', 'table_macro') AND list_contains($m, function_name)",
                {"c": cat, "m": macros}).fetchall():
            con.execute(f'COMMENT ON MACRO {"TABLE " if kind == "table_macro" else ""}{where}"{m}" IS {mark}')
        for v in sorted(set(orjson.loads(old.get("persisted_views") or "[]")) - set(names)):
            con.execute(f'DROP VIEW IF EXISTS {where}"{v}"')
        for m in sorted(set(orjson.loads(old.get("persisted_macros") or "[]")) - set(macros)):
            kinds = {r[0] for r in con.execute(
                "SELECT function_type FROM duckdb_functions() WHERE database_name = $c "
                "AND schema_name = 'main' AND function_name = $m", {"c": cat, "m": m}).fetchall()}
            for kind in kinds & {"macro", "table_macro"}:
                con.execute(f'DROP MACRO {"TABLE " if kind == "table_macro" else ""}IF EXISTS {where}"{m}"')
        for key, value in (("persisted_views", orjson.dumps(names).decode()),
                           ("persisted_macros", orjson.dumps(macros).decode()),
                           ("views_version", __version__), ("views_digest", digest)):
            con.execute("INSERT INTO tracekit_meta VALUES (?, ?) ON CONFLICT DO UPDATE SET value = excluded.value",
                        [key, value])
        con.execute("COMMIT")
        return True
    except BaseException:
        roll_back(con)
        raise


def copies_marked(con: duckdb.DuckDBPyConnection, cat: str, digest: str) -> bool:
    """Whether every view and macro of this tracekit is in database ``cat`` (not TEMP) with the
    comment `persist_views` gave it, ``tracekit <digest>``: a copy replaced since (``CREATE OR
    REPLACE`` by hand, another tracekit) has lost it, a dropped one is missing. (A digest of
    DuckDB's rendering of the definitions cannot tell: it changes each time the catalog is
    written back, ``7.7e12`` <-> ``CAST(7700000000000.0 AS DOUBLE)``.)"""
    mark = f"tracekit {digest}"
    names, macros = [v.name for v in views.all_views()], sorted(set(views.macro_names()))
    rows = con.execute(
        "SELECT 'view', view_name, comment FROM duckdb_views() WHERE database_name = $c AND schema_name = 'main' "
        "AND NOT temporary AND list_contains($v, view_name) "
        "UNION ALL SELECT 'macro', function_name, comment FROM duckdb_functions() WHERE database_name = $c "
        "AND schema_name = 'main' AND function_type IN ('macro', 'table_macro') AND list_contains($m, function_name)",
        {"c": cat, "v": names, "m": macros}).fetchall()
    return ({r[1] for r in rows if r[0] == "view"} == set(names)
            and {r[1] for r in rows if r[0] == "macro"} == set(macros)
            and all(r[2] == mark for r in rows))


def copies_are_current(con: duckdb.DuckDBPyConnection, path: str) -> bool:
    """Whether the views and macros a conversion wrote into the store at ``path`` (`persist_views`)
    are this tracekit's, as it wrote them: the same SQL files (``views_digest``) and every copy
    still carrying the comment it was written with (`copies_marked`: one replaced or dropped
    since fails). Then a read-only session
    uses them instead of creating its own TEMP copies (which binds every view it creates:
    0.6 s for all 43, ~50 ms for the library alone); a TEMP view still takes precedence, also
    inside their bodies (kept rows, tracekit/store/kept.py)."""
    try:
        meta = con.execute("SELECT value FROM tracekit_meta WHERE key = 'views_digest'").fetchall()
        cat = con.execute("SELECT current_database()").fetchall()[0][0]
    except duckdb.Error:  # (a Parquet export: no tracekit_meta)
        return False
    digest = views.digest()
    if not meta or meta[0][0] != digest:
        return False
    if verified(path, digest):  # checked before, and the file unchanged since
        return True
    if not copies_marked(con, cat, digest):
        return False
    record_verified(path, digest)
    return True


def file_state(path: str) -> str | None:
    """The state of a store file that any change DuckDB writes to it changes: its inode, size and
    modification time, and a hash of its headers (the first 12 KiB, whose checkpoint iteration
    every checkpoint advances); None while a WAL is beside it (changes not checkpointed)."""
    import hashlib

    try:
        if os.path.exists(f"{path}.wal"):
            return None
        st = os.stat(path)
        with builtins.open(path, "rb") as f:
            head = f.read(12288)
    except OSError:
        return None
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{hashlib.sha256(head).hexdigest()[:32]}"


def _verified_record(path: str, digest: str) -> tuple[Path, str] | None:
    """Where the record of this store's checked copies is kept (the cache folder, `CACHE_ENV`,
    ``verified/``, one file per store path) and what it holds for the file's present state
    (`file_state`) and ``digest``; None without a cache folder or a state."""
    import hashlib

    d, state = cache_dir(), file_state(path)
    if d is None or state is None:
        return None
    key = hashlib.sha256(os.path.realpath(path).encode()).hexdigest()[:24]
    return d / "verified" / key, f"{state} {digest}"


def verified(path: str, digest: str) -> bool:
    """Whether `copies_marked` found this store's copies current (views and macros of
    ``digest``) in the file's present state, or the conversion that wrote it made them so
    (`writing`): the check reads DuckDB's catalog of ~3,400 functions, 20-35 ms of every
    session, which the record (`_verified_record`) saves."""
    rec = _verified_record(path, digest)
    try:
        return rec is not None and rec[0].read_text() == rec[1]
    except OSError:
        return False


def record_verified(path: str, digest: str) -> None:
    """Record that the store's copies are current in the file's present state (best effort: a
    cache folder that cannot be written only means checking again next time)."""
    rec = _verified_record(path, digest)
    if rec is None:
        return
    vp, text = rec
    try:
        vp.parent.mkdir(parents=True, exist_ok=True)
        part = vp.with_name(f".{vp.name}.{os.getpid()}-{threading.get_ident()}")
        part.write_text(text)
        os.replace(part, vp)
    except OSError:
        pass


#: Where a new store's starting file is kept (`from_template`): $TRACEKIT_CACHE_DIR, else
#: $XDG_CACHE_HOME/tracekit, else ~/.cache/tracekit; TRACEKIT_CACHE_DIR set empty: no template.
CACHE_ENV = "TRACEKIT_CACHE_DIR"


def cache_dir() -> Path | None:
    d = os.environ.get(CACHE_ENV)
    if d is not None:
        return Path(d) if d else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tracekit"


