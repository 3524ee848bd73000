"""What the Spark translation's parts share: its error, DuckDB's dialect as the views write it, and
the small node builders the rules use (translate.py puts the parts together)."""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp



class TranslationError(ValueError):
    """A construct of DuckDB's dialect that has no rule here."""


class DuckDBViews(sqlglot.dialects.DuckDB):
    """DuckDB as the views write it: len(x) is only used on lists (length(s) on text). List
    indexes are kept as written (INDEX_OFFSET 0: sqlglot would otherwise shift the ones it can
    type as integers to 0-based, and leave the others), rule_list_index reads them 1-based."""

    INDEX_OFFSET = 0

    class Parser(sqlglot.dialects.DuckDB.Parser):
        FUNCTIONS = {**sqlglot.dialects.DuckDB.Parser.FUNCTIONS,
                     "LEN": lambda args: exp.ArraySize(this=args[0])}


# ------------------------------------------------------------------------------- dialect rewrites
# Each rule: one DuckDB construct the views use that Spark lacks or reads differently, rewritten
# to Spark's equivalent on the AST (sqlglot then writes it). What sqlglot already translates right
# (QUALIFY, explicit NULLS LAST, struct literals, arg_max -> max_by, ILIKE, FILTER, ...) is left
# to it.

def fn(name: str, *args) -> exp.Anonymous:
    return exp.Anonymous(this=name, expressions=[a for a in args])


def _lit(v) -> exp.Expression:
    return exp.Literal.number(v) if isinstance(v, (int, float)) else exp.Literal.string(v)


def _is_int_literal(e) -> bool:
    return isinstance(e, exp.Literal) and not e.is_string and re.fullmatch(r"-?\d+", e.this) is not None


def as_int(e):
    if isinstance(e, exp.Neg) and _is_int_literal(e.this):
        return -int(e.this.this)
    return int(e.this) if _is_int_literal(e) else None


def identifier(name: str) -> exp.Identifier:
    return exp.to_identifier(name)


def not_null(e) -> exp.Expression:
    return exp.Not(this=exp.Is(this=e, expression=exp.Null()))
