"""The merge case: one decode run under nsys with torch.profiler active (torch records the CPU ops,
nsys the GPU). Both sources land on one clock through sources.clock_offset_ns."""

from __future__ import annotations

import pytest

from conftest import FIXTURES, need

NSYS = FIXTURES / "nsys" / "decode_b1_with_torch.sqlite"
KINETO = FIXTURES / "kineto" / "decode_b1_under_nsys.json.gz"


def test_same_run_aligns_on_the_common_clock(convert):
    pytest.importorskip("tracekit.adapters.nsys")
    st = convert(need(NSYS), need(KINETO))
    assert st.rows("select format, clock_origin from sources order by source_id") == [
        ("nsys", "capture_start"), ("kineto", "base_time")]
    # torch.profiler could not record GPU work under nsys (CUPTI has one subscriber): no kernels
    assert st.one("select count(*) from kernels where source_id = 1") == 0
    assert st.one("select count(*) from kernels where source_id = 0") > 3000
    # each torch decode_step range and the NVTX range of the same step, on the common clock
    pairs = st.rows("""
        with r as (
          select e.source_id, e.start_ns + s.clock_offset_ns as s, e.end_ns + s.clock_offset_ns as e,
                 row_number() over (partition by e.source_id order by e.start_ns) as step
          from events e join sources s using (source_id)
          where e.name = 'decode_step' and e.category in ('nvtx', 'user_annotation'))
        select n.step, k.s - n.s, k.e - n.e from r n join r k on n.step = k.step
        where n.source_id = 0 and k.source_id = 1 order by n.step""")
    assert len(pairs) == 8
    for step, ds, de in pairs:
        # the torch range encloses the NVTX range it opens inside, by tens of µs, not ms
        assert -200_000 < ds <= 0 and 0 <= de < 200_000, (step, ds, de)
    # so the GPU work nsys saw falls inside torch's decode_step ranges
    inside = st.one("""
        select count(*) from kernels k join sources sk on sk.source_id = k.source_id
        join events e on e.source_id = 1 and e.name = 'decode_step'
        join sources se on se.source_id = 1
        where k.source_id = 0 and k.start_ns + sk.clock_offset_ns >= e.start_ns + se.clock_offset_ns
          and k.start_ns + sk.clock_offset_ns < e.end_ns + se.clock_offset_ns + 5000000""")
    assert inside >= 8 * 351
