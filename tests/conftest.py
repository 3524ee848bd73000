"""Shared test helpers: paths of the real-world corpus (optional) and the bundled fixtures."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
# ../shared/realworld beside the checkout (present on the team's machines and in CI, absent in a
# user's clone): tests that need it skip cleanly.
REALWORLD = REPO.parent / "shared" / "realworld"


def realworld(kind: str) -> list[Path]:
    d = REALWORLD / kind
    return sorted(p for p in d.glob("*") if p.name != "SOURCES.md") if d.is_dir() else []


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is not present")
    return path


def load_json(path: Path):
    """Independent reader for tests: the plain stdlib json module."""
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        return json.load(f)


@pytest.fixture
def convert(tmp_path):
    """convert(*paths) -> open read-only Store with those inputs converted."""
    import tracekit
    from tracekit.store import Store

    stores = []

    def _convert(*paths, db=None):
        db = db or tmp_path / f"s{len(stores)}.duckdb"
        with Store(db) as st:
            for p in paths:
                st.convert(p)
        s = tracekit.open(db)
        stores.append(s)
        return s

    yield _convert
    for s in stores:
        s.close()
