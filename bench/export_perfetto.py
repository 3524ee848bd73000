"""Benchmark: Perfetto export of a ~500k-event store (wall time and peak RSS per format).

    python bench/export_perfetto.py [--db /tmp/tk_bench.duckdb] [--engine] [--target 500000]

CPU s is user+system time of the child (all threads: DuckDB's, the gzip writer's), the steadier
figure on a shared machine.  Builds the store once (real Kineto traces from ../shared/realworld/kineto, the largest first,
converted repeatedly until the target number of rows is reached), then exports it to .json,
.json.gz and .pftrace, each in a fresh child process so that its peak RSS is its own.  The
sources come from different days; ``--align`` places them all at one start so the merged
timeline is a realistic few seconds long.  ``--engine`` also loads each output into Perfetto's
trace processor (WebAssembly, Node.js) and reports its load time and check results.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REALWORLD = REPO.parent / "shared" / "realworld" / "kineto"
ORDER = ["hta__df_index_resolver", "hta__diff_control", "hta__diff_test", "hta__ns_resolution_rank-0",
         "hta__nccl_data", "tracelens__b200_eager_rank0", "tracelens__h100_qwen1.5-0.5b"]

CHILD = r"""
import json, resource, sys, time
import tracekit
from tracekit.export import ExportOptions, export_perfetto
db, out = sys.argv[1], sys.argv[2]
t = time.perf_counter()
with tracekit.open(db) as st:
    align = {sid: 1_700_000_000_000_000_000 - start for sid, start in
             st.sql("SELECT source_id, start_ns FROM sources").fetchall()}
    r = export_perfetto(st, out, ExportOptions(align=align))
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall_s": wall, "export_s": r.seconds, "cpu_s": ru.ru_utime + ru.ru_stime, "slices": r.slices, "flows": r.flows,
                  "counters": r.counter_samples, "lanes": r.extra_lanes, "bytes": r.bytes_written,
                  "maxrss_mb": ru.ru_maxrss / 1024}))
"""


def build(db: Path, target: int) -> int:
    from tracekit.store import Store

    files = [REALWORLD / f"{n}.json.gz" for n in ORDER]
    files = [f for f in files if f.exists()]
    if not files:
        sys.exit(f"no real-world Kineto traces under {REALWORLD}")
    total = 0
    with Store(db, replace=True) as st:
        i = 0
        while total < target:
            s = st.convert(files[i % len(files)])
            n = sum(v for k, v in s.converted.items() if k in ("api_calls", "events", "kernels", "memops", "syncs"))
            total += n
            print(f"  source {s.source_id}: {Path(s.path).name}: {n:,} rows (total {total:,})", flush=True)
            i += 1
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", type=Path, default=Path("/tmp/tk_bench_500k.duckdb"))
    ap.add_argument("--target", type=int, default=500_000)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--engine", action="store_true", help="also load the outputs into trace processor")
    ap.add_argument("--out-dir", type=Path, default=Path("/tmp"))
    a = ap.parse_args()
    if a.rebuild or not a.db.exists():
        print(f"building {a.db} ...")
        t = time.perf_counter()
        rows = build(a.db, a.target)
        print(f"built: {rows:,} rows in {time.perf_counter() - t:.1f} s")
    import tracekit

    with tracekit.open(a.db) as st:
        rows = st.sql("SELECT (SELECT count(*) FROM api_calls) + (SELECT count(*) FROM events) + "
                      "(SELECT count(*) FROM kernels) + (SELECT count(*) FROM memops) + "
                      "(SELECT count(*) FROM syncs)").fetchall()[0][0]
        nsrc = st.sql("SELECT count(*) FROM sources").fetchall()[0][0]
    print(f"store {a.db}: {rows:,} rows in {nsrc} sources ({a.db.stat().st_size / 1e6:.0f} MB); "
          f"{os.cpu_count()} CPUs")
    print(f"load average before: {os.getloadavg()[0]:.1f} (the figures are for an idle machine only "
          "when it is near 0)")
    print(f"{'format':10} {'wall s':>7} {'export s':>9} {'CPU s':>6} {'peak RSS MB':>12} {'MB out':>8} {'slices':>9} "
          f"{'flows':>8} {'ev/s':>9}" + ("  engine load" if a.engine else ""))
    for ext in ("json", "json.gz", "pftrace"):
        out = a.out_dir / f"tk_bench.{ext}"
        p = subprocess.run([sys.executable, "-c", CHILD, str(a.db), str(out)], capture_output=True, text=True)
        if p.returncode:
            sys.exit(p.stderr)
        r = json.loads(p.stdout.strip().splitlines()[-1])
        line = (f"{ext:10} {r['wall_s']:7.2f} {r['export_s']:9.2f} {r['cpu_s']:6.1f} {r['maxrss_mb']:12.0f} "
                f"{r['bytes'] / 1e6:8.1f} {r['slices']:9,} {r['flows']:8,} {r['slices'] / r['export_s']:9,.0f}")
        if a.engine:
            from tracekit.export.engine import check_trace

            e = check_trace(out)
            ok = (not e["bad_stats"] and e["slices"] == r["slices"] and e["flows"] == r["flows"]
                  and not e["open_slices"])
            line += f"  {e['load_ms'] / 1000:.1f} s, {'clean' if ok else 'PROBLEM ' + str(e)}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
