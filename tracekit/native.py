"""tracekit's optional compiled module (tracekit/_native.c, built at install by hatch_build.py
where a C compiler is found), or None.  Every function in it has a pure-Python (or SQL) twin
that gives the same results; tests/adapters/test_kineto_scan.py and tests/sql/test_nesting.py compare them."""

from __future__ import annotations

import os

try:
    from . import _native as native
    why = None
except ImportError as e:  # pragma: no cover - no C compiler at install
    native = None
    why = str(e)


def missing_notice() -> str | None:
    """One line for the user when the compiled module is missing and was not left out on purpose
    (``TRACEKIT_NO_EXTENSION=1``): hatch_build.py warns at install, but ``pip install -q`` hides
    it. `tracekit convert` prints it on standard error, ``tracekit.convert()`` warns with it."""
    if native is not None or os.environ.get("TRACEKIT_NO_EXTENSION") == "1":
        return None
    return ("tracekit: note: the compiled module tracekit._native is missing (no C compiler when "
            "tracekit was installed?): the pure-Python readers are used, same results, slower on "
            "large traces; install a C compiler (gcc) and reinstall tracekit, or set "
            "TRACEKIT_NO_EXTENSION=1 to hide this note")
