"""The communication rules of `tracekit diagnose`: low_overlap (per device) and rank_imbalance
(per job). Their SQL is in sql/diagnose/low_overlap.sql and rank_imbalance.sql."""

from __future__ import annotations

from .model import Finding, fmt_ns, fmt_pct, pct, plural
from .rules import Rules
from .scopes import Scope
from .statements import Sql, statement


def low_overlap(rules: Rules, s: Scope) -> Finding | None:
    q = rules.q
    oq = statement("low_overlap", "overlap", sid=s.source_id, dev=s.device_id, phase=s.phase)
    o = q.one(oq)
    if not o or not o["kind_ns"]:
        return None
    share = pct(o["exposed_ns"], s.window_ns) or 0
    if (o["overlap_pct"] or 0) >= rules.th["overlap_low_pct"] or share < rules.th["overlap_min_pct"]:
        return None
    ev = [q.evidence("overlap", oq)]
    wait_ns = 0
    if q.has("rank_imbalance"):
        wq = statement("low_overlap", "rank_wait", sid=s.source_id, dev=s.device_id)
        w = q.one(wq)
        if w:
            wait_ns = w["wait_ns"] or 0
            ev.append(q.evidence("rank_imbalance", wq))
    waiting = min(wait_ns, o["exposed_ns"])
    key = "low_overlap:waiting" if waiting > o["exposed_ns"] / 2 else "low_overlap"
    wtxt = (f"; {fmt_ns(wait_ns)} of the collectives' time is waiting for other ranks "
            f"(rank_imbalance)") if wait_ns else ""
    return rules.finding(
        "low_overlap", share, o["exposed_ns"], s.window_ns, s,
        f"communication {fmt_ns(o['kind_ns'])}, {fmt_pct(o['overlap_pct'])} overlapped with compute: "
        f"{fmt_ns(o['exposed_ns'])} exposed ({fmt_pct(share)} of the window){wtxt}",
        remedy_key=key,
        metrics={"comm_ns": o["kind_ns"], "overlap_pct": o["overlap_pct"], "exposed_ns": o["exposed_ns"],
                 "wait_ns": wait_ns},
        evidence=ev)

def rank_imbalance(rules: Rules, windows: dict, sources: set[int] | None) -> list[Finding]:
    """windows: GPU window per source_id (a source per rank) and per (source_id, device_id)
    (a process per rank: its GPU's window)."""
    q = rules.q
    if not q.has("rank_imbalance"):
        return []

    def win_of(r):
        return windows.get((r["source_id"], r["device_id"]) if r["pid"] is not None else r["source_id"])

    # the collectives inside the steady window of the rank's GPU (start-up apart: NCCL's
    # first collectives wait for every rank's initialisation, not for an imbalance)
    steady = Sql(statement("rank_imbalance", "steady_collectives"))
    pq = statement("rank_imbalance", "ranks", steady=steady)
    out = []
    by_job: dict[int, list[dict]] = {}
    for r in q.dicts(pq):
        by_job.setdefault(r["job_id"], []).append(r)
    for job, ranks in by_job.items():
        if sources is not None and not any(r["source_id"] in sources for r in ranks):
            continue
        waiter = max(ranks, key=lambda r: (pct(r["wait_ns"], win_of(r)) or 0))
        win = win_of(waiter)
        share = pct(waiter["wait_ns"], win) or 0
        if share < rules.th["imbalance_pct"]:
            continue
        # the rank the waiter waited for: of the others, the one that arrived last most often
        slow = max((r for r in ranks if r is not waiter), key=lambda r: r["times_slowest"], default=waiter)
        n_coll = waiter["collectives"]
        jq = statement("rank_imbalance", "job_ranks", steady=steady, job=job)
        tq = statement("rank_imbalance", "top_skew", steady=steady, job=job)
        # what the slow rank was doing while it held the others back: its time on the steps'
        # critical path, by what it was doing (its compute, its host's idle causes)
        doing, doing_txt, cev = {}, "", []
        if q.has("critical_path"):
            cq = statement("rank_imbalance", "slow_rank_path", job=job, rank=slow["rank"])
            _c, crows = q.run(cq)
            doing = {(k if c is None else f"{k}:{c}"): n for k, c, n, _s, _p in crows}
            if crows:
                k, c, n, _s, path_pct = crows[0]
                what = "its GPU computing" if k == "compute" else f"its GPU idle while its host was in '{c}'"
                doing_txt = (f"; on the steps' critical path (`critical_path`) it held {fmt_ns(sum(doing.values()))}, "
                             f"most with {what}: {fmt_ns(n)} ({fmt_pct(path_pct)} of the path)")
                cev = [q.evidence("critical_path", cq)]
        out.append(rules.finding(
            "rank_imbalance", share, waiter["wait_ns"], win, None,
            f"rank {waiter['rank']} waited {fmt_ns(waiter['wait_ns'])} in {plural(n_coll, 'collective')} "
            f"({fmt_pct(share)} of its steady window) for rank {slow['rank']}, which arrived last in "
            f"{slow['times_slowest']} of {slow['collectives']}{doing_txt}; largest skew {fmt_ns(slow['max_skew_ns'])}; "
            f"the transfers themselves took {fmt_ns(waiter['transfer_ns'])} (`collectives` has each one's "
            f"bytes and bus bandwidth)",
            source_id=waiter["source_id"], device_id=waiter["device_id"] if waiter["pid"] is not None else None,
            phase=None, subject=f"job {job}",
            metrics={"job_id": job, "waiting_rank": waiter["rank"], "wait_ns": waiter["wait_ns"],
                     "transfer_ns": waiter["transfer_ns"],
                     "slowest_rank": slow["rank"], "times_slowest": slow["times_slowest"],
                     "collectives": n_coll, "max_skew_ns": slow["max_skew_ns"], "slowest_rank_doing_ns": doing,
                     "ranks": {str(r["rank"]): {"source_id": r["source_id"], "pid": r["pid"],
                                                "device_id": r["device_id"], "wait_ns": r["wait_ns"],
                                                "times_slowest": r["times_slowest"]} for r in ranks}},
            evidence=[q.evidence("rank_imbalance", jq), q.evidence("rank_imbalance", tq)] + cev))
    return out
