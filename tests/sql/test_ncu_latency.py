"""kernel_latency on real Nsight Compute results of kernels built to have one latency cause each
(fixtures/gen/latency_kernels.py, run on an H200 by gen/run_latency_ncu.sh): every built cause is
named on the details, raw and base-unit pages, and the top stall reason equals the largest of
ncu's own stall ratios, read here from the raw CSV with the csv module."""

from __future__ import annotations

import csv
import gzip

import pytest

from conftest import FIXTURES

NCU = FIXTURES / "ncu"
PAGES = ["lat_raw.csv.gz", "lat_details.csv.gz", "lat_details_base.csv.gz"]
BUILT = {"divergent": "divergence", "uncoalesced": "uncoalesced", "barrier": "barrier_sync",
         "registers": "occupancy_registers", "one_block": "small_grid"}
STALL = "smsp__average_warps_issue_stalled_"


def raw_rows():
    with gzip.open(NCU / "lat_raw.csv.gz", "rt", newline="") as f:
        rows = list(csv.reader(f))
    header, data = rows[0], rows[2:]  # rows[1]: the units
    return [dict(zip(header, r)) for r in data]


@pytest.mark.parametrize("page", PAGES)
def test_every_built_cause_is_named(convert, page):
    st = convert(NCU / page)
    got = {r[0]: r[1:] for r in st.rows("select short_name, cause, remedy, cause_evidence from kernel_latency")}
    for kernel, cause in BUILT.items():
        assert got[kernel][0] == cause, (page, kernel, got[kernel])
        assert got[kernel][1] and got[kernel][2]  # a remedy and the numbers behind it
    # the healthy GEMM (tensor / shared pipe at 90 %) and the DRAM-bound GEMV get no cause
    others = [v[0] for k, v in got.items() if k not in BUILT]
    assert others == [None, None]


def test_top_stall_is_ncus_largest_stall_ratio(convert):
    st = convert(NCU / "lat_raw.csv.gz")
    got = dict(st.rows("select id, top_stall from kernel_latency"))
    want = {}
    for r in raw_rows():
        ratios = {k[len(STALL):-len("_per_issue_active.ratio")]: float(v.replace(",", ""))
                  for k, v in r.items() if k.startswith(STALL) and k.endswith("_per_issue_active.ratio") and v}
        for state in ("selected", "not_selected"):  # issue states, not stalls
            ratios.pop(state, None)
        want[int(r["ID"])] = max(ratios, key=ratios.get)
    assert got == want and len(want) == 7
    assert want[1] == "long_scoreboard" and want[2] == "barrier"  # the uncoalesced, the barrier kernel


def test_evidence_numbers_and_limiter(convert):
    st = convert(NCU / "lat_raw.csv.gz")
    rows = {r[0]: r[1:] for r in st.rows("""select short_name, threads_per_inst, sectors_ratio, occupancy_limiter,
                                                   theoretical_occupancy_pct, registers_per_thread, grid_blocks, waves
                                            from kernel_latency""")}
    raw = {r["Kernel Name"].split("(")[0]: r for r in raw_rows()}
    def num(k, m):
        return float(raw[k][m].replace(",", ""))
    assert rows["divergent"][0] == pytest.approx(num("divergent", "smsp__thread_inst_executed_per_inst_executed.ratio"))
    assert rows["uncoalesced"][1] == pytest.approx(num("uncoalesced", "memory_l2_theoretical_sectors_global")
                                                   / num("uncoalesced", "memory_l2_theoretical_sectors_global_ideal"))
    assert rows["registers"][2] == "registers" and rows["registers"][4] == 254 and rows["registers"][3] < 25
    assert rows["one_block"][5] == 1 and rows["one_block"][6] < 1


def test_details_page_says_what_is_missing(convert):
    st = convert(NCU / "lat_details.csv.gz")
    missing = [r[0] for r in st.rows("select missing from kernel_latency")]
    assert len(missing) == 7 and all(m.startswith("stall breakdown: export the raw page") for m in missing)
    st = convert(NCU / "lat_raw.csv.gz")
    assert {r[0] for r in st.rows("select missing from kernel_latency")} == {""}


def test_transpose_copy_of_the_decode_blocks_is_uncoalesced(convert):
    st = convert(NCU / "kn_details.csv")
    got = dict(st.rows("select id, cause from kernel_latency"))
    assert got == {0: None, 1: "uncoalesced", 2: None, 3: None}  # the GEMV and the streams are DRAM-bound


def test_small_grid_without_speed_of_light_says_what_to_collect(convert, tmp_path):
    """A report collected without the SpeedOfLight section (ncu --section LaunchStats ... only):
    the real details page with that section's rows taken out (an edge case: the fixture was
    captured with it).  The one-block kernel (1 block for the H200's 132 SMs) is still named
    small_grid from its grid alone, not given the next rule's cause, and `missing` says which
    section confirms it; kernels of a full grid are unchanged."""
    with gzip.open(NCU / "lat_details.csv.gz", "rt", newline="") as f:
        rows = list(csv.reader(f))
    i = rows[0].index("Section Name")
    sol = {"GPU Speed Of Light Throughput", "SpeedOfLight", "SpeedOfLight_RooflineChart"}
    kept = [r for r in rows if r[i] not in sol]
    assert len(rows) - len(kept) == 84  # 12 SOL rows of each of the 7 kernels
    path = tmp_path / "no_sol.csv"
    with path.open("w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(kept)
    st = convert(path)
    got = {r[0]: r[1:] for r in st.rows("select short_name, cause, cause_evidence, missing, grid_blocks, sm_count "
                                        "from kernel_latency")}
    cause, evidence, missing, grid, sms = got["one_block"]
    assert (cause, grid, sms) == ("small_grid", 1, 132)
    assert "1 block for 132 SMs" in evidence and "--section SpeedOfLight" in evidence
    assert missing.endswith("SM and memory throughput, to confirm small_grid: --section SpeedOfLight")
    full = convert(NCU / "lat_details.csv.gz")
    assert "SpeedOfLight" not in full.one("select missing from kernel_latency where short_name = 'one_block'")
    for k in ("divergent", "uncoalesced", "barrier"):
        assert got[k][0] == BUILT[k] and "SpeedOfLight" not in got[k][2]
