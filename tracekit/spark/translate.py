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

from functools import lru_cache

import sqlglot
from sqlglot import exp

from tracekit import views as V

from .asof import rule_asof
from .macros import getvariables, inline_macros, macros
from .nodes import DuckDBViews, TranslationError
from .printf import rule_printf
from .rules import (rule_arg_extreme, rule_array_size, rule_casts, rule_cte_materialized, rule_exclude,
                    rule_int_division, rule_json_paths, rule_json_type, rule_lambda_index, rule_lateral_values,
                    rule_list_functions, rule_list_index, rule_ordered_aggregates, rule_quantile, rule_range,
                    rule_regexp, rule_row_number_unordered)

__all__ = ["TranslationError", "macros", "spark_view", "spark_views", "to_spark", "translate_tree"]


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
    tree = inline_macros(tree)
    tree = getvariables(tree, params)
    tree = _apply_rules(tree)
    return tree.sql(dialect="spark")


@lru_cache(maxsize=64)
def _view_tree(name: str) -> exp.Expression:
    v = next(v for v in V.all_views() if v.name == name)
    st = sqlglot.parse_one(V.expand(v.definition), read=DuckDBViews)  # each parameter with its default
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
        trees = sqlglot.parse(query, read=DuckDBViews)
    except sqlglot.errors.ParseError as e:
        raise TranslationError(f"cannot parse the query: {str(e).splitlines()[0]}") from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise TranslationError(f"one statement expected, {len(trees)} given")
    return translate_tree(trees[0], params)
