"""The store's errors: what its callers catch and print as one line."""

from __future__ import annotations


class StoreError(Exception):
    pass


class Rollback(Exception):
    """Raised inside a ``writing()`` block: leave the store exactly as it was (nothing is written,
    no new file appears), without an error."""


def os_error_line(e: OSError, store=None) -> str:
    """One line for an environment fault (full disk, read-only folder, no permission): which file,
    what the system said, what to do."""
    import errno

    where = e.filename or store or "?"
    why = e.strerror or str(e)
    todo = {errno.ENOSPC: "free some space or write elsewhere",
            errno.EROFS: "write to a writable location",
            errno.EACCES: "write where you have permission",
            errno.EPERM: "write where you have permission",
            errno.EDQUOT: "free some of your quota or write elsewhere"}.get(e.errno, "check the path")
    return f"{where}: {why}; {todo}"
