"""The reference pages of docs/ are generated (tracekit/docgen.py: views.md from the SQL headers,
cli.md from the click commands) and checked in; they must be what the generator writes now."""

from __future__ import annotations

import re

from conftest import REPO


def test_generated_docs_are_current():
    from tracekit import docgen, views

    for name, make in docgen.PAGES.items():
        want = make()
        got = (REPO / "docs" / name).read_text()
        assert got == want, f"docs/{name} is stale: run `python -m tracekit.docgen`"
    # views.md: every view once, with its header's column list; no table named as a view
    text = (REPO / "docs" / "views.md").read_text()
    names = [v.name for v in views.all_views()]
    assert re.findall(r"^## (\w+)$", text, re.MULTILINE) == names
    assert len(names) >= 45 and "## memory_events" not in text  # memory_events is a table
    assert all(f"\n{v.header.rstrip()}\n" in text for v in views.all_views())


def test_docgen_check_mode(tmp_path, monkeypatch):
    """--check writes nothing and exits 1 where a page differs."""
    from tracekit import docgen

    (tmp_path / "views.md").write_text("stale\n")
    (tmp_path / "cli.md").write_text(docgen.cli_markdown())
    monkeypatch.setattr(docgen, "DOCS", tmp_path)
    assert docgen.main(["--check"]) == 1 and (tmp_path / "views.md").read_text() == "stale\n"
    assert docgen.main([]) == 0 and docgen.main(["--check"]) == 0
