"""`tracekit views --doc` / `--sql` (issue 23): a view's header as written (indentation kept)
and its SQL; lib/NAME likewise."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tracekit import views
from tracekit.cli import main


def run(*args, input=None):
    r = CliRunner().invoke(main, [str(a) for a in args], input=input, catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


# -- views --doc / --sql -------------------------------------------------------------------------

def _parts(path):
    lines = path.read_text().split("\n")
    n = next(i for i, line in enumerate(lines) if not line.startswith("--"))
    return lines[:n], "\n".join(lines[n:]).strip()


@pytest.mark.parametrize("name", ["hotspots", "idle_gaps", "lib/host_calls", "lib/intervals"])
def test_views_doc_prints_the_header_as_written_and_the_sql(name):
    path = views.sql_dir() / f"{name}.sql"
    header, statement = _parts(path)
    code, out, err = run("views", "--doc", name)
    assert code == 0, err
    doc = [line[3:] if line.startswith("-- ") else line[2:] for line in header]
    assert out == "\n".join(doc).rstrip() + "\n\n" + statement + "\n"
    assert any(line.startswith("  ") for line in doc)  # indentation is kept
    code, out, err = run("views", "--sql", name)
    assert code == 0 and out == statement + "\n"
    assert out.startswith("CREATE OR REPLACE " + ("MACRO" if name.startswith("lib/") else f"VIEW {name}"))


def test_views_doc_of_hotspots_reads_like_its_file():
    out = run("views", "--doc", "hotspots")[1]
    assert "\n  total_ns  = sum(end_ns - start_ns) of the kernels with this name in this source\n" in out
    assert "\n  source_id   INTEGER  the source (sources.source_id)\n" in out
    assert "\nCREATE OR REPLACE VIEW hotspots AS\n" in out
    code, _, err = run("views", "--doc", "hotspot")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no view named 'hotspot'" in err
