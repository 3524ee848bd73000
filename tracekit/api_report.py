"""The `tracekit diagnose` and `tracekit diff` operations as plain functions (the CLI, the tests
and `tracekit.profile`'s ``cap.diagnose()`` share them): a store opened read-only, the
findings or the comparison rendered as text, markdown, json or html.  Errors are StoreError in
one line (a bad threshold, a failed query)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import duckdb

from .api import open_store, set_params
from .store import DEFAULT_DB, StoreError


@contextmanager
def _one_line() -> Iterator[None]:
    """A diagnose error or a failed query as StoreError in one line (TRACEKIT_DEBUG: as it is)."""
    from .diagnose import DiagnoseError

    try:
        yield
    except DiagnoseError as e:
        raise StoreError(str(e)) from None
    except duckdb.Error as e:
        if os.environ.get("TRACEKIT_DEBUG"):
            raise
        raise StoreError(f"query failed: {str(e).splitlines()[0]}") from None


def parse_thresholds(items: Sequence[str] | dict | None) -> dict[str, float]:
    """The --threshold NAME=VALUE items (or a dict) as {name: value}, each name and value checked."""
    from . import diagnose as D

    if isinstance(items, dict):
        items = [f"{k}={v}" for k, v in items.items()]
    with _one_line():
        return D.parse_thresholds(items)


def render(value, fmt: str, to_text, to_markdown, rows: int) -> str:
    """A diagnosis or a diff as json (indented), markdown or text (``rows`` per section)."""
    if fmt == "json":
        import orjson

        data = value.to_dict() if hasattr(value, "to_dict") else value
        return orjson.dumps(data, option=orjson.OPT_INDENT_2, default=str).decode() + "\n"
    return to_markdown(value, rows) if fmt == "markdown" else to_text(value, rows)


def diagnose(db=DEFAULT_DB, *, source_id: int | None = None, phase: str | None = None, thresholds=None,
             fmt: str = "text", evidence_rows: int = 5, peak_tflops: float | None = None,
             peak_tbps: float | None = None):
    """Diagnose the store ``db`` (every source, or ``source_id``; ``phase``: only the time inside
    its instances); returns (the Diagnosis, its text in ``fmt``: text, markdown, json or html).
    ``thresholds``: --threshold items or {name: value}; ``peak_*``: the roofline's roofs."""
    from . import diagnose as D

    th = parse_thresholds(thresholds)
    if fmt == "html":
        from .report import ReportError, check_available

        try:
            check_available()
        except ReportError as e:
            raise StoreError(str(e)) from None
    with open_store(db) as store, _one_line():
        set_params(store, {"peak_tflops": peak_tflops, "peak_tbps": peak_tbps})
        d = D.diagnose(store, source_id=source_id, phase=phase, thresholds=th, evidence_rows=max(20, evidence_rows))
        if fmt == "html":
            from .report import render_html

            return d, render_html(store, d)
        return d, render(d, fmt, D.to_text, D.to_markdown, evidence_rows)


def diff(base_db, new_db=None, *, base_source: int | None = None, new_source: int | None = None,
         base_phase: str | None = None, new_phase: str | None = None, thresholds=None, fmt: str = "text",
         max_rows: int = 25) -> tuple[dict, str]:
    """Compare two captures (two stores, or two sources or phases of one: ``new_db`` None or the
    same file); returns (the comparison, its text in ``fmt``: text, markdown or json)."""
    from . import diff as F

    th = parse_thresholds(thresholds)
    same = new_db is None or os.path.abspath(new_db) == os.path.abspath(base_db)
    bs = open_store(base_db)
    try:
        ns = bs if same else open_store(new_db)
    except StoreError:
        bs.close()
        raise
    try:
        with _one_line():
            b_sid = F.resolve_source(bs, base_source, "base")
            n_sid = F.resolve_source(ns, new_source if new_source is not None
                                     else (base_source if same else None), "new")
            if same and b_sid == n_sid and base_phase == new_phase:
                raise StoreError("both sides are the same source; give --new-source, --base-phase/--new-phase "
                                 "or a second store")
            r = F.diff(F.Side(bs, b_sid, base_phase, "base"), F.Side(ns, n_sid, new_phase, "new"), th)
    finally:
        bs.close()
        if not same:
            ns.close()
    return r, render(r, fmt, F.to_text, F.to_markdown, max_rows)
