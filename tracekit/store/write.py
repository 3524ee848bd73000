"""Writing a store: `writing` opens one for conversion on a copy and moves it into place whole, and
a new store starts as a copy of the template (`from_template`: the tables, views and macros
already written) kept in the cache folder."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import threading
from contextlib import contextmanager
from pathlib import Path

import duckdb

from .. import __version__, schema, views
from . import tuning
from .copies import cache_dir, persist_views, record_verified
from .core import DEFAULT_DB, Store
from .db import connect, create_tables
from .errors import Rollback
from .files import check_path, check_replaceable, clean_stale, locked, no_other_writer, remove_left_by_dead

#: What `persist_views` writes beyond the SQL (2: each copy commented with the digest), in the
#: template's name: a template written before is not reused.
_TEMPLATE_FORMAT = "2"


def template_key() -> str:
    h = hashlib.sha256()
    for part in (__version__, views.digest(), str(schema.SCHEMA_VERSION), duckdb.__version__,
                 str(tuning.STORAGE_VERSION), _TEMPLATE_FORMAT, *(t.ddl() for t in schema.TABLES)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def template_path() -> Path | None:
    d = cache_dir()
    return None if d is None else d / f"store-template-{template_key()}.duckdb"


def from_template(tmp: Path) -> bool:
    """Start a new store as a copy of the template: an empty store with the tables, the views and
    the macros already written (`persist_views`), which writing them into every new store would
    cost ~0.25-0.3 s (binding every view).  The template is made by the first conversion of this
    tracekit, SQL, schema and DuckDB (its name is a hash of them) in the cache folder
    (`CACHE_ENV`); False, having written nothing at ``tmp``, when there is none and none can be
    made (a read-only home): the store then starts empty, as without a cache."""
    tpl = template_path()
    if tpl is None:
        return False
    d = tpl.parent
    _clean_stale_templates(d)
    try:
        if not tpl.exists():
            d.mkdir(parents=True, exist_ok=True)
            part = d / f".{tpl.name}.{os.getpid()}-{threading.get_ident()}"
            part.unlink(missing_ok=True)
            try:
                con = connect(str(part), False)
                try:
                    create_tables(con)
                    persist_views(con)
                    con.execute("CHECKPOINT")
                finally:
                    con.close()
                os.replace(part, tpl)  # whole or not at all, should two conversions race
                for old in d.glob("store-template-*.duckdb"):  # other versions' (best effort)
                    if old != tpl:
                        old.unlink(missing_ok=True)
            finally:
                for p in (part, Path(f"{part}.wal")):
                    p.unlink(missing_ok=True)
                shutil.rmtree(f"{part}.tmp", ignore_errors=True)
        shutil.copyfile(tpl, tmp)
        return True
    except (OSError, duckdb.Error):
        for p in (tmp, Path(f"{tmp}.wal")):
            p.unlink(missing_ok=True)
        return False


def _clean_stale_templates(d: Path) -> None:
    """Remove the partial templates (``.store-template-<key>.duckdb.<pid>-<thread>``, with their
    .wal and spill folder) that conversions killed while making one left in the cache folder."""
    remove_left_by_dead(d, re.compile(r"^\.store-template-[0-9a-f]+\.duckdb\.(\d+)-\d+"))


@contextmanager
def writing(path: str | os.PathLike = DEFAULT_DB, replace: bool = False, persist: bool = True):
    """Open a store for conversion atomically: work on a temporary copy next to it and move it
    into place only when the block ends without an exception. Readers of the old store are never
    blocked or shown a half-written state, and a crash leaves the store as it was. Conversions
    into one store take turns (a lock next to it); ``Rollback`` raised in the block leaves the
    store untouched; leftovers of killed conversions are removed.  Before the store is moved
    into place, the views and their macros are written into it (`persist_views`), unless it began
    as a copy of the template (`from_template`), which has them; ``persist=False``: neither, for
    the private stores of parallel workers."""
    path = Path(path)
    check_path(path)
    if replace and path.exists():
        check_replaceable(path)
    with locked(path), no_other_writer(path, replace) as other:
        clean_stale(path)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        for p in (tmp, Path(f"{tmp}.wal")):
            p.unlink(missing_ok=True)
        if path.exists() and not replace:
            try:
                shutil.copyfile(path, tmp)
                if Path(f"{path}.wal").exists():
                    shutil.copyfile(f"{path}.wal", f"{tmp}.wal")
                other.lock()  # (copying closed the file: the lock is taken again, or a writer came)
            except BaseException as e:  # (a full disk: no partial copy left behind)
                for p in (tmp, Path(f"{tmp}.wal")):
                    p.unlink(missing_ok=True)
                if isinstance(e, OSError) and e.filename is not None and str(tmp) in str(e.filename):
                    e.filename = str(path)  # the user's store, not the hidden copy
                raise
        # a copy of the template has this tracekit's views and macros: nothing to persist
        templated = persist and not (path.exists() and not replace) and from_template(tmp)
        try:
            try:
                st = Store(tmp, label=str(path))
            except Exception:
                if not templated:
                    raise
                # a damaged template (a truncated copy, a full disk): drop it and start empty, as
                # without a cache; the next conversion makes it again
                for p in (tmp, Path(f"{tmp}.wal"), template_path()):
                    p.unlink(missing_ok=True)
                templated = False
                st = Store(tmp, label=str(path))
        except BaseException:
            for p in (tmp, Path(f"{tmp}.wal")):
                p.unlink(missing_ok=True)
            raise
        ok = False
        try:
            yield st
            if persist and not templated:
                persist_views(st.raw_con)
            try:
                st.raw_con.execute("CHECKPOINT")
            except duckdb.IOException as e:  # the disk filled while the store is written out: the
                if "No space left on device" not in str(e):  # old store stays, said in one line
                    raise
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from None
            ok = True
        except Rollback:
            pass
        finally:
            st.close()
            if ok:
                if other.mode is not None:
                    os.chmod(tmp, other.mode)  # the store keeps its file mode
                os.replace(tmp, path)
                Path(f"{path}.wal").unlink(missing_ok=True)
                if persist:  # its copies are this tracekit's: written now, or the template's
                    record_verified(str(path), views.digest())
            for p in (tmp, Path(f"{tmp}.wal")):
                p.unlink(missing_ok=True)
            shutil.rmtree(f"{tmp}.tmp", ignore_errors=True)
