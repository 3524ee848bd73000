"""The store: a DuckDB file (or a Parquet export) holding the unified tables, with the views of
sql/ on top.  One module per concern:

- core: `Store` (opening, the version check, the query API) and `open` / `open_parquet`
- kept: the rows of shared views kept for a session, with the parameters they were computed with
- convert: one input into a new source (inserts, then GPU rows' pid, nesting, the sources row)
- write: `writing` (conversion on a copy, moved into place whole) and the template of new stores
- copies: the views and macros written into a store (`persist_views`) and the check of them
- parquet: the Parquet export and the connection over an export's files
- files: path checks, the locks between conversions and writers, stale leftovers
- db: connections, the tables, the Arrow inserts, SQL quoting
- tuning: the tuning constants; one set on this package (``tracekit.store.INSERT_THREADS = 2``,
  ``monkeypatch.setattr(store, ...)``) is set there, where the code reads it.
"""

from __future__ import annotations

import sys
import types

from . import tuning
from .convert import SourceSummary
from .copies import CACHE_ENV, persist_views
from .core import DEFAULT_DB, SANDBOX, Store, head_of, open, open_parquet  # noqa: A004
from .db import fit_threads
from .errors import Rollback, StoreError, os_error_line
from .parquet import EXPORT_MANIFEST
from .write import writing

_KNOBS = frozenset(n for n in vars(tuning) if n.isupper())

__all__ = ["CACHE_ENV", "DEFAULT_DB", "EXPORT_MANIFEST", "SANDBOX", "Rollback", "SourceSummary", "Store",
           "StoreError", "fit_threads", "head_of", "open", "open_parquet", "os_error_line",
           "persist_views", "writing", *sorted(_KNOBS)]


def _knob(name: str) -> property:
    return property(lambda _: getattr(tuning, name), lambda _, value: setattr(tuning, name, value),
                    doc=f"tuning.{name}")


#: This package's class: each tuning constant a property over `tuning`'s, so that reading it here
#: gives the value the code reads and setting it here (``monkeypatch.setattr(store, ...)``
#: included) sets that one.
_Package = type("_Package", (types.ModuleType,), {n: _knob(n) for n in _KNOBS})
sys.modules[__name__].__class__ = _Package
