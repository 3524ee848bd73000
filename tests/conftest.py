"""Shared test helpers: paths of the real-world corpus (optional) and the bundled fixtures.

Optional test tools (the corpus ../shared, headless Chromium, Node.js with Perfetto's engine,
torch, ncu-report, plotly, pyspark with Java, the compiled module): a user without one sees its tests skip; in CI
(``CI=true``, as .ci/run sets) a missing one fails the run at the start, and a test that skips
for a missing tool fails instead, so CI cannot pass with tests not run.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
# ../shared/realworld beside the checkout (present on the team's machines and in CI, absent in a
# user's clone): tests that need it skip cleanly.
REALWORLD = REPO.parent / "shared" / "realworld"


IN_CI = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _importable(mod: str) -> bool:
    try:
        return importlib.util.find_spec(mod) is not None
    except (ImportError, ValueError):  # (ValueError: set to None in sys.modules, i.e. blocked)
        return False


def missing_tools() -> list[str]:
    """The optional test tools that are missing here, each with how to get it."""
    out = []
    if not REALWORLD.is_dir():
        out.append(f"the real-world corpus ({REALWORLD})")
    if not any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")):
        out.append("headless Chromium (apt-get install chromium)")
    try:
        from tracekit.export import engine as tp

        tp.node_binary()
        tp.find_engine()
    except ImportError:  # (where the engine module moved: Node.js at least)
        if not shutil.which("node"):
            out.append("Node.js (apt-get install nodejs)")
    except Exception as e:  # EngineUnavailable: what is missing and how to get it
        out.append(f"Perfetto's engine ({e})")
    for mod, how in (("torch", "pip install torch"), ("ncu_report", "pip install ncu-report"),
                     ("plotly", "pip install plotly")):
        if not _importable(mod):
            out.append(f"{mod} ({how})")
    if not _importable("pyspark") or not _importable("sqlglot"):
        out.append("pyspark and sqlglot (pip install -e '.[spark]')")
    if not shutil.which("java"):
        out.append("a Java runtime, for Spark (apt-get install default-jre-headless)")
    if os.environ.get("TRACEKIT_NO_EXTENSION") != "1":
        from tracekit.native import native

        if native is None:
            out.append("the compiled module tracekit._native (a C compiler at install)")
    return out


def pytest_sessionstart(session):
    if IN_CI:
        missing = missing_tools()
        if missing:
            pytest.exit("CI=true but optional test tools are missing, their tests would not run: "
                        + "; ".join(missing) + " (.ci/run installs them; unset CI to let them skip)",
                        returncode=1)


def pytest_collection_modifyitems(config, items):
    """The default run (`pytest` with no -m and no file or test named) leaves out the tests
    marked slow, so that it takes a few minutes; `pytest -m slow` runs them (.ci/run runs both),
    and naming a file or a test runs all of its tests."""
    if config.getoption("markexpr") or any(not Path(a.split("::")[0]).is_dir() for a in config.args):
        return
    slow = [it for it in items if it.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [it for it in items if not it.get_closest_marker("slow")]


# what a skip for a missing optional tool says (the tests' own skip reasons)
_TOOL_SKIPS = ("realworld", "shared", "is not present", "Chromium", "Perfetto engine", "torch",
               "ncu-report", "ncu_report", "plotly", "C module", "C scanner")
_BY_DESIGN = ("on purpose", "covered by")  # skips that are no missing tool


def _fail_tool_skip_in_ci(rep) -> None:
    if not (IN_CI and rep.skipped) or getattr(rep, "wasxfail", None) is not None:
        return
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    if any(s in reason for s in _TOOL_SKIPS) and not any(s in reason for s in _BY_DESIGN):
        rep.outcome = "failed"
        rep.longrepr = f"CI=true: this test would skip ({reason}); CI must run it (.ci/run installs every tool)"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_tool_skip_in_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_tool_skip_in_ci(outcome.get_result())


def realworld(kind: str) -> list[Path]:
    d = REALWORLD / kind
    return sorted(p for p in d.glob("*") if p.name != "SOURCES.md") if d.is_dir() else []


def slow_if_large(paths, limit: int = 2**20) -> list:
    """`paths` for a parametrize, those of ../shared/realworld over `limit` bytes marked slow: the
    default run takes the same code path on the smaller ones, CI (-m slow) runs them all."""
    return [pytest.param(p, marks=pytest.mark.slow) if p.is_relative_to(REALWORLD) and p.stat().st_size > limit
            else p for p in paths]


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is not present")
    return path


def load_json(path: Path):
    """Independent reader for tests: the plain stdlib json module."""
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        return json.load(f)


# stores of read-only inputs converted once per session: (inputs, settings) -> store file
_CONVERTED: dict = {}


def _shared_key(paths, request) -> tuple | None:
    """The cache key of a conversion the session may share, or None where the test must convert
    itself: inputs it made (outside fixtures/ and ../shared/realworld), a .nsys-rep (whose
    conversion runs nsys and writes a cache beside it) or a test that monkeypatches."""
    if "monkeypatch" in request.fixturenames:
        return None
    key = []
    for p in map(Path, paths):
        p = p.resolve()
        if (p.suffix == ".nsys-rep" or not p.is_file()
                or not any(p.is_relative_to(d) for d in (FIXTURES, REALWORLD.resolve()))):
            return None
        st = p.stat()
        key.append((str(p), st.st_size, st.st_mtime_ns))
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("TRACEKIT") or k == "NSYS"))
    return tuple(key), env


@pytest.fixture
def convert(tmp_path, tmp_path_factory, request):
    """convert(*paths) -> open read-only Store with those inputs converted. Inputs of fixtures/
    and ../shared/realworld are converted once per session (see _shared_key) and each test gets
    a copy of that store in its tmp_path, which it may change; with db= it converts into db."""
    import tracekit
    from tracekit.store import Store

    stores = []

    def _convert(*paths, db=None):
        key = _shared_key(paths, request) if paths and db is None else None  # (db=: it may hold sources)
        db = db or tmp_path / f"s{len(stores)}.duckdb"
        if key is not None and key in _CONVERTED:
            shutil.copyfile(_CONVERTED[key], db)
        else:
            with Store(db) as st:
                for p in paths:
                    st.convert(p)
            if key is not None:
                _CONVERTED[key] = tmp_path_factory.mktemp("converted") / "s.duckdb"
                shutil.copyfile(db, _CONVERTED[key])
        s = tracekit.open(db)
        stores.append(s)
        return s

    yield _convert
    for s in stores:
        s.close()


@pytest.fixture(scope="session")
def empty_store(tmp_path_factory):
    """A store with no source, open read-only: for checking the SQL library's macros alone."""
    import tracekit
    from tracekit.store import Store

    db = tmp_path_factory.mktemp("empty") / "empty.duckdb"
    with Store(db):
        pass
    s = tracekit.open(db)
    yield s
    s.close()
