"""One definition per concept: every analysis rule lives in sql/ (issue 46).

* no SQL statement text in the Python of tracekit/ outside the loader and a short allow-list of
  the places whose SQL is not an analysis rule (the store's DDL and inserts, the nsys adapter
  reading the foreign SQLite file, the Spark translator); analysis statements go to sql/*.sql
  (views), sql/lib/*.sql (macros), sql/queries/*.sql (the statements a Python module runs) or
  sql/diagnose/*.sql;
* no module of tracekit/ over 500 lines;
* each view, macro and named statement defined once, and every named statement used.

ALLOWED_TEMPORARILY holds the files that other work still moves or splits; the entries go as
that work lands.
"""

from __future__ import annotations

import ast
import re
from fnmatch import fnmatch
from pathlib import Path

import pytest

from tracekit import views

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "tracekit"
SQL = ROOT / "sql"

#: (file pattern under tracekit/ (fnmatch), why SQL text may live there)
ALLOWED = [
    ("views.py", "the loader: makes the files' statements TEMP or persists them"),
    ("schema*.py", "the store's DDL, written from the schema's table definitions"),
    ("parallel.py", "merges worker stores into the store: INSERT ... SELECT of whole tables"),
    ("store/*", "the store's machinery: its DDL and bookkeeping (tracekit_meta), catalog checks, "
                "the views' persisted and kept copies, Parquet COPY (a GPU row's launch process, "
                "the one rule there, is sql/queries/convert.sql)"),
    ("fingerprint.py", "reads the store's own bookkeeping (tracekit_meta, sources)"),
    ("adapters/nsys/*", "reads the foreign Nsight Systems SQLite file"),
    ("spark/*", "translates the views to Spark SQL and runs them there"),
]

#: files still being moved or split by other work (each entry goes when that work lands)
ALLOWED_TEMPORARILY: list[tuple[str, str]] = []

#: modules over MAX_LINES that other work is splitting (each entry goes when that work lands)
LONG_TEMPORARILY: list[tuple[str, str]] = []

MAX_LINES = 500

# Uppercase keywords, as the project writes SQL: a query (SELECT ... FROM) anywhere in a string,
# or a string that starts a statement which writes or defines something.
_QUERY = re.compile(r"\bSELECT\b[\s\S]*\bFROM\b")
_STATEMENT = re.compile(r"^\s*(CREATE\s|INSERT\s+INTO\b|COPY\s+[(\"\w{]|DELETE\s+FROM\b|UPDATE\s+\w+\s+SET\b"
                        r"|WITH\s+\w+\s+AS\s*\()")


def _allowed(rel: str, entries) -> str | None:
    return next((why for f, why in entries if fnmatch(rel, f)), None)


def sql_strings(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string constant or f-string (its {…} parts as '{}') of ``source`` that
    holds SQL statement text; docstrings are documentation and left out."""
    tree = ast.parse(source)
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    out = []
    for node in ast.walk(tree):
        if id(node) in docs or id(node) in inner:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if _QUERY.search(text) or _STATEMENT.search(text):
            out.append((node.lineno, text))
    return sorted(out)


def _modules():
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def test_detector_finds_sql_and_ignores_prose():
    """The detector itself, on the shapes of SQL text the package had in Python (synthetic:
    a check of the check)."""
    src = '''
"""Module doc: SELECT x FROM y is prose here."""
def f(sid, t):
    """Doc: SELECT a FROM b."""
    a = con.execute(f"SELECT cause, dur_ns FROM idle_gaps WHERE source_id = {sid}")
    b = "CREATE OR REPLACE TEMP TABLE tk_src AS SELECT * FROM tk_src_arrow"
    c = f"INSERT INTO main.{t} SELECT 1"
    d = f"COPY {t} TO 'x.parquet'"
    e = """
        WITH q AS (SELECT 1) SELECT * FROM q"""
    ok = ("copy kind", "select the rows from the store", "Copy direction", "SELECT only")
'''
    found = sql_strings(src)
    assert [line for line, _ in found] == [5, 6, 7, 8, 9]


def test_no_sql_in_python_outside_the_allow_list():
    bad = []
    for p in _modules():
        rel = p.relative_to(PKG).as_posix()
        if _allowed(rel, ALLOWED) or _allowed(rel, ALLOWED_TEMPORARILY):
            continue
        for line, text in sql_strings(p.read_text()):
            bad.append(f"tracekit/{rel}:{line}: {' '.join(text.split())[:90]}")
    assert not bad, ("SQL text in Python; move it to sql/ (a view, a sql/lib macro, or a named "
                     "statement of sql/queries/<module>.sql read with views.query):\n" + "\n".join(bad))


def test_allow_list_entries_are_needed():
    """A permanent entry whose files hold no SQL any more is removed (the list stays short)."""
    stale = []
    for f, _why in ALLOWED:
        files = [p for p in _modules() if fnmatch(p.relative_to(PKG).as_posix(), f)]
        if not any(sql_strings(p.read_text()) for p in files):
            stale.append(f)
    assert not stale, f"ALLOWED entries without SQL text: {stale}"


def test_no_module_over_500_lines():
    long = []
    for p in _modules():
        rel = p.relative_to(PKG).as_posix()
        n = len(p.read_text().splitlines())
        if n > MAX_LINES and not _allowed(rel, LONG_TEMPORARILY):
            long.append(f"tracekit/{rel}: {n} lines")
    assert not long, f"modules over {MAX_LINES} lines (split them by concern):\n" + "\n".join(long)


_DEFINES = re.compile(r"CREATE\s+OR\s+REPLACE\s+(VIEW|MACRO)\s+([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)


def test_each_view_and_macro_defined_once():
    """Every view and macro is created by exactly one statement in all of sql/, a view in its
    own file named after it; named statements (sql/queries, sql/diagnose) define none."""
    seen: dict[str, list[str]] = {}
    for p in sorted(SQL.rglob("*.sql")):
        body = "\n".join(line for line in p.read_text().splitlines() if not line.lstrip().startswith("--"))
        for kind, name in _DEFINES.findall(body):
            seen.setdefault(name.lower(), []).append(p.relative_to(SQL).as_posix())
            if kind.upper() == "VIEW":
                assert p.stem == name, f"sql/{p.relative_to(SQL)} creates view {name}, not {p.stem}"
            assert p.parent.name not in ("queries", "diagnose"), (
                f"sql/{p.relative_to(SQL)} creates {kind} {name}: views and macros have their own files")
    twice = {n: f for n, f in seen.items() if len(f) > 1}
    assert not twice, f"defined more than once: {twice}"
    stems = [p.stem for p in SQL.rglob("*.sql") if p.parent.name not in ("lib", "queries", "diagnose")]
    assert len(stems) == len(set(stems)), "two view files of the same name in different folders"
    assert {v.name for v in views.all_views()} == set(stems)


def _calls_of(fn: str) -> tuple[set[str], set[tuple[str, str]]]:
    """Over tracekit/: the modules read whole (``queries("m")``) and the (module, name) pairs
    named (``query("m", "name")``, or the name as a string anywhere: helpers pass it on)."""
    whole, strings = set(), set()
    for p in _modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == fn \
                    and node.args and isinstance(node.args[0], ast.Constant):
                whole.add(node.args[0].value)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.add(node.value)
    return whole, strings


@pytest.mark.parametrize("path", sorted((SQL / "queries").glob("*.sql")), ids=lambda p: p.stem)
def test_named_statements_documented_and_used(path):
    """Each statement of sql/queries/ has a header line saying what it returns, and Python
    uses it (no dead copy of a rule)."""
    stmts = views.queries(path.stem)
    assert stmts, f"{path}: no statements"
    whole, strings = _calls_of("queries")
    if path.stem in whole:
        return
    assert path.stem in strings, f"{path}: no Python module reads it"
    unused = [n for n in stmts if n not in strings]
    assert not unused, f"{path}: statements no Python module names: {unused}"
