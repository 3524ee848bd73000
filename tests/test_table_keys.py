"""Per-source facts that hold on every store: every input file of fixtures/ and of
../shared/realworld is converted on its own and checked (issue 45).

* ``processes`` has one row per (source_id, pid) and ``threads`` one per (source_id, pid, tid), so a
  join through them never multiplies rows. Before the fix, Kineto wrote one processes row per
  `process_name` and one per `process_labels` metadata event (34 rows for 17 pids on every
  torch.profiler fixture) and one threads row per `thread_name` event.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIXTURES, realworld

FIXTURE_DIRS = ("kineto", "nsys", "ncu", "roofline", "labelled", "attribution")
_SUFFIXES = (".json.gz", ".sqlite", ".csv", ".csv.gz")


def _inputs(d: Path) -> list[Path]:
    return sorted(p for p in d.glob("*") if p.name.endswith(_SUFFIXES))


FIXTURE_FILES = [p for d in FIXTURE_DIRS for p in _inputs(FIXTURES / d)]
# the real-world files that hold a trace or an ncu table (the .nsys-rep / .qdrep need nsys; the
# text-mode ncu pages and the console log give their one-line error: tests/test_ncu.py)
REALWORLD_FILES = ([p for p in realworld("kineto") if p.name.endswith(".json.gz")]
                   + [p for p in realworld("nsys") if p.suffix == ".sqlite"]
                   + [p for p in realworld("ncu") if p.suffix in (".csv", ".ncu-rep")
                      or p.name.endswith("nsight_cfd_097K.log")
                      or p.name.endswith("nsight_cfd_097K.ip-128-115-246-7.log")])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """store(path) -> the read-only store of that one file, converted once per module."""
    import tracekit
    from tracekit.store import Store

    cache: dict = {}

    def _store(path: Path):
        if path not in cache:
            db = tmp_path_factory.mktemp("keys") / "s.duckdb"
            if path.suffix == ".ncu-rep":
                pytest.importorskip("ncu_report", reason="ncu_report (pip install ncu-report) is not present")
            with Store(db) as st:
                st.convert(path)
            cache[path] = tracekit.open(db)
        return cache[path]

    yield _store
    for s in cache.values():
        s.close()


def _keys_unique(s) -> tuple[int, int, int, int]:
    """(processes rows, distinct (source_id, pid), threads rows, distinct (source_id, pid, tid))."""
    return s.one("SELECT (SELECT count(*) FROM processes), "
                 "       (SELECT count(*) FROM (SELECT DISTINCT source_id, pid FROM processes)), "
                 "       (SELECT count(*) FROM threads), "
                 "       (SELECT count(*) FROM (SELECT DISTINCT source_id, pid, tid FROM threads))")


def _check_keys(s) -> None:
    procs, proc_keys, threads, thread_keys = _keys_unique(s)
    assert procs == proc_keys, f"{procs} processes rows for {proc_keys} pids"
    assert threads == thread_keys, f"{threads} threads rows for {thread_keys} (pid, tid)"


@pytest.mark.slow
@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_one_row_per_process_and_thread_on_fixtures(path, store):
    _check_keys(store(path))


@pytest.mark.slow
@pytest.mark.parametrize("path", REALWORLD_FILES or [None], ids=lambda p: p.name if p else "absent")
def test_one_row_per_process_and_thread_on_realworld(path, store):
    if path is None:
        pytest.skip("../shared/realworld is not present")
    _check_keys(store(path))


def test_kineto_process_name_and_labels_make_one_row(store):
    """decode_b1: 17 pids (the host process 813 and 16 GPU tracks), each with a process_name and a
    process_labels event, were 34 processes rows; the host thread's thread_name event comes twice
    (2 threads rows for it). Now one row each, the name and the labels together; the repeated
    thread_name is counted as skipped (by design)."""
    s = store(FIXTURES / "kineto" / "decode_b1.json.gz")
    assert _keys_unique(s) == (17, 17, 2, 2)
    assert s.rows("SELECT pid, name, labels FROM processes WHERE pid IN (0, 15, 813) ORDER BY pid") == [
        (0, "python3", "GPU 0"), (15, "python3", "GPU 15"), (813, "python3", "CPU")]
    assert s.rows("SELECT pid, tid, name FROM threads ORDER BY pid") == [
        (0, 7, "stream 7 "), (813, 813, "thread 813 (python3)")]
    assert s.one("SELECT count FROM skipped_rows WHERE by_design AND reason = "
                 "'metadata event ''thread_name'' repeating one already read (kept once)'") == 1
