"""End to end with the torch that is installed: capture a CPU torch.profiler trace now, convert it,
and compare with torch's own aggregation (key_averages). Skips when torch is not installed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_fresh_cpu_capture_matches_key_averages(tmp_path, convert):
    from torch.profiler import ProfilerActivity, profile, record_function

    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    x = torch.randn(16, 64)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(3):
            with record_function("train_step"):
                model(x).sum().backward()
    path = tmp_path / "cpu_capture.json"
    prof.export_chrome_trace(str(path))

    st = convert(path)
    want = {e.key: e.count for e in prof.key_averages()}
    # torch's aggregation folds an op called directly inside an op of the same name (aten::sum
    # → aten::sum) into one; count the same way through the derived nesting
    got = dict(st.rows("""select c.name, count(*) from events c
                          left join events p on p.source_id = c.source_id and p.event_id = c.parent_id
                          where c.category = 'cpu_op' and (p.name is null or p.name <> c.name)
                          group by c.name"""))
    assert got["aten::linear"] == want["aten::linear"] == 6
    assert got["aten::sum"] == want["aten::sum"] == 9
    for name, n in got.items():
        assert want.get(name) == n, name
    assert st.one("select count(*) from events where name = 'aten::sum'") == 12  # as exported
    steps = st.rows("select count(*), min(depth) from events where name = 'train_step'")[0]
    assert steps == (3, 0)
    # every aten::linear nests (directly or not) inside a train_step
    inside = st.one("""
        with recursive up(event_id, parent_id, anc) as (
          select event_id, parent_id, name from events where name = 'aten::linear'
          union all
          select u.event_id, p.parent_id, p.name from up u join events p on p.event_id = u.parent_id)
        select count(distinct event_id) from up where anc = 'train_step'""")
    assert inside == 6
    assert st.one("select clock_origin from sources") == "base_time"


def test_tracekit_profile_three_lines(tmp_path):
    """Model to diagnosis in three lines, on the CPU build of torch."""
    import tracekit

    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(4)])
    x = torch.randn(8, 64)
    with tracekit.profile(tmp_path / "run.duckdb") as cap:
        for _ in range(5):
            with cap.range("decode_step"):
                model(x)
    report = cap.diagnose()

    assert cap.trace.exists() and cap.trace.suffix == ".gz"
    assert cap.summary.source_id == 0 and cap.summary.converted["events"] > 0
    st = tracekit.open(tmp_path / "run.duckdb")
    assert st.one("select instances from phases where phase = 'decode_step'") == 5
    assert st.one("select count(*) from events where name = 'aten::linear'") == 20
    st.close()
    # a CPU-only capture has no GPU work: diagnose says so instead of failing
    assert {f.code for f in report.findings} == {"no_gpu_data"}
    assert "no_gpu_data" in str(report)
