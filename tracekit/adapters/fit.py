"""The one rule for a value its column cannot hold (`fit`, `with_raw_args`, ``REQUIRED``) and
for a text too long for a column (`cap_text`), which every adapter applies to the rows it builds
(`base.TableBuilder`) or reads column-wise."""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .. import schema

if TYPE_CHECKING:
    from .base import Accounting


def dumps_args(obj) -> str | None:
    """JSON text of an args dict (None for empty). Ints beyond int64 survive as text."""
    if not obj:
        return None
    try:
        return orjson.dumps(obj).decode()
    except TypeError:
        return orjson.dumps(obj, default=str).decode()


# -- one rule for a value its column cannot hold ----------------------------------------------
#
# A value *fits* a column when the column holds it exactly (``fit`` below says what that means per
# type).  One that does not:
#  * in a column the row can do without: the column gets NULL (a text column: the value's text),
#    the raw value is kept in the row's ``args`` as ``_raw_<name>`` (tables with args; <name> is
#    the input's field where the adapter knows it, else the column), and the value is counted in
#    ``Accounting.repairs`` ("<table>.<name>: values that do not fit ...", ``Accounting.misfits``);
#  * in a column the row cannot do without (``REQUIRED``: the time that places it, ncu's result
#    id that ties its rows together): the row is skipped and counted in ``skipped_rows`` with the
#    reason (nsys: "row with a start that is not an integer").
# ``fit`` finds the values, ``with_raw_args`` keeps them, ``Accounting.misfits`` counts them;
# ``TableBuilder`` applies the rule to every row it builds, the nsys reader to every cell it reads
# (``NsysAdapter._ints`` / ``_batch`` / ``_strs``), ncu to its identity cells (their text stays an
# ``ncu_metrics`` row: ncu_kernels has no args).
#
# For an adapter's own converter (e.g. a column of ids read from JSON):
#     arr, bad = fit(values, pa.int64())           # exact; bad: positions now NULL
#     if bad:
#         args = with_raw_args(args, {i: {RAW_PREFIX + "pid": values[i]} for i in bad})
#         accounting.misfits("kernels", "pid", pa.int64(), len(bad), kept=True)

RAW_PREFIX = "_raw_"

#: the columns a row cannot do without, per table (the others may be NULL)
REQUIRED: dict[str, tuple[str, ...]] = {
    "kernels": ("start_ns",), "memops": ("start_ns",), "api_calls": ("start_ns",),
    "events": ("start_ns",), "syncs": ("start_ns",), "counters": ("ts_ns", "value"),
    "memory_events": ("ts_ns",), "ncu_kernels": ("id",), "ncu_metrics": ("id",), "ncu_rules": ("id",),
}

TYPE_WORDS = {pa.int32(): "an int32", pa.int64(): "an int64", pa.float64(): "a double",
               pa.string(): "text", pa.bool_(): "a boolean"}
_MISFIT = (OverflowError, TypeError, ValueError, pa.ArrowInvalid, pa.ArrowTypeError,
           pa.ArrowNotImplementedError)
_NONE = type(None)


def _int_range(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    if pa.types.is_signed_integer(t):
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2 ** bits - 1


def _fit_value(v, t: pa.DataType):
    """(fits, the value for the column).  Integers: ints in range (not bools) and floats with an
    integral value in range (``2.0`` -> 2; ``1.5``, NaN, inf do not fit); doubles: ints up to
    2**53 and floats (not bools); booleans: bools; text: str (anything else does not fit, and its
    text, bytes decoded as UTF-8 with U+FFFD, goes in the column)."""
    if v is None:
        return True, None
    if pa.types.is_integer(t):
        lo, hi = _int_range(t)
        if type(v) is int:
            return (True, v) if lo <= v <= hi else (False, None)
        if type(v) is float and v.is_integer() and lo <= v <= hi:
            return True, int(v)
        return False, None
    if pa.types.is_floating(t):
        if type(v) is float:
            return True, v
        if type(v) is int and -2**53 <= v <= 2**53:
            return True, float(v)
        return False, None
    if pa.types.is_boolean(t):
        return (True, v) if type(v) is bool else (False, None)
    if pa.types.is_string(t):
        if type(v) is str:
            return True, v
        if isinstance(v, (bytes, bytearray, memoryview)):
            return False, bytes(v).decode("utf-8", "replace")
        return False, str(v)
    return False, None


def fits(value, type: pa.DataType) -> bool:
    """Whether one value fits a column of ``type`` by ``fit``'s rule (None fits)."""
    return _fit_value(value, type)[0]


def fit(values, type: pa.DataType) -> tuple[pa.Array, list[int]]:
    """Fit a column of values to an Arrow column type, exactly: no value is truncated, wrapped or
    rounded on the way (pyarrow alone truncates ``1.5`` to 1 in an integer column).

    ``values``: a pyarrow Array / ChunkedArray (any type) or a Python sequence.  Returns ``(array,
    bad)``: ``array`` of ``type`` and of the same length, and ``bad``, the positions (ascending) of
    the values that did not fit: NULL in ``array`` (a text column: the value's text).  What fits:
    see ``_fit_value``; an Arrow array fits when a safe cast succeeds (integers out of a narrower
    column's range do not fit).  The caller applies the rule: ``Accounting.misfits`` to count,
    ``with_raw_args`` to keep the raw values (``values[i]`` for ``i`` in ``bad``), or a skip for a
    ``REQUIRED`` column.  Cost: one C-level conversion when everything fits (plus a scan of the
    Python types of a list), value by value otherwise."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        if values.type == type:
            return values, []
        if (pa.types.is_string(type) and not pa.types.is_null(values.type) and not (
                pa.types.is_string(values.type) or pa.types.is_large_string(values.type))) or (
                pa.types.is_boolean(values.type) and not pa.types.is_boolean(type)):
            values = values.to_pylist()  # numbers or bytes as text, bools as numbers: value by value
        else:
            try:
                return values.cast(type), []
            except _MISFIT:
                pass
            if pa.types.is_integer(type) and pa.types.is_integer(values.type):
                lo, hi = _int_range(type)
                ok = pc.and_(pc.greater_equal(values, lo), pc.less_equal(values, hi))
                bad = pc.indices_nonzero(pc.invert(ok.fill_null(True))).to_pylist()
                return pc.if_else(ok, values, pa.scalar(None, values.type)).cast(type), bad
            values = values.to_pylist()
    types = set(map(type_of, values))
    plain = {int} if pa.types.is_integer(type) else {int, float} if pa.types.is_floating(type) \
        else {bool} if pa.types.is_boolean(type) else {str} if pa.types.is_string(type) else set()
    if types - {_NONE} <= plain:
        try:
            arr = pa.array(values, type)
            if not (int in types and pa.types.is_floating(type)) or all(
                    -2**53 <= v <= 2**53 for v in values if type_of(v) is int):
                return arr, []
        except _MISFIT:
            pass
    out, bad = [], []
    for i, v in enumerate(values):
        ok, x = _fit_value(v, type)
        out.append(x)
        if not ok:
            bad.append(i)
    return pa.array(out, type), bad


type_of = type  # ``fit``'s parameter named ``type`` shadows the builtin


def raw_json_value(v):
    """A raw value as JSON can hold it: bytes as ``hex:...`` (as the nsys args do), numbers beyond
    64 bits and non-finite floats as their text."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "hex:" + bytes(v).hex().upper()
    if type(v) is int and not -2**63 <= v < 2**64:
        return str(v)
    if type(v) is float and (v != v or v in (float("inf"), float("-inf"))):
        return str(v)
    return v


def with_raw_args(args, extras: dict[int, dict]):
    """The args JSON texts (an Arrow string array, or a list or tuple of str / None) with, for each
    row ``i`` in ``extras``, its members ``{key: raw value}`` added (keys ``_raw_<name>``; values
    by ``raw_json_value``).  Returns a list of texts (``args`` itself when ``extras`` is empty).
    A row's args that are not a JSON object are kept under "args"."""
    if not extras:
        return args
    out = args.to_pylist() if isinstance(args, (pa.Array, pa.ChunkedArray)) else list(args)
    for i, extra in extras.items():
        t = out[i]
        d = orjson.loads(t) if t else {}
        if not isinstance(d, dict):
            d = {"args": d}
        d.update({k: raw_json_value(v) for k, v in extra.items()})
        out[i] = dumps_args(d)
    return out


# -- text too long for a column ------------------------------------------------------------------
#
# A text value longer than TEXT_LIMIT bytes (UTF-8) is cut to its first TEXT_LIMIT bytes (at a
# character boundary), counted in ``Accounting.repairs``; a JSON column's value (``args``) becomes
# ``{"_truncated": "<its first TEXT_LIMIT bytes>"}`` so it stays a JSON object.  Real names and
# args are at most kilobytes (the longest kernel names: ~4 KB); a 100 MB event name held whole
# takes gigabytes on the way into DuckDB (its blocks are 256 KiB, a string must fit its memory
# limit), so conversion would fail under any normal memory budget.  Applied where every batch is
# built (``TableBuilder``, the nsys reader's ``_batch``), so no path can skip it.

TEXT_LIMIT = 1 << 20  # 1 MiB


def text_cut_reason(table: str, name: str, json_column: bool) -> str:
    if json_column:
        return (f"{table}.{name}: JSON text over {TEXT_LIMIT:,} bytes kept as "
                f'{{"_truncated": its first {TEXT_LIMIT:,} bytes}}')
    return f"{table}.{name}: text over {TEXT_LIMIT:,} bytes cut to its first {TEXT_LIMIT:,} bytes"


def cap_text(table: str, batch: pa.RecordBatch, accounting: Accounting) -> pa.RecordBatch:
    """``batch`` with every text value over TEXT_LIMIT bytes cut (see above), counted.  Costs
    nothing for a column whose whole buffer is under the limit, one pass over its lengths
    otherwise (~0.1 ms per 65,536 values: ~0.4 ms per batch of Kineto events)."""
    cols = None
    for i, f in enumerate(batch.schema):
        if not pa.types.is_string(f.type):
            continue
        arr = batch.column(i)
        if arr.nbytes <= TEXT_LIMIT:
            continue
        lengths = pc.binary_length(arr)
        if (pc.max(lengths).as_py() or 0) <= TEXT_LIMIT:  # ~0.1 ms for 65,536 values
            continue
        over = pc.greater(lengths, TEXT_LIMIT).fill_null(False)
        idx = pc.indices_nonzero(over).to_pylist()
        if not idx:
            continue
        json_column = _is_json_column(table, f.name)
        cut = []
        for j in idx:
            head = bytes(arr[j].as_buffer()[:TEXT_LIMIT]).decode("utf-8", "ignore")  # a split
            cut.append(orjson.dumps({"_truncated": head}).decode() if json_column else head)  # char dropped
        accounting.repair(text_cut_reason(table, f.name, json_column), len(idx))
        if cols is None:
            cols = list(batch.columns)
        cols[i] = pc.replace_with_mask(arr, over, pa.array(cut, pa.string()))
    return batch if cols is None else pa.RecordBatch.from_arrays(cols, schema=batch.schema)


def _is_json_column(table: str, name: str) -> bool:
    try:
        return any(c.name == name and c.json for c in schema.table(table).columns)
    except KeyError:
        return False
