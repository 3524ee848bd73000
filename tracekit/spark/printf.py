"""printf / format in Spark SQL (a rule of translate.py): each format spec as Spark writes it,
with numbers rounded as C's printf rounds."""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from .macros import substitute, wrap
from .nodes import fn


_PRINTF_SPEC = re.compile(r"%(?:%|[-#+ 0,(]*\d*(?:\.\d+)?[a-zA-Z])")


# x rounded to D decimals as C's printf rounds (_c_rounded); A = |x|, S = 10^D. P = A * S rounded,
# E = A * S - P exactly (Dekker's product: A and S split into 26-bit halves whose products are
# exact), so a P that lands on k + 0.5 is told apart from a true tie by E's sign.
_SPLIT = "(CAST(134217729 AS DOUBLE) * {v} - (CAST(134217729 AS DOUBLE) * {v} - {v}))"
_ROUND_TEMPLATE = """
CASE WHEN abs(__x) >= 1e15 OR __d < 0 OR __d > 22 THEN NULL ELSE (
  CASE WHEN (__p - floor(__p)) > 0.5 THEN floor(__p) + 1
       WHEN (__p - floor(__p)) < 0.5 THEN floor(__p)
       WHEN __e > 0 THEN floor(__p) + 1
       WHEN __e < 0 THEN floor(__p)
       WHEN floor(__p) % 2 = 0 THEN floor(__p)
       ELSE floor(__p) + 1 END) / __s END
"""


def _c_rounded(x: exp.Expression, digits: int | exp.Expression) -> exp.Expression:
    """x rounded to ``digits`` decimals as C's printf rounds its binary value: an exact tie (12.5
    for '%.0f') to the even neighbour, where Java's format_string rounds half up ('13' against C's
    '12'); 2.675, whose binary value is 2.67499.., down ('2.67'), where Java rounds its shortest
    decimal up. |x| * 10^digits in doubles can land on the tie itself (2.675 * 100 is 267.5),
    so the product's rounding error decides (_ROUND_TEMPLATE). Rounded in magnitude, the sign
    kept (-0.5 -> '-0', as C). x is left as it is where this does not apply (|x| >= 1e15,
    ``digits`` outside 0-22: %g of large numbers; Java's rounding then)."""
    x = wrap(x)
    a = fn("abs", x.copy())
    d = digits if isinstance(digits, exp.Expression) else exp.Literal.number(digits)
    s = (exp.Literal.number(10 ** digits) if isinstance(digits, int)
         else fn("power", exp.Literal.number(10), digits.copy()))
    ah, sh = (sqlglot.parse_one(_SPLIT.format(v="__a"), read="duckdb"),
              sqlglot.parse_one(_SPLIT.format(v="__s"), read="duckdb"))
    # E = ((Ah*Sh - P) + Ah*Sl + Al*Sh) + Al*Sl, with Al = A - Ah, Sl = S - Sh
    e = sqlglot.parse_one("(((__ah * __sh - __p) + __ah * (__s - __sh) + (__a - __ah) * __sh)"
                          " + (__a - __ah) * (__s - __sh))", read="duckdb")
    p = sqlglot.parse_one("__a * __s", read="duckdb")
    e = substitute(e, {"__ah": ah, "__sh": sh, "__p": p})  # the macro inliner's substitution
    tree = substitute(sqlglot.parse_one(_ROUND_TEMPLATE, read="duckdb"), {"__e": e, "__p": p})
    rounded = substitute(tree, {"__x": x, "__a": a, "__s": s, "__d": d})
    negative = exp.LT(this=x.copy(), expression=exp.Literal.number(0))
    return fn("coalesce", exp.Case().when(negative, exp.Neg(this=exp.Paren(this=rounded.copy())))  # -0.0: '-0'
               .else_(rounded), x.copy())


def rule_printf(node):
    """printf's floating-point specs as C (DuckDB) writes them, where Java's format_string differs:
    - %g (e.g. '%.3g'): C drops the trailing zeros, Java keeps them ('0' against '0.00', '1.5'
      against '1.50'). The spec becomes %s of Java's text with the zeros after the decimal point
      (and then a bare point) removed, in the mantissa too ('1.20e+03' -> '1.2e+03').
    - %f (e.g. '%.0f') and %g: C rounds a tie to even and by the binary value, Java half up on
      the shortest decimal; the argument is rounded first (_c_rounded: to the decimals of %f, to
      the significant digits of %g), so Java's rounding has nothing left to do.
    - NULL in any argument: NULL, as DuckDB (Java writes 'null').
    (Runs after rule_regexp: these regexp_replace calls already replace every match.)"""
    if not (isinstance(node, exp.Anonymous) and str(node.name).lower() == "printf" and node.expressions):
        return node
    original = [a.copy() for a in node.expressions[1:]]
    out_node = _printf_specs(node)
    if not original:
        return out_node
    # DuckDB's printf is NULL when an argument is; Java writes 'null' in its place
    any_null = original[0].is_(exp.Null())
    for a in original[1:]:
        any_null = exp.Or(this=any_null, expression=a.is_(exp.Null()))
    return exp.Case().when(any_null, exp.Null()).else_(out_node)


def _printf_specs(node):
    fmt = node.expressions[0]
    if not (isinstance(fmt, exp.Literal) and fmt.is_string):
        return node
    args = list(node.expressions[1:])
    out, k, pos, changed = [], 0, 0, False
    for m in _PRINTF_SPEC.finditer(fmt.this):
        out.append(fmt.this[pos:m.start()])
        spec = m.group(0)
        pos = m.end()
        if spec == "%%":
            out.append(spec)
            continue
        if spec.endswith("g") and k < len(args):
            prec = re.search(r"\.(\d+)g$", spec)
            sig = max(1, int(prec.group(1)) if prec else 6)
            # rounded to `sig` significant digits as C rounds: `sig` - 1 - the decimal exponent
            digits = exp.Sub(this=exp.Literal.number(sig - 1), expression=fn(
                "floor", fn("log10", fn("abs", args[k].copy()))))
            x = exp.Case().when(exp.EQ(this=args[k].copy(), expression=exp.Literal.number(0)),
                                args[k].copy()).else_(_c_rounded(args[k], digits))
            java = fn("format_string", exp.Literal.string(spec), x)
            trimmed = fn("regexp_replace", java, exp.Literal.string("([.][0-9]*?)0+(e|$)"),
                          exp.Literal.string("$1$2"))
            args[k] = fn("regexp_replace", trimmed, exp.Literal.string("[.](e|$)"), exp.Literal.string("$1"))
            spec, changed = "%s", True
        elif spec.endswith("f") and k < len(args):
            prec = re.search(r"\.(\d+)f$", spec)
            args[k] = _c_rounded(args[k], int(prec.group(1)) if prec else 6)
            changed = True
        out.append(spec)
        k += 1
    if not changed:
        return node
    out.append(fmt.this[pos:])
    return fn("printf", exp.Literal.string("".join(out)), *args)
