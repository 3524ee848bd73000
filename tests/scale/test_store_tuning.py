"""The conversion's tuning constants (docs/scaling.md, "Tuning constants") change how rows are
stored or inserted, never which: a store converted with another setting holds the same rows."""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import pytest

from conftest import FIXTURES
from tracekit import schema, store
from tracekit.store import writing

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from samestore import differences  # noqa: E402

KINETO = FIXTURES / "kineto/decode_b1.json.gz"


def _convert(src: Path, db: Path) -> str:
    with writing(db, replace=True) as st:
        return st.convert(src).one_line()


@pytest.fixture(scope="module")
def default_db(tmp_path_factory) -> tuple[Path, str]:
    """The fixture converted with the default settings, once for the tests that compare against it."""
    db = tmp_path_factory.mktemp("default") / "default.duckdb"
    return db, _convert(KINETO, db)


def _args_compression(db: Path) -> set[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {r[0] for r in con.execute(
            "SELECT DISTINCT compression FROM pragma_storage_info('events') "
            "WHERE column_name = 'args' AND segment_type = 'JSON'").fetchall()}


def test_json_columns_in_zstd_hold_the_same_rows(default_db, tmp_path, monkeypatch):
    """`schema.JSON_COMPRESSION`: the `args` JSON is stored with zstd by default and with DuckDB's
    own choice without it; the values (every table, every column) are the same."""
    assert schema.JSON_COMPRESSION == "zstd"
    zstd_db, zstd = default_db
    monkeypatch.setattr(schema, "JSON_COMPRESSION", None)
    plain = _convert(KINETO, tmp_path / "plain.duckdb")
    assert zstd == plain
    assert _args_compression(zstd_db) == {"ZSTD"}
    assert "ZSTD" not in _args_compression(tmp_path / "plain.duckdb")
    assert differences(str(zstd_db), str(tmp_path / "plain.duckdb")) == []
    with duckdb.connect(str(zstd_db), read_only=True) as con:
        n, with_args = con.execute("SELECT count(*), count(args) FROM events").fetchone()
    assert n > 1000 and with_args > 1000  # the comparison covered real JSON values


@pytest.mark.parametrize("threads", [None, 2])
def test_serial_insert_threads_hold_the_same_rows(default_db, tmp_path, monkeypatch, threads):
    """`store.SERIAL_INSERT_THREADS`: a Kineto conversion inserted on one DuckDB thread (the
    default) or on DuckDB's own count holds the same rows."""
    one_db, one = default_db
    monkeypatch.setattr(store, "SERIAL_INSERT_THREADS", threads)
    other = _convert(KINETO, tmp_path / "other.duckdb")
    assert one == other
    assert differences(str(one_db), str(tmp_path / "other.duckdb")) == []


def test_serial_insert_threads_restored_after_a_conversion(tmp_path, monkeypatch):
    """The store's `threads` setting is what it was before the conversion."""
    monkeypatch.setattr(store, "SERIAL_INSERT_THREADS", 1)
    with writing(tmp_path / "again.duckdb", replace=True) as st:
        st._con.execute("SET threads = 3")
        st.convert(KINETO)
        assert st._con.execute("SELECT current_setting('threads')").fetchone()[0] == 3
