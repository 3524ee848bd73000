"""Every tracekit view in Spark SQL, from its one DuckDB definition (sql/*.sql, sql/lib/*.sql).

No view has a second, Spark-only text: each file is parsed with sqlglot (DuckDB dialect), the
macros of ``sql/lib`` are inlined, the DuckDB-only constructs the views use are rewritten as AST
transforms (one small function per rule, each saying why), and sqlglot writes the result in
Spark's dialect.  Nothing here imports pyspark.

    spark_views(params)  -> [(view, Spark SELECT text)] in creation order
    to_spark(query, params) -> a user's query, written for DuckDB, in Spark SQL

The Spark session must run with ``spark.sql.parser.quotedRegexColumnNames=true`` (EXCLUDE becomes
a regex column) and ANSI mode off (see tracekit/spark/session.py, which sets both).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import lru_cache

import sqlglot
from sqlglot import exp

from tracekit import views as V


class TranslationError(ValueError):
    """A construct of DuckDB's dialect that has no rule here."""


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
        for st in sqlglot.parse(path.read_text(), read=_DuckDB):
            if not isinstance(st, exp.Create) or str(st.args.get("kind")).upper() != "MACRO":
                raise TranslationError(f"{path}: a statement that is not CREATE MACRO")
            udf = st.this
            name = udf.this.name.lower()
            body = st.expression
            out[name] = Macro(name, tuple(e.name.lower() for e in udf.expressions), body,
                              isinstance(body, (exp.Query, exp.Union)))
    return out


# ---------------------------------------------------------------------------------- macro inlining

_fresh = itertools.count(1)


def _wrap(e: exp.Expression) -> exp.Expression:
    """An argument as an operand: parenthesized unless atomic (precedence is kept)."""
    if isinstance(e, (exp.Column, exp.Literal, exp.Identifier, exp.Paren, exp.Null, exp.Boolean,
                      exp.Func, exp.Bracket, exp.Dot, exp.Var)) and not isinstance(e, exp.Binary):
        return e
    return exp.Paren(this=e)


def _substitute(body: exp.Expression, args: dict[str, exp.Expression]) -> exp.Expression:
    """The macro body with each parameter replaced by its argument expression; the body's lambda
    variables renamed (fresh) so that an argument cannot be captured by them."""
    body = body.copy()
    n = next(_fresh)
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
            return _wrap(args[node.name.lower()].copy())
        if isinstance(node, exp.Column) and node.table and node.table.lower() in args and not node.args.get("db"):
            a = args[node.table.lower()]
            if isinstance(a, exp.Column) and not a.table:  # a table alias passed as a row (struct)
                return exp.column(node.name, table=a.name)
            return exp.Dot(this=exp.Paren(this=a.copy()), expression=exp.to_identifier(node.name))
        return node

    return body.transform(repl, copy=False)


def _call_name(node) -> str | None:
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    return None


def _inline_macros(tree: exp.Expression, depth: int = 0) -> exp.Expression:
    """Rule: every macro call of sql/lib (scalar: an expression; table: a subquery, its
    `query_table(rel)` parameters resolved to the relation named) replaced by its body, with the
    arguments substituted as expressions, repeated until none is left."""
    lib = macros()
    for _ in range(10_000):
        call = None
        for node in tree.walk():
            nm = _call_name(node)
            if nm in lib:
                call = node
                break
        if call is None:
            return tree
        m = lib[_call_name(call)]
        if len(call.expressions) != len(m.params):
            raise TranslationError(f"{m.name}: {len(m.params)} arguments expected, {len(call.expressions)} given")
        body = _substitute(m.body, dict(zip(m.params, call.expressions)))
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
            new = _wrap(body)
            if call is tree:
                tree = new
            else:
                call.replace(new)
    raise TranslationError("macro expansion does not terminate")


def _rename_ctes(body: exp.Expression) -> None:
    """The CTEs of an inlined table macro get names of their own (Spark lifts nested WITHs to the
    top of the statement, where a view's own CTE of the same name would clash)."""
    n = next(_fresh)
    names = {}
    for cte in body.find_all(exp.CTE):
        old = cte.alias
        names[old.lower()] = f"{old}__tk{n}"
        cte.args["alias"].set("this", _ident(names[old.lower()]))
    for t in body.find_all(exp.Table):
        if isinstance(t.this, exp.Identifier) and not t.args.get("db") and t.name.lower() in names:
            if not t.args.get("alias"):
                t.set("alias", exp.TableAlias(this=_ident(t.name)))
            t.set("this", _ident(names[t.name.lower()]))


def _resolve_query_table(body: exp.Expression) -> None:
    for t in list(body.find_all(exp.Table)):
        if _call_name(t.this) == "query_table":
            arg = t.this.expressions[0]
            if not (isinstance(arg, exp.Literal) and arg.is_string):
                raise TranslationError("query_table() needs a relation name as a string")
            t.set("this", exp.to_identifier(arg.this))


def _getvariables(tree: exp.Expression, params: dict | None) -> exp.Expression:
    """Rule: getvariable('name') -> the value given in params (the CLI's --param), else NULL, so
    that the view's documented default (coalesce(getvariable(...), default)) applies."""
    params = {k.lower(): v for k, v in (params or {}).items()}

    def repl(node):
        if _call_name(node) == "getvariable":
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


# ------------------------------------------------------------------------------- dialect rewrites
# Each rule: one DuckDB construct the views use that Spark lacks or reads differently, rewritten
# to Spark's equivalent on the AST (sqlglot then writes it). What sqlglot already translates right
# (QUALIFY, explicit NULLS LAST, struct literals, arg_max -> max_by, ILIKE, FILTER, ...) is left
# to it.

def _fn(name: str, *args) -> exp.Anonymous:
    return exp.Anonymous(this=name, expressions=[a for a in args])


def _lit(v) -> exp.Expression:
    return exp.Literal.number(v) if isinstance(v, (int, float)) else exp.Literal.string(v)


def _is_int_literal(e) -> bool:
    return isinstance(e, exp.Literal) and not e.is_string and re.fullmatch(r"-?\d+", e.this) is not None


def _as_int(e):
    if isinstance(e, exp.Neg) and _is_int_literal(e.this):
        return -int(e.this.this)
    return int(e.this) if _is_int_literal(e) else None


def rule_list_index(node):
    """x[i] on a list (1-based, negative from the end, NULL out of range or at 0 in DuckDB) ->
    element_at(x, i), which counts the same way (ANSI off: NULL out of range; 0 made NULL);
    x[a:b] (1-based, both ends inclusive) -> slice(x, a, max(b - a + 1, 0))."""
    if not isinstance(node, exp.Bracket) or len(node.expressions) != 1:
        return node
    idx = node.expressions[0]
    if isinstance(idx, exp.Slice):
        a, b = idx.this, idx.expression
        a = a if a is not None else exp.Literal.number(1)
        if b is None:
            b = _fn("array_size", node.this.copy())
        n = exp.Sub(this=_wrap(b), expression=_wrap(a)) if _as_int(a) != 1 else b
        if _as_int(a) != 1:
            n = exp.Add(this=n, expression=exp.Literal.number(1))
        return _fn("slice", node.this, exp.cast(a, "INT"), _fn("greatest", exp.cast(n, "INT"), exp.Literal.number(0)))
    if isinstance(idx, exp.Literal) and idx.is_string:
        return node  # a struct field or map key
    k = _as_int(idx)
    if k is not None:
        return exp.Null() if k == 0 else _fn("element_at", node.this, exp.Literal.number(k))
    return _fn("element_at", node.this, _fn("nullif", exp.cast(idx, "INT"), exp.Literal.number(0)))


def rule_array_size(node):
    """len(list) / array_length(list) -> array_size (NULL for NULL; Spark's size() gives -1)."""
    if isinstance(node, exp.ArraySize):
        return _fn("array_size", node.this)
    return node


def rule_lambda_index(node):
    """list_transform(l, lambda x, i: ...) -> transform(l, (x, i) -> ...): DuckDB's index i is
    1-based, Spark's 0-based, so i becomes (i + 1) in the body."""
    if isinstance(node, exp.Transform) and isinstance(node.expression, exp.Lambda) and len(node.expression.expressions) == 2:
        lam = node.expression
        iname = lam.expressions[1].name
        new_i = f"{iname}__0"
        for ident in list(lam.this.find_all(exp.Identifier)):
            if ident.name == iname and not isinstance(ident.parent, (exp.Column, exp.Dot)):
                ident.replace(exp.Paren(this=exp.Add(this=exp.to_identifier(new_i), expression=exp.Literal.number(1))))
        lam.expressions[1].set("this", new_i)
    return node


def rule_list_functions(node):
    """list_reduce(l, f, init) -> aggregate(l, init, f); list_sum(l) (NULLs skipped, NULL when
    none) -> aggregate over the non-NULL elements, as DOUBLE; flatten(l) skips NULL sublists
    (Spark's would give NULL); suffix -> endswith."""
    name = _call_name(node)
    if name == "list_reduce":
        lst, f, *init = node.expressions
        if not init:
            raise TranslationError("list_reduce without an initial value")
        return _fn("aggregate", lst, init[0], f)
    if name == "list_sum":
        v = f"v__{next(_fresh)}"
        acc = f"acc__{next(_fresh)}"
        lam_f = exp.Lambda(this=exp.Not(this=exp.Is(this=exp.to_identifier(v), expression=exp.Null())),
                           expressions=[exp.to_identifier(v)])
        add = exp.Add(this=_fn("coalesce", exp.to_identifier(acc), exp.cast(exp.Literal.number(0), "DOUBLE")),
                      expression=exp.to_identifier(v))
        lam = exp.Lambda(this=add, expressions=[exp.to_identifier(acc), exp.to_identifier(v)])
        return _fn("aggregate", _fn("filter", node.expressions[0], lam_f), exp.cast(exp.Null(), "DOUBLE"), lam)
    if isinstance(node, exp.Flatten):
        v = f"v__{next(_fresh)}"
        lam_f = exp.Lambda(this=exp.Not(this=exp.Is(this=exp.to_identifier(v), expression=exp.Null())),
                           expressions=[exp.to_identifier(v)])
        return _fn("flatten", _fn("filter", node.this, lam_f))
    if name == "suffix":
        return _fn("endswith", *node.expressions)
    return node


def _java_regex(p: str) -> str:
    """An RE2 pattern as a Java one: the syntax the views use is shared (classes, \\b, \\s,
    (?i), (?i:...), lazy quantifiers); RE2 has no backreferences or lookaround, so nothing else
    needs to change."""
    return p


def rule_regexp(node):
    """regexp_matches(s, p, 'i') -> s RLIKE '(?i)p' (sqlglot drops the flag);
    regexp_replace(s, p, r) without 'g' replaces the FIRST match only in DuckDB (Spark: all):
    -> regexp_replace(s, '^(?s)(.*?)(?:p)', '$1' || r); replacements: \\N -> $N, '$' escaped."""
    if isinstance(node, exp.RegexpLike):
        flag = node.args.get("flag")
        pat = node.expression
        if flag is not None:
            f = flag.this if isinstance(flag, exp.Literal) else None
            if f is None or set(f) - {"i", "c", "s"}:
                raise TranslationError(f"regexp_matches flag {flag.sql()} has no rule")
            if "i" in f:
                pat = (exp.Literal.string("(?i)" + pat.this) if isinstance(pat, exp.Literal)
                       else _fn("concat", exp.Literal.string("(?i)"), pat))
        return exp.RegexpLike(this=node.this, expression=pat)
    if isinstance(node, exp.RegexpReplace):
        mods = node.args.get("modifiers")
        m = mods.this if isinstance(mods, exp.Literal) else ""
        if set(m) - {"g"}:
            raise TranslationError(f"regexp_replace modifiers {m!r} have no rule")
        pat, rep = node.expression, node.args.get("replacement")
        if not (isinstance(pat, exp.Literal) and isinstance(rep, exp.Literal)):
            raise TranslationError("regexp_replace needs literal pattern and replacement")
        r = re.sub(r"\\(\d)", r"$\1", rep.this.replace("$", "\\$"))
        if "g" in m:
            return _fn("regexp_replace", node.this, exp.Literal.string(_java_regex(pat.this)), exp.Literal.string(r))
        r = re.sub(r"\$(\d)", lambda g: "$" + str(int(g.group(1)) + 1), r)
        return _fn("regexp_replace", node.this, exp.Literal.string("^(?s)(.*?)(?:" + _java_regex(pat.this) + ")"),
                   exp.Literal.string("$1" + r))
    return node


def rule_arg_extreme(node):
    """arg_max / arg_min(x, k) -> max_by / min_by(x, CASE WHEN x IS NOT NULL THEN k END):
    DuckDB skips rows whose x is NULL (Spark would return that NULL); a row key (a, b) is a
    struct, ordered field by field in both."""
    if isinstance(node, (exp.ArgMax, exp.ArgMin)):
        x, k = node.this, node.expression
        if isinstance(k, exp.Tuple):
            k = exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier(f"k{i}"), expression=e)
                                        for i, e in enumerate(k.expressions)])
        k = exp.Case(ifs=[exp.If(this=exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null())), true=k)])
        return _fn("max_by" if isinstance(node, exp.ArgMax) else "min_by", x, k)
    return node


def rule_quantile(node):
    """quantile_cont(x, q) / median(x) (exact, interpolated) -> percentile(x, q)."""
    if isinstance(node, exp.PercentileCont) and not isinstance(node.parent, exp.WithinGroup):
        return _fn("percentile", node.this, node.expression)
    if isinstance(node, exp.Median):
        return _fn("percentile", node.this, exp.Literal.number(0.5))
    if _call_name(node) in ("quantile_cont", "quantile"):
        return _fn("percentile", *node.expressions)
    return node


def _ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name)


def _not_null(e) -> exp.Expression:
    return exp.Not(this=exp.Is(this=e, expression=exp.Null()))


def _comparator(n_keys: int, orders: list[exp.Ordered]) -> exp.Lambda:
    """(l, r) -> -1 / 0 / 1 comparing structs l, r on fields k0.. in the ORDER BY's directions
    and NULL placement (DuckDB's default: NULLS LAST, ascending or descending)."""
    ln, rn = f"l__{next(_fresh)}", f"r__{next(_fresh)}"
    out: exp.Expression = exp.Literal.number(0)
    for i in reversed(range(n_keys)):
        o = orders[i]
        desc = bool(o.args.get("desc"))
        nf = bool(o.args.get("nulls_first"))
        lf = exp.Dot(this=_ident(ln), expression=_ident(f"k{i}"))
        rf = exp.Dot(this=_ident(rn), expression=_ident(f"k{i}"))
        lt, gt = (exp.Literal.number(1), exp.Literal.number(-1)) if desc else (exp.Literal.number(-1), exp.Literal.number(1))
        out = exp.Case(ifs=[
            exp.If(this=exp.And(this=exp.Is(this=lf.copy(), expression=exp.Null()),
                                expression=exp.Is(this=rf.copy(), expression=exp.Null())), true=out),
            exp.If(this=exp.Is(this=lf.copy(), expression=exp.Null()), true=exp.Literal.number(-1 if nf else 1)),
            exp.If(this=exp.Is(this=rf.copy(), expression=exp.Null()), true=exp.Literal.number(1 if nf else -1)),
            exp.If(this=exp.LT(this=lf.copy(), expression=rf.copy()), true=lt),
            exp.If(this=exp.GT(this=lf.copy(), expression=rf.copy()), true=gt),
        ], default=out)
    return exp.Lambda(this=out, expressions=[_ident(ln), _ident(rn)])


def _agg(call: exp.Expression, filt) -> exp.Expression:
    """An aggregate call, with the FILTER (WHERE ...) of the aggregate it replaces."""
    return exp.Filter(this=call, expression=exp.Where(this=filt.copy())) if filt is not None else call


def _ordered_values(value: exp.Expression, order: list[exp.Ordered], distinct: bool, filt=None) -> exp.Expression:
    """The group's values as an array in the ORDER BY's order (NULL values kept): sorted structs
    {k0.., v}, then their v."""
    st = exp.Struct(expressions=[exp.PropertyEQ(this=_ident(f"k{i}"), expression=o.this)
                                 for i, o in enumerate(order)]
                    + [exp.PropertyEQ(this=_ident("v"), expression=value)])
    arr = _agg(_fn("collect_list", st), filt)
    if distinct:
        arr = _fn("array_distinct", arr)
    s = f"s__{next(_fresh)}"
    return _fn("transform", _fn("array_sort", arr, _comparator(len(order), order)),
               exp.Lambda(this=exp.Dot(this=_ident(s), expression=_ident("v")), expressions=[_ident(s)]))


def rule_ordered_aggregates(node):
    """Aggregates whose result depends on an ORDER BY inside the call, which Spark's aggregates
    do not take (a FILTER (WHERE ...) on the call goes to each aggregate of the rewrite):
      list(x ORDER BY k...)            -> transform(array_sort(collect_list({k.., v: x}), cmp), s -> s.v)
                                          (NULLs kept, as DuckDB's list does)
      string_agg(x, sep ORDER BY k...) -> array_join of the same (NULLs skipped; NULL for none)
      mode(x ORDER BY k...)            -> (mode({k.., v: x} where x is not NULL, true)).v: the most
                                          frequent value, ties to the first in that order (the keys
                                          are functions of x in the views: counts are equal)."""
    filt = None
    agg = node
    if isinstance(node.parent, exp.Filter) and node.arg_key == "this":
        return node  # rewritten with its FILTER, when the Filter node is visited
    if isinstance(node, exp.Filter):
        filt = node.expression.this
        agg = node.this
    if isinstance(agg, exp.ArrayAgg) and isinstance(agg.this, exp.Order):
        o = agg.this
        distinct = isinstance(o.this, exp.Distinct)
        v = o.this.expressions[0] if distinct else o.this
        return _ordered_values(v, o.expressions, distinct, filt)
    if isinstance(agg, exp.GroupConcat):
        sep = agg.args.get("separator") or exp.Literal.string(",")
        inner = agg.this
        order = []
        if isinstance(inner, exp.Order):
            order = inner.expressions
            inner = inner.this
        distinct = isinstance(inner, exp.Distinct)
        v = inner.expressions[0] if distinct else inner
        vals = _ordered_values(v, order, distinct, filt) if order else _agg(_fn(
            "collect_list", exp.Distinct(expressions=[v]) if distinct else v), filt)
        return exp.Case(ifs=[exp.If(this=exp.GT(this=_agg(exp.Count(this=v.copy()), filt), expression=exp.Literal.number(0)),
                                    true=_fn("array_join", vals, sep))])
    if isinstance(agg, exp.Mode) and isinstance(agg.this, exp.Order):
        o = agg.this
        if any(x.args.get("desc") for x in o.expressions):
            raise TranslationError("mode(... ORDER BY ... DESC) has no rule")
        st = exp.Struct(expressions=[exp.PropertyEQ(this=_ident(f"k{i}"), expression=x.this)
                                     for i, x in enumerate(o.expressions)]
                        + [exp.PropertyEQ(this=_ident("v"), expression=o.this)])
        m = _agg(_fn("mode", exp.Case(ifs=[exp.If(this=_not_null(o.this.copy()), true=st)]), exp.true()), filt)
        return exp.Dot(this=exp.Paren(this=m), expression=_ident("v"))
    return node


def rule_exclude(node):
    """SELECT [t.]* EXCLUDE (a, b) -> a quoted regex column `(?!(?:a|b)$).+` (every column but
    those; Spark reads it so with spark.sql.parser.quotedRegexColumnNames, which the session
    sets; names are matched case-insensitively, as DuckDB's)."""
    star = None
    if isinstance(node, exp.Star) and node.args.get("except_"):
        star, table = node, None
    elif isinstance(node, exp.Column) and isinstance(node.this, exp.Star) and node.this.args.get("except_"):
        star, table = node.this, node.table
    if star is None:
        return node
    if star.args.get("replace") or star.args.get("rename"):
        raise TranslationError("SELECT * REPLACE/RENAME has no rule")
    names = [e.name for e in star.args["except_"]]
    rx = "(?!(?:" + "|".join(re.escape(n) for n in names) + ")$).+"
    return exp.Column(this=exp.Identifier(this=rx, quoted=True), table=_ident(table) if table else None)


_INTS = {exp.DataType.Type.INT, exp.DataType.Type.BIGINT, exp.DataType.Type.SMALLINT,
         exp.DataType.Type.TINYINT, exp.DataType.Type.INT128, exp.DataType.Type.UBIGINT,
         exp.DataType.Type.UINT}
_FLOATS = {exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT, exp.DataType.Type.DECIMAL}


def _floaty(e) -> bool:
    """Whether an expression is (by its form) a DOUBLE/DECIMAL in DuckDB: a decimal literal, a
    cast to one, a '/' or a statistical aggregate somewhere in its arithmetic."""
    if isinstance(e, exp.Literal):
        return not e.is_string and not re.fullmatch(r"-?\d+", e.this)
    if isinstance(e, (exp.Cast, exp.TryCast)):
        return e.to.this in _FLOATS
    if isinstance(e, exp.Div):
        return True
    if isinstance(e, (exp.Avg, exp.Stddev, exp.StddevSamp, exp.StddevPop, exp.Variance, exp.PercentileCont,
                      exp.Median, exp.Ln, exp.Log, exp.Sqrt, exp.Exp, exp.Pow)):
        return True
    if isinstance(e, (exp.Paren, exp.Neg)):
        return _floaty(e.this)
    if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Mod, exp.IntDiv)):
        return _floaty(e.this) or _floaty(e.expression)
    if isinstance(e, exp.Case):
        return any(_floaty(i.args["true"]) for i in e.args["ifs"]) or _floaty(e.args.get("default"))
    if isinstance(e, exp.Coalesce):
        return _floaty(e.this) or any(_floaty(x) for x in e.expressions)
    if _call_name(e) == "percentile":
        return True
    return False


def rule_int_division(node):
    """a // b: integer division (truncating) for integers in both, but DuckDB divides DOUBLE /
    DECIMAL operands exactly ('//' is '/' there): -> a DIV b, or a / b when an operand is
    (by its form, _floaty) a DOUBLE or DECIMAL."""
    if isinstance(node, exp.IntDiv) and (_floaty(node.this) or _floaty(node.expression)):
        return exp.Div(this=node.this, expression=node.expression)
    return node


def rule_casts(node):
    """Casts Spark reads differently:
      x::HUGEINT                    -> DECIMAL(38, 0) (Spark has no 128-bit integer; the views'
                                       packed sort keys stay below 10^38)
      x::JSON                       -> x (the text; Spark keeps JSON as strings)
      text::T[] (JSON or list text) -> from_json(text, 'array<T>') (JSON -> string)
      double::INTEGER/BIGINT        -> CAST(round(x) ...): DuckDB rounds (half away from zero),
                                       Spark truncates; applied where x is _floaty."""
    if isinstance(node, exp.DataType) and node.this == exp.DataType.Type.INT128:
        return exp.DataType.build("DECIMAL(38, 0)")
    if not isinstance(node, (exp.Cast, exp.TryCast)):
        return node
    to = node.to
    if to.this == exp.DataType.Type.JSON:
        return node.this
    if to.this == exp.DataType.Type.ARRAY and not isinstance(node.this, exp.Array):
        t = to.copy()
        for d in t.find_all(exp.DataType):
            if d.this == exp.DataType.Type.JSON:
                d.set("this", exp.DataType.Type.TEXT)
        return _fn("from_json", node.this, exp.Literal.string(t.sql("spark").lower()))
    if to.this in _INTS and _floaty(node.this):
        node.set("this", exp.Round(this=node.this))
    return node


def rule_json_type(node):
    """json_type(j, path) -> 'ARRAY' / 'OBJECT' / 'VALUE' by the first character of Spark's
    get_json_object(j, path) (NULL where the path is absent)."""
    if isinstance(node, exp.JSONType):
        path = node.expression
        v = _fn("ltrim", _fn("get_json_object", node.this, path) if path is not None else node.this)
        return exp.Case(ifs=[
            exp.If(this=exp.Is(this=v.copy(), expression=exp.Null()), true=exp.Null()),
            exp.If(this=_fn("startswith", v.copy(), exp.Literal.string("[")), true=exp.Literal.string("ARRAY")),
            exp.If(this=_fn("startswith", v.copy(), exp.Literal.string("{")), true=exp.Literal.string("OBJECT"))],
            default=exp.Literal.string("VALUE"))
    return node


def rule_json_paths(node):
    """json_extract(j, [path, ...]) (one parse, a list of values) -> array(get_json_object(j,
    path), ...): Spark's get_json_object takes one path."""
    if isinstance(node, exp.JSONExtract) and isinstance(node.expression, exp.Array):
        duck = _DuckDB()
        return exp.Array(expressions=[exp.JSONExtract(this=node.this.copy(), expression=duck.to_json_path(p.copy()))
                                      for p in node.expression.expressions])
    return node


def _seq(start, end, step=None) -> exp.Expression:
    """range(start, end[, step]) as a Spark array: sequence(start, end - 1) when not empty."""
    start = exp.cast(start, "BIGINT")
    end = exp.cast(end, "BIGINT")
    if step is not None and _as_int(step) not in (None, 1):
        raise TranslationError("range() with a step has no rule")
    return exp.Case(ifs=[exp.If(this=exp.GT(this=end, expression=start),
                                true=_fn("sequence", start.copy(), exp.Sub(this=end.copy(), expression=exp.Literal.number(1))))],
                    default=exp.cast(exp.Array(expressions=[]), "ARRAY<BIGINT>"))


def rule_range(node):
    """range(a, b) (end exclusive, empty when b <= a): as a list -> sequence(a, b - 1) or an
    empty array; as a table function (column `range`) -> (SELECT explode(...) AS range)."""
    if isinstance(node, exp.GenerateSeries) and node.args.get("is_end_exclusive"):
        seq = _seq(node.args["start"], node.args["end"], node.args.get("step"))
        if isinstance(node.parent, exp.Table):
            return exp.Subquery(this=exp.select(exp.alias_(exp.Explode(this=seq), "range")))
        return seq
    if isinstance(node, exp.Table) and isinstance(node.this, exp.Subquery):
        sub = node.this
        sub.set("alias", node.args.get("alias"))
        return sub
    return node


def rule_lateral_values(node):
    """LATERAL (VALUES (x.a, 1), (x.b, 0)) AS e(c1, c2) (rows computed from the outer row; Spark's
    inline tables must be constant) -> LATERAL (SELECT inline(array(named_struct('c1', x.a,
    'c2', 1), ...))) AS e(c1, c2)."""
    if not (isinstance(node, exp.Lateral) and isinstance(node.this, exp.Subquery)
            and isinstance(node.this.this, exp.Values)):
        return node
    alias = node.args.get("alias")
    cols = [c.name for c in alias.columns] if alias is not None else []
    rows = node.this.this.expressions
    if not cols or any(len(r.expressions) != len(cols) for r in rows):
        raise TranslationError("LATERAL (VALUES ...) needs a column list of the row's width")
    structs = [exp.Struct(expressions=[exp.PropertyEQ(this=_ident(c), expression=v)
                                       for c, v in zip(cols, r.expressions)]) for r in rows]
    node.set("this", exp.Subquery(this=exp.select(_fn("inline", exp.Array(expressions=structs)))))
    return node


def rule_cte_materialized(node):
    """WITH x AS MATERIALIZED (...) -> WITH x AS (...): a DuckDB planning hint, no meaning."""
    if isinstance(node, exp.CTE) and node.args.get("materialized") is not None:
        node.set("materialized", None)
    return node


def rule_row_number_unordered(node):
    """row_number() OVER () (a row identifier: DuckDB numbers in scan order) -> OVER (ORDER BY
    struct(*)): Spark requires an order, and a CTE read twice must number its rows the same way
    both times (monotonically_increasing_id() would not, after a shuffle); rows equal in every
    column are interchangeable, so the numbering is deterministic where it matters."""
    if isinstance(node, exp.Window) and isinstance(node.this, exp.RowNumber) and not node.args.get("order") \
            and not node.args.get("partition_by"):
        node.set("order", exp.Order(expressions=[exp.Ordered(this=_fn("struct", exp.Star()))]))
    return node


def _conjuncts(e) -> list[exp.Expression]:
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    if isinstance(e, exp.Paren) and isinstance(e.this, exp.And):
        return _conjuncts(e.this)
    return [e]


def _tables(e) -> set[str]:
    return {c.table for c in e.find_all(exp.Column)}


def _unqualify(e, alias: str) -> exp.Expression:
    e = e.copy()
    for c in e.find_all(exp.Column):
        if c.table == alias:
            c.set("table", None)
    return e


_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}


def rule_asof(node):
    """X ASOF [LEFT] JOIN B b ON <equalities b.k = x.k> AND <b-only tests> AND b.t <op> x.v
    (op one of <=, <, >=, >): for each X row the one B row with the nearest t on that side.
    -> X [LEFT] JOIN (SELECT *, lead(t) (or lag(t)) OVER (PARTITION BY the b.k ORDER BY t) AS
    __asof_next FROM B WHERE <b-only tests> AND t IS NOT NULL) b ON <equalities> AND b.t <op> x.v
    AND (__asof_next IS NULL OR NOT (__asof_next <op> x.v)): each B row stands for the stretch up
    to the next one's t, so exactly one matches (of B rows with equal t, the last in the order)."""
    if not (isinstance(node, exp.Join) and str(node.args.get("method") or "").upper() == "ASOF"):
        return node
    b = node.this
    alias = b.alias_or_name
    keys, only_b, other, ineq = [], [], [], None
    for c in _conjuncts(node.args["on"]):
        ts = _tables(c)
        if ts == {alias}:
            only_b.append(c)
            continue
        if isinstance(c, exp.EQ):
            l, r = c.this, c.expression
            if _tables(l) == {alias} and alias not in _tables(r):
                keys.append(l)
                other.append(c)
                continue
            if _tables(r) == {alias} and alias not in _tables(l):
                keys.append(r)
                other.append(c)
                continue
        if type(c) in _FLIP and ineq is None:
            l, r = c.this, c.expression
            if _tables(l) == {alias} and alias not in _tables(r):
                ineq = (type(c), l, r)
                continue
            if _tables(r) == {alias} and alias not in _tables(l):
                ineq = (_FLIP[type(c)], r, l)
                continue
        if alias not in ts:
            other.append(c)
            continue
        raise TranslationError(f"ASOF join condition {c.sql('duckdb')} has no rule")
    if ineq is None:
        raise TranslationError("ASOF join without an inequality")
    op, bt, xv = ineq
    t_inner = _unqualify(bt, alias)
    win = exp.Window(this=_fn("lead" if op in (exp.LTE, exp.LT) else "lag", t_inner),
                     partition_by=[_unqualify(k, alias) for k in keys],
                     order=exp.Order(expressions=[exp.Ordered(this=t_inner.copy())]))
    src = b.copy()
    if isinstance(src, exp.Table):
        src.set("alias", None)
    else:
        src.set("alias", exp.TableAlias(this=_ident("__asof_b")))
    inner = exp.select(exp.Star(), exp.alias_(win, "__asof_next")).from_(src)
    for c in only_b + [_not_null(bt.copy())]:
        inner = inner.where(_unqualify(c, alias), copy=False)
    nxt = exp.column("__asof_next", table=alias)
    cond = exp.and_(*other, op(this=bt.copy(), expression=xv.copy()),
                    exp.Paren(this=exp.or_(exp.Is(this=nxt, expression=exp.Null()),
                                           exp.Not(this=op(this=nxt.copy(), expression=xv.copy())))))
    side = node.args.get("side")
    return exp.Join(this=exp.Subquery(this=inner, alias=exp.TableAlias(this=_ident(alias))),
                    on=cond, side=side)


# ------------------------------------------------------------------------------------ public API

class _DuckDB(sqlglot.dialects.DuckDB):
    """DuckDB as the views write it: len(x) is only used on lists (length(s) on text). List
    indexes are kept as written (INDEX_OFFSET 0: sqlglot would otherwise shift the ones it can
    type as integers to 0-based, and leave the others), rule_list_index reads them 1-based."""

    INDEX_OFFSET = 0

    class Parser(sqlglot.dialects.DuckDB.Parser):
        FUNCTIONS = {**sqlglot.dialects.DuckDB.Parser.FUNCTIONS,
                     "LEN": lambda args: exp.ArraySize(this=args[0])}


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
    x = _wrap(x)
    a = _fn("abs", x.copy())
    d = digits if isinstance(digits, exp.Expression) else exp.Literal.number(digits)
    s = (exp.Literal.number(10 ** digits) if isinstance(digits, int)
         else _fn("power", exp.Literal.number(10), digits.copy()))
    ah, sh = (sqlglot.parse_one(_SPLIT.format(v="__a"), read="duckdb"),
              sqlglot.parse_one(_SPLIT.format(v="__s"), read="duckdb"))
    # E = ((Ah*Sh - P) + Ah*Sl + Al*Sh) + Al*Sl, with Al = A - Ah, Sl = S - Sh
    e = sqlglot.parse_one("(((__ah * __sh - __p) + __ah * (__s - __sh) + (__a - __ah) * __sh)"
                          " + (__a - __ah) * (__s - __sh))", read="duckdb")
    p = sqlglot.parse_one("__a * __s", read="duckdb")
    e = _substitute(e, {"__ah": ah, "__sh": sh, "__p": p})  # the macro inliner's substitution
    tree = _substitute(sqlglot.parse_one(_ROUND_TEMPLATE, read="duckdb"), {"__e": e, "__p": p})
    rounded = _substitute(tree, {"__x": x, "__a": a, "__s": s, "__d": d})
    negative = exp.LT(this=x.copy(), expression=exp.Literal.number(0))
    return _fn("coalesce", exp.Case().when(negative, exp.Neg(this=exp.Paren(this=rounded.copy())))  # -0.0: '-0'
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
            digits = exp.Sub(this=exp.Literal.number(sig - 1), expression=_fn(
                "floor", _fn("log10", _fn("abs", args[k].copy()))))
            x = exp.Case().when(exp.EQ(this=args[k].copy(), expression=exp.Literal.number(0)),
                                args[k].copy()).else_(_c_rounded(args[k], digits))
            java = _fn("format_string", exp.Literal.string(spec), x)
            trimmed = _fn("regexp_replace", java, exp.Literal.string("([.][0-9]*?)0+(e|$)"),
                          exp.Literal.string("$1$2"))
            args[k] = _fn("regexp_replace", trimmed, exp.Literal.string("[.](e|$)"), exp.Literal.string("$1"))
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
    return _fn("printf", exp.Literal.string("".join(out)), *args)


_RULES = (rule_asof, rule_range, rule_list_index, rule_array_size, rule_lambda_index, rule_list_functions,
          rule_regexp, rule_arg_extreme, rule_quantile, rule_ordered_aggregates, rule_exclude,
          rule_int_division, rule_casts, rule_json_type, rule_json_paths, rule_row_number_unordered, rule_cte_materialized,
          rule_lateral_values, rule_printf)


def _post_order(tree: exp.Expression, rule) -> exp.Expression:
    """Apply a rule to every node, children before their parent (a rewritten node's own
    children have been rewritten already: x[1][2], nested aggregates)."""
    for node in reversed(list(tree.dfs())):
        new = rule(node)
        if new is not node:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree


def _apply_rules(tree: exp.Expression) -> exp.Expression:
    for rule in _RULES:
        tree = _post_order(tree, rule)
    return tree


def translate_tree(tree: exp.Expression, params: dict | None = None) -> str:
    tree = _inline_macros(tree)
    tree = _getvariables(tree, params)
    tree = _apply_rules(tree)
    return tree.sql(dialect="spark")


@lru_cache(maxsize=64)
def _view_tree(name: str) -> exp.Expression:
    v = next(v for v in V.all_views() if v.name == name)
    st = sqlglot.parse_one(V.expand(v.definition), read=_DuckDB)  # each parameter with its default
    if not isinstance(st, exp.Create):
        raise TranslationError(f"{v.path}: not one CREATE VIEW statement")
    return st.expression


def spark_view(name: str, params: dict | None = None) -> str:
    """One view's SELECT in Spark SQL."""
    try:
        return translate_tree(_view_tree(name).copy(), params)
    except TranslationError as e:
        raise TranslationError(f"sql/{name}.sql: {e}") from None


def spark_views(params: dict | None = None) -> list[tuple[str, str]]:
    """(view name, Spark SQL SELECT) of every view, each after the views it uses."""
    return [(n, spark_view(n, params)) for n in V.creation_order()]


def to_spark(query: str, params: dict | None = None) -> str:
    """A query written in DuckDB's dialect (it may use the views, the tables and the library's
    macros) in Spark SQL."""
    try:
        trees = sqlglot.parse(query, read=_DuckDB)
    except sqlglot.errors.ParseError as e:
        raise TranslationError(f"cannot parse the query: {str(e).splitlines()[0]}") from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise TranslationError(f"one statement expected, {len(trees)} given")
    return translate_tree(trees[0], params)
