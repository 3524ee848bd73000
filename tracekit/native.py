"""tracekit's optional compiled module (tracekit/_native.c, built at install by hatch_build.py
where a C compiler is found), or None.  Every function in it has a pure-Python (or SQL) twin
that gives the same results; tests/test_native.py compares them."""

try:
    from . import _native as native
except ImportError:  # pragma: no cover - no C compiler at install
    native = None
