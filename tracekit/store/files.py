"""File safety of a store: the checks of its path before any work, the locks that make
conversions into one store take turns and keep other writers out, and the removal of what killed
conversions left next to it."""

from __future__ import annotations

import builtins
import errno
import os
import re
import shlex
import shutil
import stat
import sys
from contextlib import contextmanager
from pathlib import Path

import duckdb

from ..adapters import detect
from ..adapters.base import TraceError
from ..names import printable, shown
from .db import NO_EXTENSIONS
from .errors import StoreError, os_error_line


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def clean_stale(path: Path) -> None:
    """Remove what killed conversions of this store left next to it: ``.<name>.tmp-<pid>`` copies
    (with their .wal and spill folder) and ``.<name>.parts-<pid>`` worker folders, of processes
    that are gone."""
    remove_left_by_dead(path.parent, re.compile(rf"^\.{re.escape(path.name)}\.(?:tmp|parts)-(\d+)"))


def remove_left_by_dead(folder: Path, pat: re.Pattern) -> None:
    """Remove the entries of ``folder`` whose name matches ``pat`` (group 1: the pid that made
    them) where that process is gone."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for p in entries:
        m = pat.match(p.name)
        if m and not pid_alive(int(m.group(1))):
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)


_DUCKDB_MAGIC = b"DUCK"


def check_replaceable(path: Path) -> None:
    """--replace deletes the file at the store's path: only ever a DuckDB file (or an empty one)."""
    try:
        with path.open("rb") as f:
            head = f.read(16)
    except OSError:
        return
    if head and head[8:12] != _DUCKDB_MAGIC:
        what = ("an SQLite database (an nsys export?)" if head.startswith(b"SQLite format 3")
                else "not a DuckDB file")
        raise StoreError(f"{path}: is {what}, not a tracekit store; refusing to replace it: "
                         "choose another --db")


def check_readable(path: str) -> None:
    """A store to query: it exists, is a regular file, and is not another tool's file."""
    shown = printable(path)
    if not os.path.lexists(path):
        raise StoreError(f"{shown}: no such store; run `tracekit convert TRACE --db {shown}` first")
    try:
        st = os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise StoreError(f"{shown}: a symbolic link loop; point --db at the store itself") from None
        raise StoreError(os_error_line(e, shown)) from None
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(f"{shown}: not a regular file; --db takes a tracekit store (a DuckDB file)")
    try:
        with builtins.open(path, "rb") as f:
            head = f.read(16)
    except OSError as e:
        raise StoreError(os_error_line(e, shown)) from None
    if len(head) >= 12 and head[8:12] != b"DUCK":  # (a DuckDB file: a checksum, then DUCK)
        what = _input_kind(Path(path), head)
        if what is None:
            raise StoreError(f"{shown}: not a tracekit store (not a DuckDB file); --db takes the store "
                             "that `tracekit convert TRACE` writes")
        raise StoreError(f"{shown}: {what}, not a tracekit store; convert it first: tracekit convert "
                         f"{shlex.quote(shown)} (then query the store it writes)")


def _input_kind(path: Path, head: bytes) -> str | None:
    """What a file given as a store is, when it is an input `tracekit convert` reads (or SQLite)."""
    if head.startswith(detect.SQLITE_MAGIC):
        return "an SQLite file"
    try:
        fmt = detect.sniff(path)
    except TraceError:
        return None
    what = next(f.what for f in detect.REGISTRY if f.name == fmt)
    return f"{'an' if what[0].lower() in 'aeion' else 'a'} {what}"


def check_path(path: Path) -> None:
    """The store's path, checked before any work: its folder exists, its name is UTF-8, and a
    store there may be written (a read-only store -- no write permission bit -- is neither
    added to nor replaced)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise StoreError(f"{shown(path)}: the store's name is not UTF-8 text; choose another --db") from None
    parent = path.parent
    if not parent.is_dir():
        raise StoreError(f"{path}: no such folder {parent}; create it or choose another --db")
    try:
        st = os.stat(path)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(f"{path}: not a regular file; choose another --db")
    if not st.st_mode & 0o222:
        raise StoreError(f"{path}: the store is read-only (mode {stat.S_IMODE(st.st_mode):04o}); "
                         "make it writable (chmod u+w) to convert into it, or choose another --db")


class _WriterCheck:
    """`no_other_writer`'s handle: the store file's mode (None: no store yet) and its shared lock."""

    def __init__(self, path: Path, mode: int | None, fd: int | None):
        self.path, self.mode, self.fd = path, mode, fd

    def lock(self) -> None:
        """Take (again) a shared lock on the store file, as DuckDB's read-only connections do (a
        POSIX record lock: any close of the file in this process drops it, e.g. copying it), or
        raise StoreError naming the process that holds it for writing."""
        if self.fd is None:
            return
        import fcntl
        import struct

        try:
            fcntl.lockf(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EAGAIN):
                return  # (no locks on this file system: nothing to learn)
        pid = None
        try:  # F_GETLK: who holds it (struct flock: type, whence, start, len, pid)
            got = fcntl.fcntl(self.fd, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_RDLCK, 0, 0, 0, 0) + bytes(4))
            pid = struct.unpack("hhqqi", got[:struct.calcsize("hhqqi")])[4]
        except (OSError, struct.error):
            pass
        raise StoreError(f"{shown(self.path)}: is open for writing by another process"
                         + (f" (PID {pid})" if pid and pid > 0 else "")
                         + "; close it there (or wait for it to finish), then convert again")


@contextmanager
def no_other_writer(path: Path, replace: bool):
    """Refuse a conversion into a store that another process holds open for writing (DuckDB's
    lock on the file): the conversion would replace the file under it, and its later writes
    would be lost.  A shared lock is held meanwhile (`_WriterCheck.lock`, taken again after the
    store is copied), so no DuckDB can open it for writing until the new store is in place.
    With ``replace``, a DuckDB file that is not a tracekit store is refused (never deleted)."""
    try:
        st = os.stat(path)
    except OSError:
        yield _WriterCheck(path, None, None)
        return
    fd = None
    if st.st_size:
        try:
            import fcntl  # noqa: F401 (POSIX only)

            fd = os.open(path, os.O_RDONLY)
        except (ImportError, OSError):
            fd = None
    check = _WriterCheck(path, stat.S_IMODE(st.st_mode), fd)
    try:
        check.lock()
        if replace and st.st_size:
            _check_is_store(path)
        yield check
    finally:
        if fd is not None:
            os.close(fd)


def _check_is_store(path: Path) -> None:
    """--replace deletes the file at the store's path: a DuckDB database without tracekit's
    tables is someone's data, refused.  (A file DuckDB cannot open -- a damaged store -- may be
    replaced.)"""
    try:
        con = duckdb.connect(str(path), read_only=True, config=dict(NO_EXTENSIONS))
    except duckdb.Error:
        return
    try:
        is_store = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
                               "AND table_name = 'tracekit_meta'").fetchall()[0][0]
    except duckdb.Error:
        is_store = 1
    finally:
        con.close()
    if not is_store:
        raise StoreError(f"{shown(path)}: is a DuckDB database that is not a tracekit store (no "
                         "tracekit_meta table); refusing to replace it: choose another --db")


@contextmanager
def locked(path: Path):
    """An exclusive lock on the store for the whole conversion (``.<name>.lock`` next to it, gone
    when the conversion ends), so two conversions into one store run one after the other and both
    sources are kept (each works on a copy: without the lock the last rename would win)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no advisory locks here
        yield
        return
    lock = path.with_name(f".{path.name}.lock")
    waited = False
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            yield  # a read-only folder: the conversion itself will fail with a clear message
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not waited:
                print(f"tracekit: waiting for another conversion into {path} to finish", file=sys.stderr)
                waited = True
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:  # the holder removes the file before it unlocks: lock only the file still there
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        try:
            os.unlink(lock)
        finally:
            os.close(fd)
