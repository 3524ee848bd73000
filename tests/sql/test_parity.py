"""One deterministic program (Llama-shaped decode, batch 1, prefill + 8 steps) captured twice on an
H200 — once by nsys, once by torch.profiler — gives the same kernels and the same time per step."""

from __future__ import annotations

import pytest

from conftest import FIXTURES, need

NSYS = FIXTURES / "nsys" / "decode_b1.sqlite"
KINETO = FIXTURES / "kineto" / "decode_b1.json.gz"
KEY = "short_name, grid_x, grid_y, grid_z, block_x, block_y, block_z"


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    pytest.importorskip("tracekit.adapters.nsys")
    import tracekit
    from tracekit.store import Store

    db = tmp_path_factory.mktemp("parity") / "p.duckdb"
    with Store(db) as st:
        st.convert(need(NSYS))
        st.convert(need(KINETO))
    st = tracekit.open(db)
    yield st
    st.close()


def test_same_kernels_by_name_and_geometry(both):
    # nsys and Kineto spell demangled names differently ((int)16 vs 16, lambda spellings), so the
    # key is the base name plus launch geometry
    rows = both.rows(f"""
        with n as (select {KEY}, count(*) c from kernels where source_id = 0 group by all),
             k as (select {KEY}, count(*) c from kernels where source_id = 1 group by all)
        select n.c, k.c from n full join k using ({KEY})""")
    assert len(rows) > 30
    assert all(a == b for a, b in rows), [r for r in rows if r[0] != r[1]]
    assert both.one("select count(*) from kernels where source_id = 0") == \
        both.one("select count(*) from kernels where source_id = 1") > 3000


def test_kernel_time_per_step_within_5_pct(both):
    per_step = both.rows("""
        select e.source_id, row_number() over (partition by e.source_id order by e.start_ns) step,
               sum(l.dur_ns) kernel_ns, count(*) kernels
        from events e join gpu_launches l
          on l.source_id = e.source_id and l.pid = e.pid and l.tid = e.tid and l.kind = 'kernel'
         and l.api_start_ns >= e.start_ns and l.api_start_ns < e.end_ns
        where e.name = 'decode_step'
        group by e.source_id, e.event_id, e.start_ns order by e.source_id, step""")
    nsys = {r[1]: r[2:] for r in per_step if r[0] == 0}
    kin = {r[1]: r[2:] for r in per_step if r[0] == 1}
    assert len(nsys) == len(kin) == 8
    for step in nsys:
        assert nsys[step][1] == kin[step][1]  # same kernel count in each step
        assert abs(nsys[step][0] - kin[step][0]) <= 0.05 * kin[step][0]


def test_same_diagnosis_from_both_tools(both):
    """Both captures say the same thing: launch-bound, with one blocking copy per step."""
    causes = dict(both.rows("""select source_id, arg_max(cause, n) from
                               (select source_id, cause, count(*) n from idle_gaps
                                where scope = 'device' group by all) group by source_id"""))
    assert causes == {0: "host_wait", 1: "host_wait"}
    copies = dict(both.rows("select source_id, calls from sync_stalls where kind = 'pageable_copy'"
                            " and call_site = 'decode_step' or (source_id = 1 and kind = 'pageable_copy')"))
    assert copies[0] == 8 and copies[1] == 9  # nsys: 8 in decode_step (+1 in prefill); Kineto: all 9
