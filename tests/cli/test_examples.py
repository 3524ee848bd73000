"""Every code block of README.md and docs/*.md runs, and prints what the page says it prints
(issue 45).

A page's blocks run in order, in one temporary folder per page holding `fixtures` (a link to the
bundled captures) and `.venv/bin` (a link to this interpreter's scripts, so `.venv/bin/tracekit`
and `tracekit` are the installed command): `bash` blocks in bash (`set -euo pipefail`), `python`
blocks with this interpreter, `sql` blocks by `tracekit sql` on a store of the bundled batch-1
decode. A block marked `<!-- output -->` (a `text` block) is the standard output of the last
command of the block before it, and must equal it. A block marked `<!-- no-run: REASON -->`
(installs, GPU captures, Spark clusters) is skipped with its reason. Other untyped / `text`
blocks are listings (layouts, diagrams, synopses): nothing to run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUNNABLE = {"bash", "sh", "python", "sql"}
_FENCE = re.compile(r"(?:<!--(?P<mark>(?:(?!-->).)*)-->\n)?^```(?P<lang>[a-z]*)\n(?P<body>.*?)^```$",
                    re.DOTALL | re.MULTILINE)


def blocks(page: Path) -> list[dict]:
    text = page.read_text()
    out = []
    for m in _FENCE.finditer(text):
        mark = " ".join((m["mark"] or "").split())
        out.append({"page": page, "line": text[:m.start("lang")].count("\n") + 1, "lang": m["lang"],
                    "mark": mark, "body": m["body"]})
    return out


def _cases():
    for page in PAGES:
        bs = blocks(page)
        for i, b in enumerate(bs):
            if b["lang"] not in RUNNABLE:
                continue
            nxt = bs[i + 1] if i + 1 < len(bs) else None
            want = nxt["body"] if nxt and nxt["mark"] == "output" else None
            marks = []
            if b["mark"].startswith("no-run:"):
                marks = [pytest.mark.skip(reason=b["mark"][len("no-run:"):].strip())]
            yield pytest.param(b, want, id=f"{page.relative_to(REPO)}:{b['line']}", marks=marks)


CASES = list(_cases())


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory):
    made = {}

    def get(page: Path) -> Path:
        if page not in made:
            d = tmp_path_factory.mktemp(page.stem)
            (d / "fixtures").symlink_to(FIXTURES)
            (d / ".venv").mkdir()
            (d / ".venv" / "bin").symlink_to(Path(sys.executable).parent)
            made[page] = d
        return made[page]
    return get


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("COLUMNS", None)
    return env


def _commands(body: str) -> list[str]:
    """The shell commands of a block: comment lines dropped, continued lines joined."""
    lines, cur = [], ""
    for line in body.splitlines():
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        lines.append(cur + line)
        cur = ""
    return lines


def _run(args, cwd: Path, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300, **kw)
    assert r.returncode == 0, f"{args}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return r


def _bash(script: str, cwd: Path) -> str:
    return _run(["bash", "-c", "set -euo pipefail\n" + script], cwd).stdout


def _sql_store(cwd: Path) -> Path:
    db = cwd / "examples_sql.duckdb"
    if not db.exists():
        _run([sys.executable, "-m", "tracekit", "convert", str(FIXTURES / "kineto" / "decode_b1.json.gz"),
              "--db", str(db), "-q"], cwd)
    return db


@pytest.mark.slow
@pytest.mark.parametrize(("block", "want"), CASES)
def test_example_runs(block, want, workdirs):
    cwd = workdirs(block["page"])
    lang, body = block["lang"], block["body"]
    if lang in ("bash", "sh"):
        cmds = _commands(body)
        assert cmds, "an empty block"
        if want is None:
            _bash("\n".join(cmds), cwd)
            return
        if cmds[:-1]:
            _bash("\n".join(cmds[:-1]), cwd)
        got = _bash(cmds[-1], cwd)
    elif lang == "python":
        got = _run([sys.executable, "-c", body], cwd).stdout
    else:  # sql
        got = _run([sys.executable, "-m", "tracekit", "sql", "--db", str(_sql_store(cwd)), "-f", "-"], cwd,
                   input=body).stdout
        assert got.strip(), "the query printed nothing"
    if want is not None:
        assert got.rstrip("\n") == want.rstrip("\n"), (
            f"{block['page'].name}:{block['line']}: the output shown differs from what the command prints now")


def test_every_block_is_classified():
    """Each block is runnable, an output, marked no-run with a reason, or a listing (`text` or no
    language), and the skipped ones are few: what can run, runs."""
    langs, skipped = set(), []
    for page in PAGES:
        for b in blocks(page):
            langs.add(b["lang"])
            if b["mark"] == "output":
                assert b["lang"] == "text", (page.name, b["line"])
            elif b["mark"].startswith("no-run:"):
                assert b["lang"] in RUNNABLE and len(b["mark"]) > len("no-run: ") + 10, (page.name, b["line"])
                skipped.append((page.name, b["line"]))
            else:
                assert not b["mark"], (page.name, b["line"], b["mark"])
    assert langs <= RUNNABLE | {"", "text"}, langs
    runnable = [c for c in CASES if not c.marks]
    assert sum(1 for c in runnable if c.values[1] is not None) >= 2  # README's diagnose and time_breakdown
    assert len(runnable) >= 7 and len(skipped) <= 5, (len(runnable), skipped)


def test_readme_front_page():
    """The README is a front page (issue 45): under 120 lines; its test command is the one
    .ci/run runs verbatim; its quick start installs what `diagnose --format html` needs."""
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) < 120
    test_cmd = ("python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev,ncu,spark]' "
                "&& .venv/bin/python -m pytest -q")
    assert test_cmd in text.splitlines()
    assert test_cmd in (REPO / ".ci" / "run").read_text().splitlines()
    run_cmd = next(line for line in text.splitlines() if line.startswith("python3 -m venv .venv && ")
                   and "pytest" not in line)
    assert "'.[report]'" in run_cmd and "--format html" in run_cmd


@pytest.mark.slow
def test_quick_start(tmp_path):
    """The quick start's first command after its install steps (the installed command is this
    interpreter's): it converts the bundled capture, prints the diagnosis and writes the HTML
    report (the `report` extra it installs is what that needs)."""
    pytest.importorskip("plotly", reason="plotly (the report extra) is not installed: pip install -e '.[report]'")
    text = (REPO / "README.md").read_text()
    run_cmd = next(line for line in text.splitlines() if line.startswith("python3 -m venv .venv && ")
                   and "pytest" not in line)
    steps = [s.strip() for s in run_cmd.split("&&")]
    assert steps[:2] == ["python3 -m venv .venv", ".venv/bin/pip install -q '.[report]'"]
    (tmp_path / "fixtures").symlink_to(FIXTURES)
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "bin").symlink_to(Path(sys.executable).parent)
    out = _bash(" && ".join(steps[2:]), tmp_path)
    assert "HIGH input_bound, 79.4 % of steady window (60.2 ms)" in out
    html = (tmp_path / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "input_bound" in html
