"""The macros of sql/lib parsed and inlined into a view's tree, and its getvariable() parameters
replaced by their values, before the dialect rules run (translate.py)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import sqlglot
from sqlglot import exp

from tracekit import views as V

from .nodes import DuckDBViews, TranslationError, identifier


@dataclass(frozen=True)
class Macro:
    name: str
    params: tuple[str, ...]
    body: exp.Expression
    table: bool


# ------------------------------------------------------------------------------------------ parsing

@lru_cache(maxsize=1)
def macros() -> dict[str, Macro]:
    """Every macro of sql/lib/*.sql, parsed (name lower-cased)."""
    out = {}
    for path, _ in V.library():
        for st in sqlglot.parse(path.read_text(), read=DuckDBViews):
            if not isinstance(st, exp.Create) or str(st.args.get("kind")).upper() != "MACRO":
                raise TranslationError(f"{path}: a statement that is not CREATE MACRO")
            udf = st.this
            name = udf.this.name.lower()
            body = st.expression
            out[name] = Macro(name, tuple(e.name.lower() for e in udf.expressions), body,
                              isinstance(body, (exp.Query, exp.Union)))
    return out


# ---------------------------------------------------------------------------------- macro inlining

fresh_ids = itertools.count(1)


def wrap(e: exp.Expression) -> exp.Expression:
    """An argument as an operand: parenthesized unless atomic (precedence is kept)."""
    if isinstance(e, (exp.Column, exp.Literal, exp.Identifier, exp.Paren, exp.Null, exp.Boolean,
                      exp.Func, exp.Bracket, exp.Dot, exp.Var)) and not isinstance(e, exp.Binary):
        return e
    return exp.Paren(this=e)


def substitute(body: exp.Expression, args: dict[str, exp.Expression]) -> exp.Expression:
    """The macro body with each parameter replaced by its argument expression; the body's lambda
    variables renamed (fresh) so that an argument cannot be captured by them."""
    body = body.copy()
    n = next(fresh_ids)
    for lam in list(body.find_all(exp.Lambda)):
        names = {i.name for i in lam.expressions}
        ren = {nm: f"{nm}__{n}" for nm in names}
        for ident in list(lam.this.find_all(exp.Identifier)):
            # a lambda variable is a bare identifier in the body (sqlglot's lambda parsing)
            if ident.name in ren and not isinstance(ident.parent, (exp.Column, exp.Dot, exp.Alias,
                                                                   exp.TableAlias, exp.Table)):
                ident.set("this", ren[ident.name])
        for i in lam.expressions:
            i.set("this", ren[i.name])

    def repl(node):
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in args:
            return wrap(args[node.name.lower()].copy())
        if isinstance(node, exp.Column) and node.table and node.table.lower() in args and not node.args.get("db"):
            a = args[node.table.lower()]
            if isinstance(a, exp.Column) and not a.table:  # a table alias passed as a row (struct)
                return exp.column(node.name, table=a.name)
            return exp.Dot(this=exp.Paren(this=a.copy()), expression=exp.to_identifier(node.name))
        return node

    return body.transform(repl, copy=False)


def call_name(node) -> str | None:
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    return None


def inline_macros(tree: exp.Expression, depth: int = 0) -> exp.Expression:
    """Rule: every macro call of sql/lib (scalar: an expression; table: a subquery, its
    `query_table(rel)` parameters resolved to the relation named) replaced by its body, with the
    arguments substituted as expressions, repeated until none is left."""
    lib = macros()
    for _ in range(10_000):
        call = None
        for node in tree.walk():
            nm = call_name(node)
            if nm in lib:
                call = node
                break
        if call is None:
            return tree
        m = lib[call_name(call)]
        if len(call.expressions) != len(m.params):
            raise TranslationError(f"{m.name}: {len(m.params)} arguments expected, {len(call.expressions)} given")
        body = substitute(m.body, dict(zip(m.params, call.expressions)))
        if m.table:
            tbl = call.parent
            if not isinstance(tbl, exp.Table):
                raise TranslationError(f"table macro {m.name} used as a scalar")
            _resolve_query_table(body)
            _rename_ctes(body)
            alias = tbl.args.get("alias") or exp.TableAlias(this=exp.to_identifier(m.name))
            new = exp.Subquery(this=body, alias=alias.copy())
            if tbl is tree:
                tree = new
            else:
                tbl.replace(new)
        else:
            new = wrap(body)
            if call is tree:
                tree = new
            else:
                call.replace(new)
    raise TranslationError("macro expansion does not terminate")


def _rename_ctes(body: exp.Expression) -> None:
    """The CTEs of an inlined table macro get names of their own (Spark lifts nested WITHs to the
    top of the statement, where a view's own CTE of the same name would clash)."""
    n = next(fresh_ids)
    names = {}
    for cte in body.find_all(exp.CTE):
        old = cte.alias
        names[old.lower()] = f"{old}__tk{n}"
        cte.args["alias"].set("this", identifier(names[old.lower()]))
    for t in body.find_all(exp.Table):
        if isinstance(t.this, exp.Identifier) and not t.args.get("db") and t.name.lower() in names:
            if not t.args.get("alias"):
                t.set("alias", exp.TableAlias(this=identifier(t.name)))
            t.set("this", identifier(names[t.name.lower()]))


def _resolve_query_table(body: exp.Expression) -> None:
    for t in list(body.find_all(exp.Table)):
        if call_name(t.this) == "query_table":
            arg = t.this.expressions[0]
            if not (isinstance(arg, exp.Literal) and arg.is_string):
                raise TranslationError("query_table() needs a relation name as a string")
            t.set("this", exp.to_identifier(arg.this))


def getvariables(tree: exp.Expression, params: dict | None) -> exp.Expression:
    """Rule: getvariable('name') -> the value given in params (the CLI's --param), else NULL, so
    that the view's documented default (coalesce(getvariable(...), default)) applies."""
    params = {k.lower(): v for k, v in (params or {}).items()}

    def repl(node):
        if call_name(node) == "getvariable":
            key = node.expressions[0]
            name = key.this.lower() if isinstance(key, exp.Literal) else ""
            if name not in params or params[name] is None:
                return exp.Null()
            v = params[name]
            if isinstance(v, bool):
                return exp.Boolean(this=v)
            if isinstance(v, int):
                return exp.Literal.number(v)
            if isinstance(v, float):
                return exp.cast(exp.Literal.number(repr(v)), "DOUBLE")
            return exp.Literal.string(str(v))
        return node

    return tree.transform(repl, copy=False)
