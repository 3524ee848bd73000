"""How `tracekit sql` shows a result: the text table, the time unit of ``*_ns`` columns, the JSON
rows, and DuckDB's error with its hints.

The table (``table_text``) is made column by column, not cell by cell: DuckDB turns each column
into text (its own casts: intervals as ``1 day 03:00:00``, timestamps, UUIDs, blobs as ``\\xAA``;
STRUCT / LIST / MAP as JSON by ``to_json``), and pyarrow's string kernels measure, cut and pad
the columns; only the cells holding a control character go through Python (``printable``, plus
the tab, which would break the alignment). Integers print plainly (no thousands separators: ids,
pids and timestamps are read digit by digit); floats with 4 significant digits below 1000, one
decimal from there to 10^15, then 4 significant digits again (``1e+300``); NULL as ``NULL``;
numbers right-aligned, text left-aligned, cells cut at 60 characters with ``…``.
bench/table_render.py compares it with DuckDB's box renderer, tabulate and rich (figures in the
commit message that introduced it).
"""

from __future__ import annotations

from functools import lru_cache

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from .names import plural, printable

#: --timeunit: the factor from ns, per unit (the units of `nsys stats --timeunit`).
TIME_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}

MAX_WIDTH = 60  # characters of a cell; longer ones are cut with '…'

# the characters `printable` escapes, and the tab (RE2 syntax, for pyarrow)
_NEEDS_ESCAPE = r"[\x00-\x1f\x7f-\x9f\x{2028}\x{2029}]"


@lru_cache(maxsize=1)
def _engine() -> duckdb.DuckDBPyConnection:
    """A private in-memory DuckDB that turns results into text (opening one costs 20-50 ms: it
    is opened once; each use takes a cursor of its own), its threads capped at the usable CPUs."""
    from .store import fit_threads

    return fit_threads(duckdb.connect())


def _is_number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


# -- --timeunit ----------------------------------------------------------------------------------

def convert_timeunit(tbl: pa.Table, unit: str) -> pa.Table:
    """Every numeric column named ``*_ns`` in `unit` (DOUBLE) and named ``*_<unit>``; a column
    whose new name the result already has stays as it is (in ns, under its own name)."""
    if unit == "ns":
        return tbl
    factor = TIME_UNITS[unit]
    names = list(tbl.column_names)
    cols = list(tbl.columns)
    for i, (name, col) in enumerate(zip(tbl.column_names, tbl.columns)):
        if not name.endswith("_ns") or not _is_number(col.type):
            continue
        new = name[:-3] + "_" + unit
        if new in names:
            continue
        # a DOUBLE holds 53 bits: an epoch time in ns (~2^60) keeps ~0.2 us in s, as nsys stats does
        cols[i] = pc.divide(pc.cast(col, pa.float64(), safe=False), float(factor))
        names[i] = new
    return pa.Table.from_arrays(cols, names=names)


# -- the text table -------------------------------------------------------------------------------

def _text_expr(col: str, t: pa.DataType) -> str:
    """The SQL turning one column of the result into its displayed text."""
    if pa.types.is_floating(t):
        e = (f"CASE WHEN abs({col}) >= 1000 AND abs({col}) < 1e15 THEN printf('%.1f', {col}) "
             f"ELSE printf('%.4g', {col}) END")
    elif pa.types.is_nested(t):  # struct, list (all kinds), map, union
        e = f"CAST(to_json({col}) AS VARCHAR)"
    else:
        e = f"CAST({col} AS VARCHAR)"
    return f"coalesce({e}, 'NULL') AS {col}"


def _escaped(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """The column with control characters (and tabs) written as escapes."""
    flagged = pc.match_substring_regex(col, _NEEDS_ESCAPE)
    if not pc.any(flagged).as_py():
        return col
    values = col.to_pylist()
    for i in pc.indices_nonzero(flagged).to_pylist():
        values[i] = printable(values[i]).replace("\t", "\\t")
    return pa.chunked_array([pa.array(values, pa.string())])


def _name(name: str) -> str:
    name = printable(name).replace("\t", "\\t")
    return name if len(name) <= MAX_WIDTH else name[: MAX_WIDTH - 1] + "…"


def _may_hold_controls(t: pa.DataType) -> bool:
    """Text that DuckDB's casts do not escape: strings (JSON, VARCHAR, ENUM); nested values come
    through to_json, which escapes them, blobs as \\xAA."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t) \
        or isinstance(t, pa.ExtensionType)


def cell_texts(tbl: pa.Table) -> list[tuple[pa.ChunkedArray, int]]:
    """Each column of `tbl` as its displayed text (escaped, cut to MAX_WIDTH) and the width of
    its widest cell."""
    if tbl.num_columns == 0:
        return []
    keys = [f"c{i}" for i in range(tbl.num_columns)]  # result names may repeat or be any text
    con = _engine().cursor()
    try:
        rel = con.from_arrow(tbl.rename_columns(keys))
        text = rel.project(", ".join(_text_expr(k, c.type) for k, c in zip(keys, tbl.columns))).to_arrow_table()
    finally:
        con.close()
    out = []
    for src, col in zip(tbl.columns, text.columns):
        if _may_hold_controls(src.type):
            col = _escaped(col)
        lengths = pc.utf8_length(col)
        width = pc.max(lengths).as_py() or 0
        if width > MAX_WIDTH:
            long = pc.greater(lengths, MAX_WIDTH)
            col = pc.if_else(long, pc.binary_join_element_wise(
                pc.utf8_slice_codeunits(col, 0, MAX_WIDTH - 1), "…", ""), col)
            width = MAX_WIDTH
        out.append((col, width))
    return out


def table_text(tbl: pa.Table, max_rows: int, total: int | None = None) -> str:
    """The result as an aligned text table (the first `max_rows` rows; 0: all), with a line
    counting the rows left out and one counting all rows; it ends with a newline. ``total``:
    the number of rows of a result of which ``tbl`` holds only the first (default: its own)."""
    n = tbl.num_rows if total is None else total
    shown = tbl if not max_rows or n <= max_rows else tbl.slice(0, max_rows)
    names = [_name(c) for c in tbl.column_names]
    right = [_is_number(c.type) for c in tbl.columns]
    cols = cell_texts(shown)
    out = []
    if cols:
        widths = [max(len(h), w) for h, (_, w) in zip(names, cols)]
        last = len(cols) - 1

        def pad(i: int, text):
            if right[i]:
                return text.rjust(widths[i]) if isinstance(text, str) else pc.utf8_lpad(text, widths[i])
            if i == last:  # no trailing blanks
                return text
            return text.ljust(widths[i]) if isinstance(text, str) else pc.utf8_rpad(text, widths[i])

        out.append("  ".join(pad(i, h) for i, h in enumerate(names)).rstrip())
        out.append("  ".join("-" * w for w in widths))
        if shown.num_rows:
            lines = pc.binary_join_element_wise(*[pad(i, c) for i, (c, _) in enumerate(cols)], "  ")
            out.append("\n".join(lines.to_pylist()))
    if shown.num_rows < n:
        out.append(f"... {plural(n - shown.num_rows, 'more row')} (use --max-rows 0 or --format csv)")
    out.append(f"({n:,} row{'s' if n != 1 else ''})")
    return "\n".join(out) + "\n"


# -- JSON rows ------------------------------------------------------------------------------------

def json_ready(tbl: pa.Table) -> pa.Table:
    """The result with the columns JSON has no form for as DuckDB's text: intervals (``1 day
    03:00:00``, not ``MonthDayNano(...)``)."""
    odd = [i for i, c in enumerate(tbl.columns) if pa.types.is_interval(c.type)]
    if not odd:
        return tbl
    con = _engine().cursor()
    try:
        cols = list(tbl.columns)
        for i in odd:
            one = pa.table({"v": tbl.column(i)})
            cols[i] = con.from_arrow(one).project("CAST(v AS VARCHAR) AS v").to_arrow_table().column(0)
    finally:
        con.close()
    return pa.Table.from_arrays(cols, names=tbl.column_names)


# -- errors ---------------------------------------------------------------------------------------

def error_text(e: BaseException) -> str:
    """DuckDB's message: its first line, then its hints (``Did you mean "kernels"?``, candidate
    bindings and functions, the ``LINE 1:`` excerpt with its caret), each on its own line indented
    by two spaces; blank lines dropped, control characters escaped."""
    lines = [printable(line.replace("\t", "  ")) for line in str(e).splitlines()]
    lines = [line for line in lines if line.strip()]
    if not lines:
        return type(e).__name__
    return "\n".join([lines[0]] + ["  " + line for line in lines[1:]])

