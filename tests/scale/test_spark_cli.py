"""The Spark engine as users run it: `tracekit convert --engine spark` (one Spark task per input,
writing its partitions of the dataset) gives the dataset that `tracekit convert --parquet DIR
--partitioned` writes, and `tracekit sql --engine spark` answers as `tracekit sql` does over the
same dataset. Every view's rows on both engines: tests/scale/test_spark.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tracekit import schema

pytestmark = pytest.mark.slow  # a local Spark session per command: minutes

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_spark import needs_spark  # noqa: E402
from test_spark import spark as spark_session  # noqa: E402,F401 (the one Spark session fixture, `spark`)

FIX = Path(__file__).resolve().parents[2] / "fixtures"
INPUTS = [FIX / "kineto" / "ddp_rank0.json.gz", FIX / "kineto" / "ddp_rank1.json.gz",
          FIX / "nsys" / "decode_b1.sqlite"]


def _cli(*args, check=True):
    r = subprocess.run([sys.executable, "-m", "tracekit.cli", *map(str, args)], capture_output=True, text=True)
    if check:
        assert r.returncode == 0, r.stderr
    return r


# sources: the path is the absolute one a task was given, converted_at the time of conversion
_DIFFER = {"path", "converted_at"}


def _table_rows(dataset: Path, table: str) -> list:
    con = duckdb.connect()
    files = list(dataset.glob(f"{table}/source_id=*/*.parquet"))
    if not files:
        return []
    cols = ", ".join(c.name for c in schema.table(table).columns if c.name not in _DIFFER)
    rows = con.execute(f"SELECT {cols} FROM read_parquet('{dataset}/{table}/*/*.parquet', "
                       "hive_partitioning = true)").fetchall()
    return sorted(rows, key=repr)


@needs_spark
def test_convert_as_spark_tasks_writes_the_same_dataset(spark_session, tmp_path):  # noqa: F811 (the fixture)
    from tracekit.spark.convert import convert_dataset
    from tracekit.store import Store, writing

    bad = tmp_path / "broken.json"
    bad.write_text('{"traceEvents": [')
    results = convert_dataset([*INPUTS, bad], tmp_path / "spark_ds", spark=spark_session)
    assert [r.source_id for r in results] == [0, 1, 2, 3]
    assert [r.ok for r in results] == [True, True, True, False]
    assert "broken.json" in results[3].line and "\n" not in results[3].line
    assert results[2].line.startswith("[2] ") and "(nsys)" in results[2].line

    with writing(tmp_path / "ref.duckdb", replace=True) as st:
        for p in INPUTS:
            st.convert(p)
    with Store(tmp_path / "ref.duckdb", read_only=True, sandbox=False) as st:
        st.export_parquet(tmp_path / "ref_ds", partitioned=True)
    compared = 0
    for t in schema.TABLES:
        got, want = _table_rows(tmp_path / "spark_ds", t.name), _table_rows(tmp_path / "ref_ds", t.name)
        assert got == want, t.name
        compared += len(got)
    assert compared > 20_000  # 20,755 rows in 17 tables
    assert not list((tmp_path / "spark_ds").glob("*/source_id=3"))  # the failed input wrote nothing
    assert not list((tmp_path / "spark_ds").glob(".tracekit-task-*"))  # no leftovers


@needs_spark
def test_cli_convert_and_sql_on_spark(tmp_path):
    ds = tmp_path / "ds"
    out = _cli("convert", "--engine", "spark", "--parquet", ds, *INPUTS[:2]).stdout
    assert "wrote 2 of 2 inputs" in out and out.count("(kineto): ") == 2
    again = _cli("convert", "--engine", "spark", "--parquet", ds, INPUTS[0], check=False)
    assert again.returncode != 0 and "--replace" in again.stderr and "Traceback" not in again.stderr

    q = ("select source_id, name, count(*) as n, sum(dur_ns)::BIGINT as total_ns from kernels "
         "where tk_is_comm_kernel(name) group by all order by source_id, name")
    spark_rows = json.loads(_cli("sql", "--engine", "spark", "--db", ds, q, "--format", "json").stdout)
    duck_rows = json.loads(_cli("sql", "--db", ds, q, "--format", "json").stdout)
    assert spark_rows == duck_rows and len(duck_rows) >= 2
    assert {r["source_id"] for r in duck_rows} == {0, 1}

    table = _cli("sql", "--engine", "spark", "--db", ds, "--timeunit", "ms",
                 "select source_id, count(*) as gaps, sum(dur_ns) as dur_ns from idle_gaps group by 1 order by 1")
    assert "dur_ms" in table.stdout and "(2 rows)" in table.stdout
    assert table.stderr.strip() == ""  # Spark's start-up lines go to its log file, not the terminal

    bad = _cli("sql", "--engine", "spark", "--db", ds, "select nope from kernels", check=False)
    assert bad.returncode != 0 and bad.stderr.startswith("tracekit: error: query failed")
    assert len(bad.stderr.strip().splitlines()) == 1

    # --spark-conf goes over tracekit's own settings: ANSI mode on, a division by zero fails
    # (tracekit's session has it off, so that it is NULL as in DuckDB)
    q = "select count(*) filter (where dur_ns / (source_id - source_id) is null) as n from kernels"
    assert json.loads(_cli("sql", "--engine", "spark", "--db", ds, q, "--format", "json").stdout)[0]["n"] > 0
    ansi = _cli("sql", "--engine", "spark", "--db", ds, q, "--spark-conf", "spark.sql.ansi.enabled=true",
                check=False)
    assert ansi.returncode != 0 and "DIVIDE_BY_ZERO" in ansi.stderr, ansi.stderr
    assert len(ansi.stderr.strip().splitlines()) == 1


def test_spark_options_errors_are_one_line(tmp_path):
    cases = [
        (("sql", "--engine", "spark", "--db", tmp_path / "missing", "select 1"), "not a folder"),
        (("convert", "--engine", "spark", INPUTS[0]), "--parquet DIR"),
        (("sql", "--master", "local[2]", "select 1", "--db", tmp_path / "x.duckdb"), "--master needs --engine spark"),
        (("sql", "--spark-conf", "a=b", "select 1", "--db", tmp_path / "x.duckdb"), "--spark-conf needs --engine spark"),
        (("convert", "--engine", "spark", "--parquet", tmp_path / "d", "--spark-conf", "novalue", INPUTS[0]),
         "--spark-conf 'novalue': expected KEY=VALUE"),
    ]
    for args, what in cases:
        r = _cli(*args, check=False)
        assert r.returncode != 0 and what in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_convert_dataset_refuses_before_any_work(tmp_path):
    from tracekit.spark.convert import DatasetError, convert_dataset

    with pytest.raises(DatasetError, match="given twice"):
        convert_dataset([INPUTS[0], INPUTS[0]], tmp_path / "ds", spark=object())
    with pytest.raises(DatasetError, match="no such file"):
        convert_dataset([tmp_path / "nope.json"], tmp_path / "ds", spark=object())
    (tmp_path / "held" / "kernels").mkdir(parents=True)
    with pytest.raises(DatasetError, match="--replace"):
        convert_dataset([INPUTS[0]], tmp_path / "held", spark=object())
