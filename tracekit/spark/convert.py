"""Converting many trace files as Spark tasks, each writing its partitions of the dataset.

``convert_dataset(inputs, dataset, master)`` gives each input to one Spark task (one partition of
a job, so a cluster spreads them over its executors; ``local[*]`` over this machine's cores).  A
task converts its file with exactly the one-process code (``writing()`` + ``Store.convert`` into
a private temporary store next to the dataset), exports it as the partitioned Parquet dataset
(``Store.export_parquet(partitioned=True)``) and moves each table's ``source_id=1`` folder to
``DATASET/<table>/source_id=<n>/``, where ``n`` is the input's position in INPUTS (from 0, as a
store numbers its sources).
Within a source no other column depends on its id, so this is the same data that ``tracekit
convert INPUTS --parquet DATASET --partitioned`` writes (tests/scale/test_spark.py compares them).

The dataset is written afresh: an existing folder with tracekit tables in it is refused unless
``replace`` (then its tables are removed first), so two sources never share an id and no input
is added twice.  An input given twice is refused before anything runs.  A failed input writes
nothing and takes no partition (its id stays unused); its one-line error is returned.

Each task converts under the driver's memory budget (``TRACEKIT_MEMORY_BUDGET`` /
``--memory-budget``, docs/scaling.md), so an executor running K tasks at once needs K budgets.
Executors must see the input paths and the dataset folder at the same paths (a shared file
system on a cluster) and have tracekit installed; on ``local[*]`` both hold by construction.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, replace as dc_replace
from pathlib import Path

from .. import schema


@dataclass
class TaskResult:
    """One input's outcome: its source id, the summary line (as `tracekit convert` prints it) or
    the one-line error, and its converted / skipped row counts."""

    source_id: int
    path: str
    ok: bool
    line: str
    converted: dict
    skipped: dict


def _convert_task(task: tuple) -> TaskResult:
    """Runs on an executor: one input into DATASET/<table>/source_id=<sid>/."""
    sid, path, dataset, fmt, rank, strict, memory_budget = task
    from .. import budget
    from ..adapters.base import TraceError
    from ..parallel import error_line
    from ..store import Store, writing

    os.environ[budget.ENV] = str(memory_budget)  # the driver's budget, on every executor
    tmp = Path(tempfile.mkdtemp(prefix=f".tracekit-task-{sid}-", dir=dataset))
    try:
        with writing(tmp / "part.duckdb", replace=True, persist=False) as st:
            summary = st.convert(path, format=fmt, rank=rank, strict=strict)
        with Store(tmp / "part.duckdb", read_only=True, sandbox=False) as st:
            st.export_parquet(tmp / "out", partitioned=True)
        for t in schema.TABLES:
            src = tmp / "out" / t.name / f"source_id={summary.source_id}"
            if src.is_dir():
                dst = Path(dataset) / t.name / f"source_id={sid}"
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.rmtree(dst, ignore_errors=True)
                os.replace(src, dst)
        line = dc_replace(summary, source_id=sid).one_line()
        return TaskResult(sid, path, True, line, dict(summary.converted), dict(summary.skipped))
    except TraceError as e:
        return TaskResult(sid, path, False, e.one_line(), {}, {})
    except Exception as e:  # a bug, not bad input: still one line, and say so
        if os.environ.get("TRACEKIT_DEBUG"):
            raise
        return TaskResult(sid, path, False, error_line(path, e), {}, {})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class DatasetError(Exception):
    """The dataset folder cannot be written as asked (one line: what and what to do)."""


def _prepare(dataset: Path, inputs: list[Path], replace: bool) -> None:
    seen: dict[Path, Path] = {}
    for p in inputs:
        if not p.is_file():
            raise DatasetError(f"{p}: no such file")
        key = p.resolve()
        if key in seen:
            raise DatasetError(f"{p}: given twice (as {seen[key]}); each input becomes one source")
        seen[key] = p
    if dataset.exists() and not dataset.is_dir():
        raise DatasetError(f"{dataset}: exists and is not a folder; choose another --parquet DIR")
    held = [dataset / t.name for t in schema.TABLES if (dataset / t.name).exists()]
    if held and not replace:
        raise DatasetError(f"{dataset}: already holds a tracekit dataset; --replace writes it afresh "
                           "(the Spark engine writes a new dataset, it does not add sources)")
    for d in held:
        shutil.rmtree(d)
    dataset.mkdir(parents=True, exist_ok=True)


def convert_dataset(inputs, dataset, master: str | None = None, fmt: str | None = None,
                    rank: int | None = None, strict: bool = False, replace: bool = False,
                    spark=None, conf: dict | None = None) -> list[TaskResult]:
    """Convert INPUTS into the partitioned Parquet dataset DATASET with one Spark task per input;
    returns each input's TaskResult in input order.  ``spark``: an existing SparkSession
    (default: `session.session(master, conf)`)."""
    inputs = [Path(p) for p in inputs]
    dataset = Path(dataset).resolve()
    _prepare(dataset, inputs, replace)
    if spark is None:
        from .session import session

        spark = session(master, conf)
    from .. import budget

    each = budget.current()  # per task, as per worker process of `convert --jobs`
    tasks = [(i, str(p.resolve()), str(dataset), fmt, rank, strict, each) for i, p in enumerate(inputs)]
    rdd = spark.sparkContext.parallelize(tasks, numSlices=max(1, len(tasks)))
    try:
        results = rdd.map(_convert_task).collect()
    except Exception as e:  # noqa: BLE001 - a task that failed outside the converter (e.g. an
        # executor without tracekit): Spark's reason in one line
        from .session import first_line

        raise DatasetError(f"the Spark job failed ({first_line(e)}); are tracekit and its dependencies "
                           "installed for the executors' Python (spark.pyspark.python)?") from None
    return sorted(results, key=lambda r: r.source_id)
