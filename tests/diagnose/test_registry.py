"""The diagnose rules as SQL plus a registry: every statement of sql/diagnose/ documented and
used, every rule of `registry.RULES` well formed, and `statement`'s filling-in of parameters."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tracekit import views
from tracekit.diagnose import CODES, REMEDIES, RULES
from tracekit.diagnose.registry import SCOPES
from tracekit.diagnose.statements import Sql, statement

ROOT = Path(__file__).resolve().parents[2]
DIAG_SQL = ROOT / "sql" / "diagnose"
DIAG_PY = ROOT / "tracekit" / "diagnose"
_PARAM = re.compile(r"\$([a-z_][a-z0-9_]*)")


def _string_constants() -> set[str]:
    out = set()
    for p in DIAG_PY.glob("*.py"):
        out |= {n.value for n in ast.walk(ast.parse(p.read_text()))
                if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return out


@pytest.mark.parametrize("path", sorted(DIAG_SQL.glob("*.sql")), ids=lambda p: p.stem)
def test_statements_documented_and_used(path):
    """Each statement says what it returns, each $parameter it reads is named in its header or
    the file's, and a module of tracekit/diagnose/ names the file and the statement."""
    stmts = views.statements(path)
    assert stmts, f"{path}: no statements"
    text = path.read_text()
    file_header = text.split("\n\n", 1)[0]
    for name, sql in stmts.items():
        head = re.search(rf"^-- {name}: .*?(?=^[^-])", text, re.MULTILINE | re.DOTALL).group(0)
        for p in set(_PARAM.findall(sql)):
            assert f"${p}" in head or f"${p}" in file_header, f"{path}: {name} reads ${p}, not documented"
    names = _string_constants()
    assert path.stem in names, f"{path}: no module of tracekit/diagnose names it"
    unused = [n for n in stmts if n not in names]
    assert not unused, f"{path}: statements no module of tracekit/diagnose names: {unused}"


def _named_in_code() -> set[str]:
    """'<file>.<name>' of each statement the modules of tracekit/diagnose run: the constant
    arguments of statement(file, name), Rules.rows(file, name), Rules.evidence(view, file, name)."""
    out = set()
    for p in DIAG_PY.glob("*.py"):
        for n in ast.walk(ast.parse(p.read_text())):
            if not isinstance(n, ast.Call):
                continue
            fn = getattr(n.func, "id", getattr(n.func, "attr", None))
            args = n.args[1:] if fn == "evidence" and len(n.args) == 3 else n.args
            if fn in ("statement", "rows", "evidence") and len(args) >= 2 \
                    and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args[:2]):
                out.add(f"{args[0].value}.{args[1].value}")
    return out


def test_registry_rows():
    """Every rule: known codes, statements that exist, a known place to run, a judge; the table
    names exactly the statements the code runs, and every statement of sql/diagnose/."""
    places = {"steady", "phase", "source", "ncu", "jobs"}
    declared = set(SCOPES)
    for rule in RULES:
        assert rule.codes and set(rule.codes) <= set(CODES) and len(rule.titles) == len(rule.codes), rule
        assert set(rule.runs_on.split()) <= places, rule
        assert callable(rule.judge) and rule.remedy, rule
        declared |= set(rule.measure) | set(rule.evidence)
    every = {f"{p.stem}.{n}" for p in DIAG_SQL.glob("*.sql") for n in views.statements(p)}
    assert declared <= every, f"the registry names statements that do not exist: {declared - every}"
    assert every <= declared, f"statements of sql/diagnose/ no rule names: {every - declared}"
    assert _named_in_code() == declared
    # every finding code but no_gpu_data (the entry point's own note) has a rule, and a remedy
    assert {c for r in RULES for c in r.codes} == set(CODES) - {"no_gpu_data"}
    assert set(CODES) - {"no_gpu_data"} <= {k.split(":")[0] for k in REMEDIES}


def test_statement_fills_parameters():
    """Literals for values, fragments as written, a line naming a None value left out, and a
    missing value named (synthetic values: the filling-in itself)."""
    q = statement("scopes", "phase_scopes", sid=3, phase="it's", dev=None)
    assert " ".join(q.split()) == "SELECT * FROM phase_idle WHERE source_id = 3 AND phase = 'it''s' " \
                                  "ORDER BY span_ns DESC, phase"
    cond = statement("bounds", "ncu_results", ids=Sql("(1, 2), (1, 5)"))
    assert cond == "(source_id, id) IN ((1, 2), (1, 5))"
    assert "WHERE (source_id, id) IN ((1, 2), (1, 5)) ORDER BY" in " ".join(
        statement("bounds", "kernel_bounds", kernels=Sql(cond)).split())
    with pytest.raises(KeyError, match=r"needs \$dev"):
        statement("scopes", "launch_latency", sid=1)


def test_diagnose_statements_are_not_views():
    """sql/diagnose/ holds named statements, never views: docgen, `tracekit views` and the Spark
    translation see none of them."""
    assert all(v.path.parent.name != "diagnose" for v in views.all_views())
