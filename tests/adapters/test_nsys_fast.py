"""The columnar reader of the big nsys tables (KERNEL, RUNTIME through the ADBC SQLite driver)
against the sqlite3 path: the same stores, also on files with values of other types than
integers in those tables (those rowid ranges are read again through sqlite3), and ``args`` text
equal to what SQLite's json_object writes."""

from __future__ import annotations

import random
import shutil
import sqlite3
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from conftest import FIXTURES, realworld, slow_if_large
from tracekit.adapters import nsys
from tracekit.store import writing

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from samestore import differences  # noqa: E402

pytest.importorskip("adbc_driver_sqlite")


def _convert(src: Path, db: Path) -> str:
    with writing(db, replace=True) as st:
        return st.convert(src).one_line()


def _both(src: Path, tmp_path: Path, monkeypatch, batch_rows: int = 700) -> None:
    monkeypatch.setattr(nsys.reader, "CHUNK_ROWS", batch_rows)  # several ranges, several threads (both paths)
    monkeypatch.setattr(nsys.reader, "FAST_READERS", 3)
    fast = _convert(src, tmp_path / "fast.duckdb")
    monkeypatch.setattr(nsys.reader, "_adbc", None)
    slow = _convert(src, tmp_path / "slow.duckdb")
    assert fast == slow
    assert differences(str(tmp_path / "fast.duckdb"), str(tmp_path / "slow.duckdb")) == []


@pytest.mark.parametrize("src", sorted((FIXTURES / "nsys").glob("*.sqlite"))
                         + slow_if_large([p for p in realworld("nsys") if p.suffix == ".sqlite"][:4]),
                         ids=lambda p: p.stem)
def test_same_store_as_sqlite3_path(src, tmp_path, monkeypatch):
    _both(src, tmp_path, monkeypatch)


def test_other_types_in_big_tables(tmp_path, monkeypatch):
    """REAL, TEXT and BLOB values in KERNEL / RUNTIME columns, mapped and unmapped, bad intervals
    and a whole range of one type: every such range goes the sqlite3 way, with its repairs and
    skips, and the store is the one of the sqlite3 path."""
    src = tmp_path / "mixed.sqlite"
    shutil.copy(FIXTURES / "nsys" / "decode_b1.sqlite", src)
    con = sqlite3.connect(src)
    k, r = nsys.KERNEL, nsys.RUNTIME
    con.executescript(f"""
        UPDATE {k} SET gridX = 1.5 WHERE rowid = 10;
        UPDATE {k} SET cacheConfig = 'abc' WHERE rowid = 900;
        UPDATE {k} SET localMemoryTotal = x'00ff' WHERE rowid = 1500;
        UPDATE {k} SET "end" = 'late' WHERE rowid = 1600;
        UPDATE {k} SET start = "end" + 5 WHERE rowid = 1601;
        UPDATE {k} SET demangledName = 99999999 WHERE rowid = 2000;
        UPDATE {k} SET shortName = 2.0 WHERE rowid BETWEEN 2101 AND 2800;
        UPDATE {r} SET nameId = 'cudaLaunchKernel' WHERE rowid = 5;
        UPDATE {r} SET eventClass = 67 WHERE rowid BETWEEN 100 AND 120;
        UPDATE {r} SET eventClass = 5 WHERE rowid = 3000;
        UPDATE {r} SET returnValue = 7.25 WHERE rowid = 4000;
        ALTER TABLE {r} ADD COLUMN note;
        UPDATE {r} SET note = 'x' WHERE rowid = 6000;
        UPDATE {r} SET note = 3 WHERE rowid = 6100;
    """)
    con.commit()
    con.close()
    _both(src, tmp_path, monkeypatch)


def test_args_text_equals_sqlite_json():
    rnd = random.Random(7)
    db = sqlite3.connect(":memory:")
    for _ in range(200):
        ncols, nrows = rnd.randint(1, 6), rnd.randint(1, 200)
        cols = []
        for _ in range(ncols):
            mode = rnd.choice(["const", "low", "high", "null", "some_null", "high_null"])
            pick = {
                "const": lambda: 5, "low": lambda: rnd.choice([0, 1, -3, None]),
                "high": lambda: rnd.randint(-2**63, 2**63 - 1), "null": lambda: None,
                "some_null": lambda: rnd.choice([None, rnd.randint(0, 10**6)]),
                "high_null": lambda: rnd.choice([None, rnd.randint(-2**63, 2**63 - 1)]),
            }[mode]
            cols.append([pick() for _ in range(nrows)])
        names = [f"c{j}" for j in range(ncols)]
        db.execute("DROP TABLE IF EXISTS t")
        db.execute(f"CREATE TABLE t ({', '.join(n + ' INTEGER' for n in names)})")
        db.executemany(f"INSERT INTO t VALUES ({', '.join('?' * ncols)})", list(zip(*cols)))
        expected = [r[0] for r in db.execute(f"SELECT {nsys.args_sql(names)} FROM t ORDER BY rowid")]
        keys = [db.execute("SELECT json_object(?, 0)", (n,)).fetchone()[0][1:-2] for n in names]
        arrays = [pa.array(c, pa.int64()) for c in cols]
        for max_card in (1, 2, 256):
            assert nsys.args_arrow(keys, arrays, nrows, max_card).to_pylist() == expected
        assert nsys.args_joined(keys, arrays, nrows).to_pylist() == expected


def test_rowid_gaps(tmp_path, monkeypatch):
    """Deleted rows (rowid gaps): the table goes the sqlite3 way whole (ranges would not be the
    sqlite3 path's chunks, which number the cuda_backtrace events)."""
    src = tmp_path / "gaps.sqlite"
    shutil.copy(FIXTURES / "nsys" / "decode_b1.sqlite", src)
    con = sqlite3.connect(src)
    con.executescript(f"""
        DELETE FROM {nsys.RUNTIME} WHERE rowid IN (50, 51, 2000);
        UPDATE {nsys.RUNTIME} SET eventClass = 67 WHERE rowid BETWEEN 1000 AND 1010;
        UPDATE {nsys.KERNEL} SET rowid = 100000 WHERE rowid = 7;
    """)
    con.commit()
    con.close()
    _both(src, tmp_path, monkeypatch)
