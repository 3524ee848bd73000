#!/usr/bin/env python3
"""Score `tracekit diagnose` on the attribution corpus (fixtures/attribution/, made by
fixtures/gen/attribution.py): every program wrote its own oracle (host time per built part and
the steady window), captured by torch.profiler and by nsys.

For each capture: the top cause finding against the built cause (single causes), every built
part's time_breakdown share of the steady window against the oracle's share (mixtures: within
10 points), and the HIGH findings of the healthy controls (none allowed).

    python bench/attribution.py [--json]
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
ATTR = REPO / "fixtures" / "attribution"
SYMPTOMS = {"low_utilization", "startup"}
# built part (oracle key: an idle_attribution category, or the start-up) -> the finding carrying it
from tracekit.diagnose.attribution import CODE as _CATEGORY_CODE  # noqa: E402

CODE = {**_CATEGORY_CODE, "startup": "startup"}
FORMATS = {"kineto": ("{case}.json.gz", "{case}.oracle.json"), "nsys": ("{case}.sqlite", "{case}.nsys.oracle.json")}


def cases() -> list[str]:
    return sorted(p.name[:-len(".oracle.json")] for p in ATTR.glob("*.oracle.json") if ".nsys." not in p.name)


def top_cause(d):
    causes = [f for f in d.findings if f.code not in SYMPTOMS and f.severity != "info"]
    return causes[0] if causes else None


def oracle_shares(store, oracle: dict) -> dict:
    """The oracle's share of each built part, over the steps the tool judges: where steady_state
    left the first k steps to the start-up as warm-up and the oracle has its per-step times, the
    parts of steps k.. over the window from step k's start (an oracle of totals alone: the whole
    loop)."""
    k = store.one("SELECT max(warmup_steps) FROM steady_state") or 0
    if not k or "per_step" not in oracle or "compile" in oracle["shares_pct"]:
        return oracle["shares_pct"]
    steps = oracle["per_step"][k:]
    adj = oracle.get("step_adjust_ns", {})
    window = oracle["window_ns"] - steps[0]["start_ns"]
    return {p: round(100.0 * max(0, sum(s["parts_ns"].get(p, 0) for s in steps) - len(steps) * adj.get(p, 0))
                     / window, 2) for p in oracle["shares_pct"]}


def score_one(store, oracle: dict) -> dict:
    """The diagnosis of one capture against its oracle."""
    from tracekit.diagnose import diagnose

    d = diagnose(store)
    by_code = {}
    for f in d.findings:
        by_code.setdefault(f.code, f)
    # a part's share: its finding's share_pct; where its category stays under cause_min_pct (no
    # finding), its time_breakdown share of the steady window
    tb = {r[0]: r[1] for r in store.rows("""SELECT category, sum(pct) FROM time_breakdown
                                             WHERE part = 'steady' AND state = 'idle' GROUP BY 1""")}
    shares = {}
    for part, want in oracle_shares(store, oracle).items():
        f = by_code.get(CODE[part])
        got = f.share_pct if f is not None else tb.get(part, 0.0)
        shares[part] = {"oracle_pct": want, "share_pct": round(got or 0, 2), "finding": f is not None}
    top = top_cause(d)
    return {"case": oracle["case"], "kind": oracle["kind"], "expected": oracle["expected"],
            "top": top.code if top else None, "top_severity": top.severity if top else None,
            "high": [f.code for f in d.findings if f.severity == "high" and f.code not in SYMPTOMS],
            "startup": by_code["startup"].share_pct if "startup" in by_code else None,
            "shares": shares, "findings": [(f.code, f.severity, round(f.share_pct or 0, 1)) for f in d.findings]}


def verdict(r: dict) -> bool:
    if r["kind"] == "control":
        return not r["high"]
    if r["expected"] == "startup":
        return r["startup"] is not None and not r["high"]
    if r["kind"] == "single":
        return r["top"] == CODE[r["expected"]]
    return all(s["share_pct"] is not None and abs(s["share_pct"] - s["oracle_pct"]) <= 10 for s in r["shares"].values())


def main() -> int:
    import tracekit

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases():
            for fmt, (trace, orc) in FORMATS.items():
                path = ATTR / trace.format(case=case)
                if not path.exists():
                    continue
                oracle = json.loads((ATTR / orc.format(case=case)).read_text())
                db = Path(tmp) / f"{case}_{fmt}.duckdb"
                tracekit.convert([str(path)], db=str(db), replace=True, jobs=1)
                with tracekit.open(str(db)) as st:
                    r = score_one(st, oracle)
                r["format"] = fmt
                r["ok"] = verdict(r)
                rows.append(r)
    if "--json" in sys.argv:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            parts = ", ".join(f"{k} {v['share_pct']} vs {v['oracle_pct']}" for k, v in r["shares"].items())
            print(f"{'ok ' if r['ok'] else 'BAD'} {r['case']:20s} {r['format']:6s} {r['kind']:8s} top={r['top']} "
                  f"high={r['high']} {parts}")
        print(f"{sum(r['ok'] for r in rows)} of {len(rows)} captures right")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
