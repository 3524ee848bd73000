"""Output files of the commands (`sql -o`, `diagnose -o`, `diff -o`, `export perfetto -o`):
written whole or not at all, never over the store being read.

* `refuse_store`: an output that is the store itself (the same file, by any path) is refused
  before anything is written (`OutputError`, exit 2).
* `atomic_output`: the file is written as a hidden temporary file in the same folder, then
  renamed over the output: a full disk, a kill or an error leaves the old file as it was (and no
  temporary file).  The old file's mode is kept; a link is followed (its target is replaced);
  an output that exists and is not a regular file (a terminal, a pipe, /dev/null) is written to
  as it is.  An error names the user's path, not the temporary file.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from pathlib import Path


class OutputError(Exception):
    """An output that cannot be written (one line, after ``tracekit: error:``)."""


def same_file(a, b) -> bool:
    """Whether paths ``a`` and ``b`` name one file (links and other spellings followed)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def refuse_store(output, db, option: str = "-o") -> None:
    """Raise OutputError when the output ``output`` is the store ``db`` (or its WAL), or lies
    inside the Parquet export ``db``."""
    if output is None or db is None:
        return
    if os.path.isdir(db):  # a Parquet export: a file written into it would spoil it
        inside = os.path.realpath(os.path.dirname(os.path.abspath(output)))
        top = os.path.realpath(db)
        if inside == top or inside.startswith(top + os.sep):
            raise OutputError(f"{option} {output}: is inside the Parquet export --db {db}, which it would "
                              "spoil: choose an output file outside it")
        return
    if any(same_file(output, p) for p in (db, f"{db}.wal")):
        raise OutputError(f"{option} {output}: is the store --db {db}; writing it would destroy the "
                          "store: choose another output file")


def _is_special(p: Path) -> bool:
    try:
        return not stat.S_ISREG(os.stat(p).st_mode)
    except OSError:
        return False


@contextmanager
def atomic_output(path, mode: str = "wb", **kw):
    """An open file (``mode`` as for open()) whose content replaces ``path`` when the block ends
    without an exception (see the module's doc)."""
    path = Path(path)
    if _is_special(path):
        with open(path, mode, **kw) as f:
            yield f
        return
    target = Path(os.path.realpath(path))  # a link keeps pointing at the (new) file
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        old_mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        old_mode = None
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # the umask applies, as for open()
        with os.fdopen(fd, mode, **kw) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if old_mode is not None:
            os.chmod(tmp, old_mode)
        os.replace(tmp, target)
    except OSError as e:
        _unlink(tmp)
        if e.filename is not None and str(e.filename) == str(tmp):
            e.filename = str(path)  # the user's path, not the hidden temporary file
        raise
    except BaseException:
        _unlink(tmp)
        raise


def _unlink(p: Path) -> None:
    try:
        p.unlink()
    except OSError:
        pass
