#!/usr/bin/env python3
"""tracekit's HTA-style views against Holistic Trace Analysis itself, on the same Kineto traces.

    python bench/hta_compare.py [--hta-python /tmp/htavenv/bin/python] [--op aten::linear] [TRACE...]

Default traces: fixtures/kineto/ddp_rank0.json.gz + ddp_rank1.json.gz (one trace_dir of 2 ranks).
HTA is not a dependency of tracekit: install it into a separate venv
(`python3 -m venv /tmp/htavenv && /tmp/htavenv/bin/pip install holistictraceanalysis 'pandas<3'`:
HTA 0.5's call graph fails under pandas 3); this script runs HTA there (itself, with --hta-side)
and reads its figures back as JSON. HTA runs with HTA_DISABLE_NS_ROUNDING=1 (otherwise it
shrinks every event inward to whole microseconds), except for the kernel sequences, whose call
graph needs that rounding.

Compared, per rank (times in ns; HTA's microsecond floats * 1000, rounded):
  temporal_breakdown     idle / compute / non-compute time and the span (get_temporal_breakdown)
  kernel_type_breakdown  per kernel type: operations, summed duration, exclusive time and time
                         overlapped with another type (get_gpu_kernel_breakdown's
                         _get_gpu_kernel_type_time, memory kernels included)
  queue_length           per stream: the number of changes, mean, max and quartiles of the queue
                         length series (get_queue_length_summary); tracekit's series is taken from
                         the view queue_length run over HTA's launch APIs only (HTA ignores
                         cuLaunchKernelEx and graph launches), and over all launches
  kernel_sequences       patterns and counts of --op on rank 0 (get_frequent_cuda_kernel_sequences,
                         which fails without HTA's rounding to whole microseconds: its GPU and CPU
                         durations are checked to be within that rounding)
Every line says equal, within a stated rounding of HTA's, explained (HTA counts the trace's
sync records -- cuda_sync 'Stream Wait Event', 'Event Sync', ... -- as GPU operations, tracekit
does not), or DIFF; the exit status is 1 on any DIFF.

HTA runs with include_last_profiler_step=True (by default it drops the GPU work of the last
ProfilerStep: 20 % of hta__df_index_resolver's kernels); tracekit's views cover the whole trace.

Measured (2026-12-01, HTA 0.5.0): ddp_rank0/1 59 figures, 40 equal, 19 within rounding;
decode_b1 23 figures, 19 equal, 4 within (HTA's call graph refuses this trace: no sequences);
shared/realworld/kineto: hta__alexnet_cuda_sync.json.gz --op aten::conv2d 40 figures, 35 equal,
5 explained (41 sync records); hta__df_index_resolver.json.gz (19,370 kernels) 29 figures, 27
equal, 2 within (queue means between the two orders of coinciding microsecond timestamps).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT = [REPO / "fixtures/kineto/ddp_rank0.json.gz", REPO / "fixtures/kineto/ddp_rank1.json.gz"]
# the launch APIs HTA counts (hta/common/trace_symbol_table.py get_runtime_launch_events_query)
HTA_LAUNCH_APIS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync",
                   "cudaMemsetAsync", "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipMemsetAsync",
                   "hipMemcpyAsync", "hipMemcpyWithStream")


# -- the HTA side (runs in HTA's venv) -------------------------------------------------------------
def hta_side(trace_dir: str, op: str, out: str) -> None:
    """Without HTA_DISABLE_NS_ROUNDING only the kernel sequences (HTA's call graph fails on
    unrounded times), with it everything else."""
    import logging

    logging.disable(logging.WARNING)
    from hta.analyzers.breakdown_analysis import BreakdownAnalysis
    from hta.trace_analysis import TraceAnalysis
    from hta.utils.utils import get_kernel_type

    a = TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)  # the whole trace, as tracekit
    t = a.t
    sym = t.symbol_table.get_sym_table()
    ranks = sorted(t.traces)
    res: dict = {"ranks": {}}
    if os.environ.get("HTA_DISABLE_NS_ROUNDING") != "1":
        try:
            with tempfile.TemporaryDirectory() as d:
                pats = a.get_frequent_cuda_kernel_sequences(operator_name=op, output_dir=d, min_pattern_len=3,
                                                            rank=ranks[0], top_k=5, visualize=False)
        except Exception as e:  # noqa: BLE001  (HTA's call graph refuses some traces)
            res["sequences_error"] = f"{type(e).__name__}: {e}"
            pats = None
        res["sequences"] = [] if pats is None or pats.empty else [
            {"pattern": r["pattern"], "count": int(r["count"]), "gpu": float(r["GPU kernel duration (us)"]),
             "cpu": float(r["CPU op duration (us)"])} for _, r in pats.iterrows()]
        res["sequence_rank"] = ranks[0]
        df = t.get_trace(ranks[0])
        res["sync_names"] = sorted({sym[i] for i in df.loc[df["cat"].map(lambda i: sym[i]) == "cuda_sync", "name"]})
        Path(out).write_text(json.dumps(res))
        return
    tb = a.get_temporal_breakdown(visualize=False)
    for _, r in tb.iterrows():
        res["ranks"].setdefault(str(int(r["rank"])), {})["temporal"] = {
            "span": r["kernel_time(us)"], "idle": r["idle_time(us)"], "compute": r["compute_time(us)"],
            "non_compute": r["non_compute_time(us)"]}
    types = ["COMPUTATION", "COMMUNICATION", "MEMORY"]
    for rank, df in t.traces.items():
        g = df[df["stream"].ne(-1)].copy()
        g["kernel_type"] = g["name"].map(lambda i: get_kernel_type(sym[i]))
        sync = g["cat"].map(lambda i: sym[i]) == "cuda_sync"  # sync records: HTA counts them as GPU ops
        per = {k: {"ops": int((g["kernel_type"] == k).sum()),
                   "total": float(g.loc[g["kernel_type"] == k, "dur"].sum()),
                   "sync_ops": int(((g["kernel_type"] == k) & sync).sum()),
                   "sync_total": float(g.loc[(g["kernel_type"] == k) & sync, "dur"].sum())}
               for k in types + ["OTHER"]}
        res.setdefault("sync_names", [])
        res["sync_names"] = sorted(set(res["sync_names"]) | {sym[i] for i in g.loc[sync, "name"]})
        tt = BreakdownAnalysis._get_gpu_kernel_type_time(g, types)
        per["_overlap_rows"] = {row["kernel_type"]: float(row["sum"]) for _, row in tt.iterrows()}
        res["ranks"].setdefault(str(rank), {})["types"] = per
    ql = a.get_queue_length_time_series(ranks=ranks)
    for rank, qdf in ql.items():
        res["ranks"][str(rank)]["queue"] = {
            str(int(s)): [int(v) for v in sdf.sort_values("ts", kind="stable")["queue_length"]]
            for s, sdf in qdf.groupby("stream")}
    Path(out).write_text(json.dumps(res))


# -- tracekit side ------------------------------------------------------------------------------------
def ns(us: float) -> int:
    return round(us * 1000)


def describe(values: list[int]) -> dict:
    """pandas' describe() of a series: count, mean, min, 25/50/75 % (linear), max."""
    v = sorted(values)
    q = statistics.quantiles(v, n=4, method="inclusive") if len(v) > 1 else [v[0]] * 3
    return {"count": len(v), "mean": round(statistics.fmean(v), 6), "min": v[0],
            "25%": q[0], "50%": q[1], "75%": q[2], "max": v[-1]}


def hta_series(st, sid: int, stream: int, only_hta_apis: bool, increments_first: bool = True
               ) -> tuple[list[int], int]:
    """The per-event queue length series HTA builds, from tracekit's view `queue_length` run over
    HTA's launch APIs only (or all launches): one value per launch and per start; returns it and
    the number of instants where several changes coincide. Their order inside an instant is
    HTA's (unstable) sort: increments first gives the highest values any order can, decrements
    first the lowest, so HTA's statistics lie between those of the two."""
    from tracekit.views import all_views

    sql = next(v for v in all_views() if v.name == "queue_length").sql
    body = sql[sql.index(" AS\n") + 4:].strip().rstrip(";")
    if only_hta_apis:
        apis = ", ".join(f"'{a}'" for a in HTA_LAUNCH_APIS)
        body = body.replace("FROM gpu_launches g", f"FROM (SELECT * FROM gpu_launches WHERE api_name IN ({apis})) g")
    rows = st.sql(f"SELECT launched, started, queued FROM ({body}) WHERE source_id = {sid} "
                  f"AND stream_id = {stream} AND launched + started > 0 ORDER BY ts_ns").fetchall()
    out, ties, prev = [], 0, 0
    for launched, started, queued in rows:
        if launched + started > 1:
            ties += 1
        v = prev
        steps = [1] * launched + [-1] * started
        for d in (steps if increments_first else steps[::-1]):
            v += d
            out.append(v)
        assert v == queued
        prev = queued
    return out, ties


def line(what: str, hta, tk, note: str = "", within: tuple[int, int, str] | None = None,
         explained: bool = False, between: str | None = None) -> str:
    """'equal'; 'within' (tk - hta in [lo, hi] of within=(lo, hi, why), or HTA's figure in the
    range a tie order allows: between=why); 'explained' (a difference the sync records HTA counts
    as GPU work explain); else 'diff'."""
    if hta == tk:
        verdict, out = "equal", "equal"
    elif between:
        verdict, out = between, "within"
    elif within and isinstance(hta, int) and isinstance(tk, int) and within[0] <= tk - hta <= within[1]:
        verdict, out = f"{tk - hta:+d} ns: {within[2]}", "within"
    elif explained:
        verdict, out = "differs: HTA counts sync records as GPU time", "explained"
    else:
        verdict, out = "DIFF " + note, "diff"
    print(f"  {what:<46} HTA {hta!s:>14}  tracekit {tk!s:>14}  {verdict}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="*", type=Path, default=DEFAULT)
    ap.add_argument("--hta-python", default="/tmp/htavenv/bin/python")
    ap.add_argument("--op", default="aten::linear", help="operator for the kernel sequences")
    ap.add_argument("--hta-side", nargs=3, metavar=("DIR", "OP", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.hta_side:
        hta_side(*a.hta_side)
        return 0
    if not Path(a.hta_python).exists():
        print(f"{a.hta_python}: no HTA venv; make one: python3 -m venv /tmp/htavenv && "
              "/tmp/htavenv/bin/pip install holistictraceanalysis", file=sys.stderr)
        return 2
    sys.path.insert(0, str(REPO))
    import tracekit

    with tempfile.TemporaryDirectory() as tmp:
        tdir = Path(tmp) / "traces"
        tdir.mkdir()
        for p in a.traces:
            shutil.copy(p, tdir / p.name)
        out = Path(tmp) / "hta.json"
        for rounding in ("1", "0"):
            env = dict(os.environ, HTA_DISABLE_NS_ROUNDING=rounding)
            subprocess.run([a.hta_python, __file__, "--hta-side", str(tdir), a.op, str(out) + rounding],
                           check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        hta = json.loads((Path(str(out) + "1")).read_text())
        hta.update({k: v for k, v in json.loads((Path(str(out) + "0")).read_text()).items() if k != "ranks"})
        db = Path(tmp) / "tk.duckdb"
        tracekit.convert(sorted(tdir.iterdir()), db=db, replace=True, jobs=1)
        st = tracekit.open(db)
        pairs = st.sql("select source_id, rank from sources").fetchall()
        src = {r: s for s, r in pairs}
        if len(pairs) == 1:  # a single trace without distributedInfo is HTA's rank 0
            src = {int(next(iter(hta["ranks"]))): pairs[0][0]}
        tally: dict[str, int] = {}

        def check(*args, **kw):
            r = line(*args, **kw)
            tally[r] = tally.get(r, 0) + 1

        for rank in sorted(hta["ranks"], key=int):
            h = hta["ranks"][rank]
            sid = src[int(rank)]
            print(f"rank {rank} (tracekit source {sid})")
            tb = st.sql(f"select span_ns, idle_ns, compute_ns, non_compute_ns from temporal_breakdown "
                        f"where source_id = {sid}").fetchall()[0]
            n_sync = sum(x["sync_ops"] for x in h["types"].values() if isinstance(x, dict) and "sync_ops" in x)
            if n_sync:
                print(f"  (HTA counts the trace's {n_sync} sync records (cuda_sync) as GPU operations; "
                      "tracekit does not: they mark waits, not work)")
            for key, v in zip(("span", "idle", "compute", "non_compute"), tb):
                check(f"temporal {key}_ns", ns(h["temporal"][key]), v,
                      within=(-1, 1, "HTA's float microseconds"), explained=bool(n_sync))
            kt = {r[0]: r[1:] for r in st.sql(
                f"select kernel_type, ops, total_ns, exclusive_ns, overlapped_ns from kernel_type_breakdown "
                f"where source_id = {sid}").fetchall()}
            names = {"COMPUTATION": "compute", "COMMUNICATION": "communication", "MEMORY": "memory",
                     "OTHER": "other"}
            rows = h["types"].pop("_overlap_rows")
            for ht, tt in names.items():
                ops, total_ns, excl, over = kt[tt]
                x = h["types"][ht]
                if x["sync_ops"]:
                    print(f"  {tt}: HTA's figures less its {x['sync_ops']} sync records")
                check(f"{tt}: operations", x["ops"] - x["sync_ops"], ops)
                check(f"{tt}: summed duration ns", ns(x["total"] - x["sync_total"]), total_ns,
                      within=(-1, 1, "HTA's float microseconds"))
                if ht != "OTHER":  # HTA truncates each segment of its sweep to whole microseconds
                    trunc = (0, 1000 * 2 * sum(x["ops"] for x in h["types"].values()),
                             "HTA truncates each sweep segment to whole us")
                    check(f"{tt}: exclusive ns", ns(rows.get(ht, 0.0)), excl, within=trunc, explained=bool(n_sync))
                    hov = sum(v for k, v in rows.items() if " overlapping " in k and ht in k.split(" overlapping "))
                    check(f"{tt}: overlapped with another type ns", ns(hov), over, within=trunc,
                          explained=bool(n_sync))
            for stream, values in sorted(h.get("queue", {}).items(), key=lambda x: int(x[0])):
                mine, ties = hta_series(st, sid, int(stream), True)
                low, _ = hta_series(st, sid, int(stream), True, increments_first=False)
                dh = describe(values)
                hi, lo = (describe(mine), describe(low)) if mine else ({}, {})
                for k in ("count", "mean", "max", "50%", "75%"):
                    between = None
                    if ties and k in lo and lo[k] <= dh[k] <= hi[k]:
                        between = f"between the orders of its {ties} coinciding changes ({lo[k]} .. {hi[k]})"
                    check(f"queue stream {stream} {k} (HTA's launch APIs)", dh[k], hi.get(k), between=between)
            for stream, mx, n in st.sql(f"select stream_id, max_queued, ops from queue_length_summary "
                                        f"where source_id = {sid} order by stream_id").fetchall():
                hv = h.get("queue", {}).get(str(stream))
                print(f"  queue stream {stream}, all launch APIs: {n} operations, max queued {mx}"
                      f"  (HTA: {len(hv) // 2 if hv else 0} operations, max {max(hv) if hv else '-'})")
        print(f"kernel sequences of '{a.op}' on rank {hta['sequence_rank']}")
        drop = set(hta.get("sync_names", []))
        if drop and hta.get("sequences"):  # HTA's patterns list sync records; tracekit's do not
            merged: dict[str, dict] = {}
            for p in hta["sequences"]:
                key = "|".join(x for x in p["pattern"].split("|") if x not in drop)
                m = merged.setdefault(key, {"pattern": key, "count": 0, "gpu": 0.0, "cpu": 0.0, "synced": False})
                m["count"] += p["count"]
                m["gpu"] += p["gpu"]
                m["cpu"] += p["cpu"]
                m["synced"] |= key != p["pattern"]
            print(f"  HTA's patterns without its sync records ({', '.join(sorted(drop))}): "
                  f"{len(hta['sequences'])} -> {len(merged)}")
            hta["sequences"] = sorted(merged.values(), key=lambda p: (-p["count"], p["pattern"]))
        if "sequences_error" in hta:
            print(f"  HTA failed: {hta['sequences_error'][:200]}")
            hta["sequences"] = None
        st.sql(f"set variable sequence_op = '{a.op}'")
        sid = src[hta["sequence_rank"]]
        mine = {r[0]: r[1:] for r in st.sql(
            f"select pattern, count, gpu_ns, cpu_ns from kernel_sequences where source_id = {sid}").fetchall()}
        if hta["sequences"] is not None:
            check("patterns", len(hta["sequences"]), len(mine))
        else:
            print(f"  tracekit: {len(mine)} patterns, {sum(m[0] for m in mine.values())} roots")
        for i, p in enumerate(hta["sequences"] or []):
            m = mine.get(p["pattern"])
            if m is None:
                check(f"pattern {i + 1} ({p['count']}x)", "present", "missing")
                continue
            check(f"pattern {i + 1}: count", p["count"], m[0])
            if p.get("synced"):  # HTA's GPU time holds the sync records' durations
                check(f"pattern {i + 1}: CPU ns", ns(p["cpu"]), m[2],
                      within=(0, 2000 * p["count"], "HTA rounds each event inward to whole us"))
                continue
            # HTA's call graph needs its rounding: every event shrunk to [ceil(ts), floor(end)] in us
            n_ops = len(p["pattern"].split("|")) - 1
            for k, j, bound in (("gpu", 1, 2000 * n_ops * p["count"]), ("cpu", 2, 2000 * p["count"])):
                check(f"pattern {i + 1}: {k.upper()} ns", ns(p[k]), m[j],
                      within=(0, bound, "HTA rounds each event inward to whole us"))
        st.close()
    print(f"{sum(tally.values())} figures: " + ", ".join(f"{v} {k}" for k, v in sorted(tally.items())))
    return 1 if tally.get("diff") else 0


if __name__ == "__main__":
    sys.exit(main())
