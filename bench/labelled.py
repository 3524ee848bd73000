#!/usr/bin/env python3
"""Score `tracekit diagnose` on the labelled corpus (fixtures/labelled/, labels.json).

For every case and format (Kineto trace, nsys export of the same program) it converts the
capture, diagnoses it and prints the top cause finding (the first finding that is neither a
symptom -- low_utilization, startup -- nor 'info'), then recall (injected causes named as the top
cause), precision (HIGH cause findings that name the injected cause; any HIGH finding on a
healthy control is a false alarm) and the negative controls' HIGH findings.

    python bench/labelled.py [--json]
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
LAB = REPO / "fixtures" / "labelled"


def score(workdir: Path) -> dict:
    import tracekit
    from tracekit.diagnose import diagnose

    labels = json.loads((LAB / "labels.json").read_text())
    symptoms = set(labels["symptoms"])
    rows = []
    for case, lab in labels["cases"].items():
        for fmt in lab.get("formats", labels["formats"]):
            pattern = labels["formats"][fmt]
            path = LAB / pattern.format(case=case)
            db = workdir / f"{case}_{fmt}.duckdb"
            t0 = time.perf_counter()
            tracekit.convert([str(path)], db=str(db), replace=True, jobs=1)
            with tracekit.open(str(db)) as st:
                d = diagnose(st)
            secs = time.perf_counter() - t0
            causes = [f for f in d.findings if f.code not in symptoms and f.severity != "info"]
            top = causes[0] if causes else None
            high = [f.code for f in d.findings if f.severity == "high"]
            rows.append({"case": case, "format": fmt, "expected": lab["cause"],
                         "top": top.code if top else None, "top_severity": top.severity if top else None,
                         "top_share_pct": round(top.share_pct, 1) if top and top.share_pct is not None else None,
                         "high": high, "findings": [(f.code, f.severity) for f in d.findings],
                         "seconds": round(secs, 2),
                         "not_visible": (lab.get("not_visible") or {}).get(fmt)})
    pos = [r for r in rows if r["expected"]]
    neg = [r for r in rows if not r["expected"]]
    hits = [r for r in pos if r["top"] == r["expected"]]
    high_causes = [(r, c) for r in rows for c in r["high"] if c not in symptoms]
    true_high = [1 for r, c in high_causes if c == r["expected"]]
    false_neg_ctrl = [r for r in neg if r["high"]]
    return {"rows": rows, "recall": (len(hits), len(pos)), "precision": (len(true_high), len(high_causes)),
            "controls_with_high": (len(false_neg_ctrl), len(neg))}


def main():
    with tempfile.TemporaryDirectory() as d:
        res = score(Path(d))
    if "--json" in sys.argv:
        print(json.dumps(res, indent=1))
        return
    print(f"{'case':16} {'format':7} {'expected':16} {'top cause finding':28} {'HIGH findings':40} ok")
    for r in res["rows"]:
        top = f"{r['top']} ({r['top_severity']}, {r['top_share_pct']} %)" if r["top"] else "-"
        ok = (r["top"] == r["expected"]) if r["expected"] else not r["high"]
        print(f"{r['case']:16} {r['format']:7} {str(r['expected']):16} {top:28} {','.join(r['high']) or '-':40} "
              f"{'yes' if ok else 'NO'}" + (f"  [{r['not_visible'][:60]}...]" if r["not_visible"] and not ok else ""))
    h, n = res["recall"]
    tp, p = res["precision"]
    c, nc = res["controls_with_high"]
    print(f"\nrecall (injected cause is the top cause finding): {h}/{n} = {100 * h / n:.0f} %")
    print(f"precision (HIGH cause findings that name the injected cause): {tp}/{p} = {100 * tp / max(p, 1):.0f} %")
    print(f"negative controls with a HIGH finding: {c}/{nc}")


if __name__ == "__main__":
    main()
