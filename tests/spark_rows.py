"""Row comparison of two engines' results (tests/scale/test_spark.py): the same multiset of rows,
floats equal to a relative 1e-9 (summation order differs between engines), NULLs equal,
lists and structs compared as Python values, column names and order equal."""

from __future__ import annotations

import decimal
import math

REL = 1e-9


def _key(v):
    """A sort key that equal-within-tolerance values share (floats rounded to 6 digits)."""
    if v is None:
        return (0, "")
    if isinstance(v, bool):
        return (1, str(v))
    if isinstance(v, (int, decimal.Decimal)) and v == int(v):
        return (2, int(v))  # exact: large ids differ in their last digits
    if isinstance(v, (float, decimal.Decimal)):
        f = float(v)
        if math.isnan(f):
            return (2, math.inf)
        return (2, float(f"{f:.6g}"))
    if isinstance(v, dict):
        return (3, tuple((k, _key(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return (4, tuple(_key(x) for x in v))
    return (5, str(v))


def same_value(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float, decimal.Decimal)) and isinstance(b, (int, float, decimal.Decimal)):
        if isinstance(a, float) or isinstance(b, float):
            fa, fb = float(a), float(b)
            if math.isnan(fa) or math.isnan(fb):
                return math.isnan(fa) and math.isnan(fb)
            return math.isclose(fa, fb, rel_tol=REL, abs_tol=1e-12)
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def same_rows(expected: list[dict], got: list[dict]) -> str | None:
    """None when the rows are the same, else what differs (one line)."""
    if len(expected) != len(got):
        return f"{len(expected)} rows expected, {len(got)} got"
    if expected and list(expected[0]) != list(got[0]):
        return f"columns {list(expected[0])} expected, {list(got[0])} got"
    ex = sorted(expected, key=lambda r: tuple(_key(v) for v in r.values()))
    gt = sorted(got, key=lambda r: tuple(_key(v) for v in r.values()))
    bad = [(a, b) for a, b in zip(ex, gt) if not all(same_value(a[k], b[k]) for k in a)]
    if bad:
        a, b = bad[0]
        cols = [k for k in a if not same_value(a[k], b[k])]
        return (f"{len(bad)} of {len(ex)} rows differ, e.g. columns {cols}: "
                f"{ {k: a[k] for k in cols} } expected, { {k: b[k] for k in cols} } got")
    return None
