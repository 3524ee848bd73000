"""The dialect rules of the Spark translation (translate.py): each one DuckDB construct the views
use that Spark lacks or reads differently, rewritten to Spark's equivalent on the AST; the ASOF
join and printf have modules of their own (asof.py, printf.py)."""

from __future__ import annotations

import re

from sqlglot import exp

from .macros import call_name, fresh_ids, wrap
from .nodes import DuckDBViews, TranslationError, as_int, fn, identifier, not_null


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
            b = fn("array_size", node.this.copy())
        n = exp.Sub(this=wrap(b), expression=wrap(a)) if as_int(a) != 1 else b
        if as_int(a) != 1:
            n = exp.Add(this=n, expression=exp.Literal.number(1))
        return fn("slice", node.this, exp.cast(a, "INT"), fn("greatest", exp.cast(n, "INT"), exp.Literal.number(0)))
    if isinstance(idx, exp.Literal) and idx.is_string:
        return node  # a struct field or map key
    k = as_int(idx)
    if k is not None:
        return exp.Null() if k == 0 else fn("element_at", node.this, exp.Literal.number(k))
    return fn("element_at", node.this, fn("nullif", exp.cast(idx, "INT"), exp.Literal.number(0)))


def rule_array_size(node):
    """len(list) / array_length(list) -> array_size (NULL for NULL; Spark's size() gives -1)."""
    if isinstance(node, exp.ArraySize):
        return fn("array_size", node.this)
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
    name = call_name(node)
    if name == "list_reduce":
        lst, f, *init = node.expressions
        if not init:
            raise TranslationError("list_reduce without an initial value")
        return fn("aggregate", lst, init[0], f)
    if name == "list_sum":
        v = f"v__{next(fresh_ids)}"
        acc = f"acc__{next(fresh_ids)}"
        lam_f = exp.Lambda(this=exp.Not(this=exp.Is(this=exp.to_identifier(v), expression=exp.Null())),
                           expressions=[exp.to_identifier(v)])
        add = exp.Add(this=fn("coalesce", exp.to_identifier(acc), exp.cast(exp.Literal.number(0), "DOUBLE")),
                      expression=exp.to_identifier(v))
        lam = exp.Lambda(this=add, expressions=[exp.to_identifier(acc), exp.to_identifier(v)])
        return fn("aggregate", fn("filter", node.expressions[0], lam_f), exp.cast(exp.Null(), "DOUBLE"), lam)
    if isinstance(node, exp.Flatten):
        v = f"v__{next(fresh_ids)}"
        lam_f = exp.Lambda(this=exp.Not(this=exp.Is(this=exp.to_identifier(v), expression=exp.Null())),
                           expressions=[exp.to_identifier(v)])
        return fn("flatten", fn("filter", node.this, lam_f))
    if name == "suffix":
        return fn("endswith", *node.expressions)
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
                       else fn("concat", exp.Literal.string("(?i)"), pat))
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
            return fn("regexp_replace", node.this, exp.Literal.string(_java_regex(pat.this)), exp.Literal.string(r))
        r = re.sub(r"\$(\d)", lambda g: "$" + str(int(g.group(1)) + 1), r)
        return fn("regexp_replace", node.this, exp.Literal.string("^(?s)(.*?)(?:" + _java_regex(pat.this) + ")"),
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
        return fn("max_by" if isinstance(node, exp.ArgMax) else "min_by", x, k)
    return node


def rule_quantile(node):
    """quantile_cont(x, q) / median(x) (exact, interpolated) -> percentile(x, q)."""
    if isinstance(node, exp.PercentileCont) and not isinstance(node.parent, exp.WithinGroup):
        return fn("percentile", node.this, node.expression)
    if isinstance(node, exp.Median):
        return fn("percentile", node.this, exp.Literal.number(0.5))
    if call_name(node) in ("quantile_cont", "quantile"):
        return fn("percentile", *node.expressions)
    return node


def _comparator(n_keys: int, orders: list[exp.Ordered]) -> exp.Lambda:
    """(l, r) -> -1 / 0 / 1 comparing structs l, r on fields k0.. in the ORDER BY's directions
    and NULL placement (DuckDB's default: NULLS LAST, ascending or descending)."""
    ln, rn = f"l__{next(fresh_ids)}", f"r__{next(fresh_ids)}"
    out: exp.Expression = exp.Literal.number(0)
    for i in reversed(range(n_keys)):
        o = orders[i]
        desc = bool(o.args.get("desc"))
        nf = bool(o.args.get("nulls_first"))
        lf = exp.Dot(this=identifier(ln), expression=identifier(f"k{i}"))
        rf = exp.Dot(this=identifier(rn), expression=identifier(f"k{i}"))
        lt, gt = (exp.Literal.number(1), exp.Literal.number(-1)) if desc else (exp.Literal.number(-1), exp.Literal.number(1))
        out = exp.Case(ifs=[
            exp.If(this=exp.And(this=exp.Is(this=lf.copy(), expression=exp.Null()),
                                expression=exp.Is(this=rf.copy(), expression=exp.Null())), true=out),
            exp.If(this=exp.Is(this=lf.copy(), expression=exp.Null()), true=exp.Literal.number(-1 if nf else 1)),
            exp.If(this=exp.Is(this=rf.copy(), expression=exp.Null()), true=exp.Literal.number(1 if nf else -1)),
            exp.If(this=exp.LT(this=lf.copy(), expression=rf.copy()), true=lt),
            exp.If(this=exp.GT(this=lf.copy(), expression=rf.copy()), true=gt),
        ], default=out)
    return exp.Lambda(this=out, expressions=[identifier(ln), identifier(rn)])


def _agg(call: exp.Expression, filt) -> exp.Expression:
    """An aggregate call, with the FILTER (WHERE ...) of the aggregate it replaces."""
    return exp.Filter(this=call, expression=exp.Where(this=filt.copy())) if filt is not None else call


def _ordered_values(value: exp.Expression, order: list[exp.Ordered], distinct: bool, filt=None) -> exp.Expression:
    """The group's values as an array in the ORDER BY's order (NULL values kept): sorted structs
    {k0.., v}, then their v."""
    st = exp.Struct(expressions=[exp.PropertyEQ(this=identifier(f"k{i}"), expression=o.this)
                                 for i, o in enumerate(order)]
                    + [exp.PropertyEQ(this=identifier("v"), expression=value)])
    arr = _agg(fn("collect_list", st), filt)
    if distinct:
        arr = fn("array_distinct", arr)
    s = f"s__{next(fresh_ids)}"
    return fn("transform", fn("array_sort", arr, _comparator(len(order), order)),
               exp.Lambda(this=exp.Dot(this=identifier(s), expression=identifier("v")), expressions=[identifier(s)]))


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
        vals = _ordered_values(v, order, distinct, filt) if order else _agg(fn(
            "collect_list", exp.Distinct(expressions=[v]) if distinct else v), filt)
        return exp.Case(ifs=[exp.If(this=exp.GT(this=_agg(exp.Count(this=v.copy()), filt), expression=exp.Literal.number(0)),
                                    true=fn("array_join", vals, sep))])
    if isinstance(agg, exp.Mode) and isinstance(agg.this, exp.Order):
        o = agg.this
        if any(x.args.get("desc") for x in o.expressions):
            raise TranslationError("mode(... ORDER BY ... DESC) has no rule")
        st = exp.Struct(expressions=[exp.PropertyEQ(this=identifier(f"k{i}"), expression=x.this)
                                     for i, x in enumerate(o.expressions)]
                        + [exp.PropertyEQ(this=identifier("v"), expression=o.this)])
        m = _agg(fn("mode", exp.Case(ifs=[exp.If(this=not_null(o.this.copy()), true=st)]), exp.true()), filt)
        return exp.Dot(this=exp.Paren(this=m), expression=identifier("v"))
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
    return exp.Column(this=exp.Identifier(this=rx, quoted=True), table=identifier(table) if table else None)


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
    if call_name(e) == "percentile":
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
        return fn("from_json", node.this, exp.Literal.string(t.sql("spark").lower()))
    if to.this in _INTS and _floaty(node.this):
        node.set("this", exp.Round(this=node.this))
    return node


def rule_json_type(node):
    """json_type(j, path) -> 'ARRAY' / 'OBJECT' / 'VALUE' by the first character of Spark's
    get_json_object(j, path) (NULL where the path is absent)."""
    if isinstance(node, exp.JSONType):
        path = node.expression
        v = fn("ltrim", fn("get_json_object", node.this, path) if path is not None else node.this)
        return exp.Case(ifs=[
            exp.If(this=exp.Is(this=v.copy(), expression=exp.Null()), true=exp.Null()),
            exp.If(this=fn("startswith", v.copy(), exp.Literal.string("[")), true=exp.Literal.string("ARRAY")),
            exp.If(this=fn("startswith", v.copy(), exp.Literal.string("{")), true=exp.Literal.string("OBJECT"))],
            default=exp.Literal.string("VALUE"))
    return node


def rule_json_paths(node):
    """json_extract(j, [path, ...]) (one parse, a list of values) -> array(get_json_object(j,
    path), ...): Spark's get_json_object takes one path."""
    if isinstance(node, exp.JSONExtract) and isinstance(node.expression, exp.Array):
        duck = DuckDBViews()
        return exp.Array(expressions=[exp.JSONExtract(this=node.this.copy(), expression=duck.to_json_path(p.copy()))
                                      for p in node.expression.expressions])
    return node


def _seq(start, end, step=None) -> exp.Expression:
    """range(start, end[, step]) as a Spark array: sequence(start, end - 1) when not empty."""
    start = exp.cast(start, "BIGINT")
    end = exp.cast(end, "BIGINT")
    if step is not None and as_int(step) not in (None, 1):
        raise TranslationError("range() with a step has no rule")
    return exp.Case(ifs=[exp.If(this=exp.GT(this=end, expression=start),
                                true=fn("sequence", start.copy(), exp.Sub(this=end.copy(), expression=exp.Literal.number(1))))],
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
    structs = [exp.Struct(expressions=[exp.PropertyEQ(this=identifier(c), expression=v)
                                       for c, v in zip(cols, r.expressions)]) for r in rows]
    node.set("this", exp.Subquery(this=exp.select(fn("inline", exp.Array(expressions=structs)))))
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
        node.set("order", exp.Order(expressions=[exp.Ordered(this=fn("struct", exp.Star()))]))
    return node
