"""The ASOF join in Spark SQL (a rule of translate.py): a join on the nearest row, as a join on
a range between each row of the right side and the next."""

from __future__ import annotations


from sqlglot import exp

from .nodes import TranslationError, fn, identifier, not_null


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
    win = exp.Window(this=fn("lead" if op in (exp.LTE, exp.LT) else "lag", t_inner),
                     partition_by=[_unqualify(k, alias) for k in keys],
                     order=exp.Order(expressions=[exp.Ordered(this=t_inner.copy())]))
    src = b.copy()
    if isinstance(src, exp.Table):
        src.set("alias", None)
    else:
        src.set("alias", exp.TableAlias(this=identifier("__asof_b")))
    inner = exp.select(exp.Star(), exp.alias_(win, "__asof_next")).from_(src)
    for c in only_b + [not_null(bt.copy())]:
        inner = inner.where(_unqualify(c, alias), copy=False)
    nxt = exp.column("__asof_next", table=alias)
    cond = exp.and_(*other, op(this=bt.copy(), expression=xv.copy()),
                    exp.Paren(this=exp.or_(exp.Is(this=nxt, expression=exp.Null()),
                                           exp.Not(this=op(this=nxt.copy(), expression=xv.copy())))))
    side = node.args.get("side")
    return exp.Join(this=exp.Subquery(this=inner, alias=exp.TableAlias(this=identifier(alias))),
                    on=cond, side=side)
