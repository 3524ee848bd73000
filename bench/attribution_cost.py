#!/usr/bin/env python3
"""What idle_attribution + time_breakdown cost next to idle_gaps (which they build on).

COUNT(*) over each whole view, median of --repeat runs, two ways:
  fresh    each view on a new read-only session (it computes every view it reads);
  session  one session keeps idle_gaps, then steady_state (which diagnose reads anyway), then
           idle_attribution, then counts time_breakdown, as `tracekit diagnose` reads them: each
           step reads the kept rows of the ones before it, so its time is what it adds.
The ratio printed is (idle_attribution + time_breakdown) / idle_gaps of the session figures.

    python bench/attribution_cost.py STORE.duckdb|TRACE [--repeat 5]
    # a large input: python bench/inputs.py kineto fixtures/kineto/decode_b1.json.gz /tmp/big.json.gz 40
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def session(db: str, repeat: int) -> dict[str, float]:
    """One read-only session as `tracekit diagnose` has it: each shared view kept (computed once)
    before the next reads it; each figure is what that step adds."""
    import tracekit

    runs: dict[str, list[float]] = {}
    steps = [("idle_gaps", "keep"), ("steady_state", "keep"), ("idle_attribution", "keep"),
             ("time_breakdown", "count")]
    for _ in range(repeat):
        with tracekit.open(db) as st:
            for v, how in steps:
                t = time.perf_counter()
                if how == "keep":
                    st.keep(v)
                else:
                    st.rows(f"SELECT count(*) FROM {v}")
                runs.setdefault(v, []).append(time.perf_counter() - t)
    return {v: statistics.median(x) for v, x in runs.items()}


def timed(db: str, view: str, repeat: int) -> tuple[float, int]:
    import tracekit

    secs, n = [], 0
    for _ in range(repeat):
        with tracekit.open(db) as st:
            t = time.perf_counter()
            n = st.one(f"SELECT count(*) FROM {view}")
            secs.append(time.perf_counter() - t)
    return statistics.median(secs), n


def main(argv: list[str]) -> int:
    import tracekit

    repeat = int(argv[argv.index("--repeat") + 1]) if "--repeat" in argv else 5
    src = argv[0]
    with tempfile.TemporaryDirectory() as tmp:
        db = src
        if not src.endswith(".duckdb"):
            db = str(Path(tmp) / "s.duckdb")
            t = time.perf_counter()
            tracekit.convert([src], db=db, replace=True)
            print(f"converted {src} in {time.perf_counter() - t:.2f} s")
        with tracekit.open(db) as st:
            print("rows:", st.one("SELECT count(*) FROM events"), "events,",
                  st.one("SELECT count(*) FROM api_calls"), "API calls,",
                  st.one("SELECT count(*) FROM gpu_activity"), "GPU ops")
        res = {v: timed(db, v, repeat) for v in ("idle_gaps", "steady_state", "idle_attribution", "time_breakdown")}
        ses = session(db, repeat)
    print(f"{'view':18s} {'fresh':>10s} {'session':>10s} {'rows':>10s}")
    for v, (s, n) in res.items():
        print(f"{v:18s} {s * 1000:7.1f} ms {ses[v] * 1000:7.1f} ms {n:>10,}")
    ratio = (ses["idle_attribution"] + ses["time_breakdown"]) / ses["idle_gaps"]
    print(f"session: (idle_attribution + time_breakdown) / idle_gaps = {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
