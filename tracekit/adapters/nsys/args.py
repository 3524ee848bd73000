"""The ``args`` JSON text of the columns no schema column maps: built by SQLite (``args_sql``) on
the sqlite3 path, and to the same text without Python per row (``args_arrow``) on the columnar
path."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from .common import quote_ident


def args_arrow(keys: list[str], arrays: list[pa.Array], n: int, max_card: int = 256) -> pa.Array:
    """The JSON text that ``args_sql`` has SQLite build, for integer columns, without Python per
    row: the non-NULL members in column order, NULL when there are none.  ``keys`` are the member
    prefixes as SQLite writes them (``"name":``).

    Columns with few distinct values (nsys's constant-ish extras) are folded into one code per
    row; each distinct code becomes a text template in Python (the members of those columns, and
    which of the other columns are NULL), and a row's text is its template's literal pieces
    around the decimal text of its other columns, joined by polars (Arrow's string joins are
    several times slower)."""
    parts = []  # (key, "low", dictionary, mult, card) or (key, "high", array, mult or None, 2)
    code = None
    mult = 1
    for k, a in zip(keys, arrays):
        if a.null_count == n:
            continue
        enc = pc.dictionary_encode(a, null_encoding="encode")
        card = len(enc.dictionary)
        if card <= max_card and mult * card < (1 << 62):
            term, part = enc.indices.cast(pa.int64()), (k, "low", enc.dictionary.to_pylist(), mult, card)
        elif a.null_count:
            term, card, part = pc.is_null(a).cast(pa.int64()), 2, (k, "high", a, mult, 2)
        else:
            parts.append((k, "high", a, None, 1))
            continue
        if mult * card >= (1 << 62):  # too many combinations: no folding
            return args_joined(keys, arrays, n)
        term = term if mult == 1 else pc.multiply(term, mult)
        code = term if code is None else pc.add(code, term)
        parts.append(part)
        mult *= card
    if not parts:
        return pa.nulls(n, pa.string())
    enc = pc.dictionary_encode(code if code is not None else pa.repeat(pa.scalar(0, pa.int64()), n))
    combos = enc.dictionary.to_pylist()
    if len(combos) > 1024 and len(combos) * 8 > n:
        return args_joined(keys, arrays, n)
    highs = [p for p in parts if p[1] == "high"]
    lits: list[list] = [[] for _ in range(len(highs) + 1)]
    for x in combos:
        pieces, buf, first = [], "", True
        for k, kind, v, m, card in parts:
            if kind == "low":
                val = v[(x // m) % card]
                if val is not None:
                    buf += ("{" if first else ",") + k + str(val)
                    first = False
            elif m is not None and (x // m) % 2:  # NULL in this row: no member
                pieces.append(buf)
                buf = ""
            else:
                pieces.append(buf + ("{" if first else ",") + k)
                buf, first = "", False
        pieces.append(buf + "}")
        if first:  # no member at all: NULL
            pieces = [None] + [""] * len(highs)
        for j, piece in enumerate(pieces):
            lits[j].append(piece)
    import polars as pl

    if not highs:
        return pc.take(pa.array(lits[0], pa.string()), enc.indices)
    frame = {"__i": enc.indices.cast(pa.uint32())}
    exprs = []
    for j, lit in enumerate(lits):
        exprs.append(pl.lit(lit[0], dtype=pl.Utf8) if len(set(lit)) == 1
                     else pl.lit(pl.Series(lit, dtype=pl.Utf8)).gather(pl.col("__i")))
        if j < len(highs):
            frame[f"h{j}"] = highs[j][2]
            exprs.append(pl.col(f"h{j}").cast(pl.Utf8).fill_null(""))
    out = pl.from_arrow(pa.table(frame)).select(pl.concat_str(exprs).alias("a")).to_series().to_arrow()
    return out.cast(pa.string())


def args_joined(keys: list[str], arrays: list[pa.Array], n: int) -> pa.Array:
    """``args_arrow`` member by member (when the columns have too many distinct values)."""
    pieces = [pc.binary_join_element_wise("," + k, pc.cast(a, pa.string()), "")
              for k, a in zip(keys, arrays) if a.null_count < n]
    if not pieces:
        return pa.nulls(n, pa.string())
    body = pc.binary_join_element_wise(*pieces, "", null_handling="replace", null_replacement="")
    text = pc.binary_join_element_wise("{", pc.utf8_slice_codeunits(body, 1), "}", "")
    return pc.if_else(pc.equal(body, ""), pa.scalar(None, pa.string()), text)



def args_sql(columns: list[str], extra: dict | None = None, drop_zero: set = frozenset()) -> str:
    """SQL for the JSON text of the non-NULL values of `columns` (NULL when none): built by SQLite
    (json_object, then json_patch onto '{}' which drops the NULL members). BLOBs become hex text."""
    pairs = []
    for c in columns:
        v = f"CASE typeof({quote_ident(c)}) WHEN 'blob' THEN 'hex:' || hex({quote_ident(c)}) ELSE {quote_ident(c)} END"
        if c in drop_zero:
            v = f"CASE typeof({quote_ident(c)}) WHEN 'blob' THEN 'hex:' || hex({quote_ident(c)}) ELSE NULLIF({quote_ident(c)}, 0) END"
        pairs.append(f"'{c.replace(chr(39), chr(39) * 2)}', {v}")
    for k, expr in (extra or {}).items():
        pairs.append(f"'{k}', {expr}")
    if not pairs:
        return "NULL"
    expr = "'{}'"
    for i in range(0, len(pairs), 50):  # SQLite caps a function's argument count
        expr = f"json_patch({expr}, json_object({', '.join(pairs[i:i + 50])}))"
    return f"NULLIF({expr}, '{{}}')"
