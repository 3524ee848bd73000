"""Per-source facts that hold on every store: every input file of fixtures/ and of
../shared/realworld is converted on its own and checked (issue 45).

* ``processes`` has one row per (source_id, pid) and ``threads`` one per (source_id, pid, tid), so a
  join through them never multiplies rows. Before the fix, Kineto wrote one processes row per
  `process_name` and one per `process_labels` metadata event (34 rows for 17 pids on every
  torch.profiler fixture) and one threads row per `thread_name` event.
* ``devices`` is non-empty wherever the input describes its devices (read here independently of
  the adapters), every device id of ``kernels`` / ``ncu_kernels`` has its ``devices`` row, the SM
  count is known wherever the input gives it, and ``roofline`` has its peaks on every call whose
  device is one of the peak table's. Before the fix an SGLang trace (its properties numbered 0,
  its kernels on device 9) and a torch.compile one (0 / 2) had no peaks, and ncu details pages
  of sections only had ``sm_count`` NULL although each launch reports "# SMs".
"""

from __future__ import annotations

import csv
import gzip
import json
import sqlite3
from pathlib import Path

import pytest

from conftest import FIXTURES, load_json, realworld

FIXTURE_DIRS = ("kineto", "nsys", "ncu", "roofline", "labelled", "attribution")
_SUFFIXES = (".json.gz", ".sqlite", ".csv", ".csv.gz")


def _inputs(d: Path) -> list[Path]:
    return sorted(p for p in d.glob("*") if p.name.endswith(_SUFFIXES))


FIXTURE_FILES = [p for d in FIXTURE_DIRS for p in _inputs(FIXTURES / d)]
# the real-world files that hold a trace or an ncu table (the .nsys-rep / .qdrep need nsys; the
# text-mode ncu pages and the console log give their one-line error: tests/adapters/test_ncu.py)
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


def _described(path: Path) -> tuple[bool, bool, str | None]:
    """(the input describes its devices, it gives their SM count, their vendor where the input
    says it), read with the standard library: Kineto's deviceProperties (computeProperties
    before torch 1.9), AMD where written through ROCm (roctracer / HIP versions), NVIDIA through
    CUPTI; nsys's TARGET_INFO_GPU / TARGET_INFO_CUDA_DEVICE rows; an ncu table with a Device
    column, and its device attributes or Launch Statistics' "# SMs" (a report: always both)."""
    if path.name.endswith((".json.gz", ".json")):
        top = load_json(path)
        props = [p for p in (top.get("deviceProperties") or top.get("computeProperties") or [])
                 if isinstance(p, dict)]
        vendor = ("amd" if "roctracer_version" in top or "hip_runtime_version" in top
                  else "nvidia" if "cupti_version" in top else None)
        return bool(props), any("numSms" in p or "multiProcessorCount" in p for p in props), vendor
    if path.suffix == ".sqlite":
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            n = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                    for t in ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_DEVICE") if t in tables)
        finally:
            con.close()
        return n > 0, n > 0, "nvidia"
    if path.suffix == ".ncu-rep":
        return True, True, "nvidia"
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as f:
        text = f.read()
    header = next((row for row in csv.reader(text.splitlines()) if row[:1] == ["ID"]), [])
    sms = any(m in text for m in ('"# SMs"', "launch__sm_count", "device__attribute_multiprocessor_count"))
    return "Device" in header, "Device" in header and sms, "nvidia"


def _check_devices(path: Path, s) -> None:
    described, sms, vendor = _described(path)
    n = s.one("SELECT count(*) FROM devices")
    assert (n > 0) == described, f"{n} devices rows; the input describes its devices: {described}"
    if not described:
        return
    if vendor is not None:
        assert s.rows("SELECT DISTINCT vendor FROM devices") == [(vendor,)]
    for table in ("kernels", "ncu_kernels"):
        orphans = s.rows(f"SELECT DISTINCT device_id FROM {table} WHERE device_id NOT IN "
                         "(SELECT device_id FROM devices WHERE device_id IS NOT NULL) ORDER BY 1")
        assert orphans == [], f"{table} on devices without a devices row: {orphans}"
    if sms:
        assert s.one("SELECT count(*) FROM devices WHERE sm_count IS NULL") == 0
    if s.one("SELECT count(*) FROM kernels") and s.one("SELECT count(*) FROM devices WHERE name <> ''"):
        # every roofline call on a device of the peak table has that device's peaks
        assert s.one("""
            SELECT count(*) FROM roofline r JOIN devices d USING (source_id, device_id)
            WHERE EXISTS (SELECT 1 FROM tk_device_peaks() p WHERE regexp_matches(d.name, p.pattern, 'i'))
              AND (r.device IS NULL OR r.peak_bytes_per_s IS NULL)""") == 0


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


@pytest.mark.slow
@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_devices_where_described_on_fixtures(path, store):
    _check_devices(path, store(path))


@pytest.mark.slow
@pytest.mark.parametrize("path", REALWORLD_FILES or [None], ids=lambda p: p.name if p else "absent")
def test_devices_where_described_on_realworld(path, store):
    if path is None:
        pytest.skip("../shared/realworld is not present")
    _check_devices(path, store(path))


def test_device_ids_of_the_kernels_get_the_properties(store):
    """tracelens SGLang decode (MI300X): deviceProperties has one device, id 0; its 555 kernels
    run on device 9. The devices row is device 9 (the property's own id kept in args) and the
    10 roofline calls get the MI300X's peaks (none before)."""
    path = next((p for p in REALWORLD_FILES if "sglang" in p.name), None)
    if path is None:
        pytest.skip("../shared/realworld is not present")
    s = store(path)
    assert s.rows("SELECT device_id, name, sm_count, args->>'$.deviceProperties_id' FROM devices") == [
        (9, "AMD Instinct MI300X", 304, "0")]
    assert s.rows("SELECT device_id, count(*) FROM kernels GROUP BY ALL") == [(9, 555)]
    assert s.rows("SELECT count(*), count(peak_bytes_per_s), any_value(device) FROM roofline") == [
        (10, 10, "AMD Instinct MI300X")]


def test_ncu_sm_count_from_launch_statistics(store):
    """kn_details.csv (ncu --set detailed, H200): no device attributes, but each launch's Launch
    Statistics says "# SMs" 132: the devices row has sm_count 132 (NULL before), as the raw page
    of the same run gives from device__attribute_multiprocessor_count."""
    assert store(FIXTURES / "ncu" / "kn_details.csv").rows("SELECT device_id, sm_count FROM devices") == [(0, 132)]
    assert store(FIXTURES / "ncu" / "kn_raw.csv").rows("SELECT device_id, sm_count FROM devices") == [(0, 132)]


def test_kineto_compute_properties(tmp_path, store):
    """torch before 1.9 wrote the devices as computeProperties, with CUDA's field names (major,
    minor, multiProcessorCount, maxThreadsPerMultiProcessor; as in tb_plugin's test trace
    gpu_metrics_input.json). No such trace is in the corpus: hta__triton_example (A100 x 8) with
    its deviceProperties written that way gives the same devices rows as the original."""
    path = next((p for p in REALWORLD_FILES if "triton_example" in p.name), None)
    if path is None:
        pytest.skip("../shared/realworld is not present")
    top = load_json(path)
    rename = {"computeMajor": "major", "computeMinor": "minor", "numSms": "multiProcessorCount",
              "maxThreadsPerMultiprocessor": "maxThreadsPerMultiProcessor"}
    top["computeProperties"] = [{rename.get(k, k): v for k, v in p.items()} for p in top.pop("deviceProperties")]
    old = tmp_path / "old_props.json"
    old.write_text(json.dumps(top))
    cols = "device_id, name, compute_capability, sm_count, total_memory_bytes, max_threads_per_sm, warp_size"
    want = store(path).rows(f"SELECT {cols} FROM devices ORDER BY device_id")
    assert len(want) == 8 and want[0] == (0, "NVIDIA A100-PG509-200", "8.0", 108, 42297524224, 2048, 32)
    assert store(old).rows(f"SELECT {cols} FROM devices ORDER BY device_id") == want


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
