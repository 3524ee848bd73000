#!/usr/bin/env python3
"""tracekit performance benchmark: scaled inputs from real captures, tracekit and HTA side by side.

    python bench/run.py                                   # everything, default sizes
    python bench/run.py --kineto /tmp/big/decode_0p5b_s64.json.gz   # a real ~500k-event capture
    python bench/run.py --only kineto --repeat 5          # one case

Cases (each job runs in its own process; wall time, CPU time and peak RSS are that process's,
peak RSS as the kernel's ru_maxrss, which is why inputs are built in a child process: see
`measure`; figures are medians over --repeat runs). A query's result is answered as `tracekit
sql` shows it (`Store.head`: the first 100 rows kept, all rows counted as they stream past);
issue24 and nsysai also run the job with each result fetched whole into one Arrow table:

  kineto    the ~500k-event Kineto trace (--kineto, else fixtures/kineto/decode_b1.json.gz
            replicated to about --events events): tracekit convert + first `hotspots` and
            `idle_gaps` query in one process (the Python API), the same as three CLI commands
            (convert, sql hotspots, sql idle_gaps: walls summed, RSS the largest), and HTA
            (TraceAnalysis load + idle-time breakdown + kernel breakdown) when its interpreter is
            there (--hta-python; HTA is never a tracekit dependency: see bench/README.md).
  kineto10  the same trace replicated --scale times (shifted timestamps, fresh ids): tracekit
            convert alone at 1x and at --scale x (the scaling target), then --scale x with the
            two queries once.
  nsys      fixtures/nsys/decode_b1.sqlite replicated to --nsys-kernels kernel rows: tracekit
            convert + `hotspots` + `api_summary`.
  nsysai    fixtures/nsys/decode_b1.sqlite replicated to --nsysai-kernels kernel rows: tracekit
            convert + `hotspots` + `idle_gaps` against nsys-ai (`--nsysai`, an nsys-ai
            executable of its own virtual environment: `skill run top_kernels` and `skill run
            gpu_idle_gaps`, two processes: walls and CPU summed, RSS the larger), the same
            questions of the same export. Offline, nsys-ai cannot fetch DuckDB's sqlite_scanner
            extension and falls back to Python's sqlite3 (it says so on stderr) after failed
            download attempts: its wall time includes that wait, so compare CPU time too.
  views     every view on the `kineto` store: warm median of 5 (SELECT * into Arrow).
  issue24   issue 24's targets side by side, not in the default set: tracekit convert + `hotspots`
            + `idle_gaps` in one process (<= 1.5 s wall; its phases printed: imports, scan +
            insert, insert calls, nesting, persisting the views, checkpoint, each query) against
            HTA on the same trace (>= 10x faster, <= 0.3x its peak RSS), the slowest view warm on
            that store (<= 100 ms each; every view over it listed), and the `nsysai` case (nsys-ai
            and tracekit on the same nsys export). With --kineto /tmp/big/decode_0p5b_s64.json.gz.
  startup   `tracekit --version` and `tracekit views`.
  ranks     64 ranks made from the real 2-rank DDP capture (bench/ranks.py): `tracekit convert`
            of the 64 files with --jobs 1 and --jobs 2 (wall, peak RSS of all its processes),
            then rank_imbalance, overlap, idle_gaps, hotspots, gpu_utilization over the store
            and over its partitioned Parquet export (first and warm). Not in the default set.

Inputs are built once into --work (default /tmp/tracekit-bench) and reused.  Targets are those
of issue 8; the last column says whether each was met in this run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import inputs  # noqa: E402
import ranks  # noqa: E402

JOB = str(HERE / "_job.py")
PARENT_RSS_MAX_MB = 150
Q_HOT = "SELECT * FROM hotspots"
Q_IDLE = "SELECT * FROM idle_gaps"
Q_API = "SELECT * FROM api_summary"


def build_input(py: str, kind: str, *args) -> None:
    """Build a scaled input (bench/inputs.py) in its own process: see ``measure``."""
    subprocess.run([py, str(HERE / "inputs.py"), kind, *map(str, args)], check=True, cwd=REPO,
                   stdout=subprocess.DEVNULL)


def measure(cmd: list[str], cwd: Path = REPO) -> dict:
    """Run cmd; wall, CPU (user + sys) and peak RSS (MB) of that process (and its children).

    Linux carries a process's peak RSS over fork and exec: a job started by a parent that once held
    X MB reports at least X.  This process therefore builds nothing big itself (inputs are built in
    their own process) and refuses to measure once it holds more than PARENT_RSS_MAX_MB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if own > PARENT_RSS_MAX_MB:
        raise RuntimeError(f"bench/run.py itself peaked at {own:.0f} MB: the jobs' peak RSS would "
                           f"read at least that; build big inputs in a child process")
    t = time.perf_counter()
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=null, cwd=cwd)
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    if p.returncode:
        raise RuntimeError(f"{' '.join(cmd)} exited with {p.returncode}")
    last = out.decode().strip().splitlines()[-1] if out.strip() else "{}"
    try:
        info = json.loads(last)
    except ValueError:
        info = {"out": last}
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024, "info": info}


def median_of(runs: list[dict]) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in ("wall", "cpu", "rss_mb")} | {
        "n": len(runs), "walls": [round(r["wall"], 2) for r in runs], "info": runs[-1]["info"]}


def repeat(cmd_or_fn, n: int) -> dict:
    runs = [cmd_or_fn() if callable(cmd_or_fn) else measure(cmd_or_fn) for _ in range(n)]
    return median_of(runs)


class Report:
    def __init__(self):
        self.rows: list[tuple] = []

    def add(self, case, tool, m, hta=None, target="", met=None):
        ratio_t = ratio_m = ""
        if hta:
            ratio_t = f"{hta['wall'] / m['wall']:.1f}x faster"
            ratio_m = f"{m['rss_mb'] / hta['rss_mb']:.2f}x"
        self.rows.append((case, tool, f"{m['wall']:.2f}", f"{m['cpu']:.2f}", f"{m['rss_mb']:.0f}",
                          ratio_t, ratio_m, target, "" if met is None else ("yes" if met else "NO")))
        print(f"  {case} / {tool}: wall {m['wall']:.2f} s (runs {m.get('walls')}), cpu {m['cpu']:.2f} s, "
              f"peak RSS {m['rss_mb']:.0f} MB {ratio_t} {target} {'' if met is None else ('met' if met else 'NOT met')}",
              flush=True)

    def print(self):
        head = ("case", "tool", "wall s", "cpu s", "peak RSS MB", "vs HTA (time)", "vs HTA (RSS)",
                "target", "met")
        rows = [head] + self.rows
        w = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
        print()
        for k, r in enumerate(rows):
            print("| " + " | ".join(str(c).ljust(w[i]) for i, c in enumerate(r)) + " |")
            if k == 0:
                print("|" + "|".join("-" * (x + 2) for x in w) + "|")


def tracekit_cli(py: str, src: Path, db: Path) -> dict:
    """convert, sql hotspots, sql idle_gaps as three CLI processes: walls summed, RSS max."""
    cli = [py, "-m", "tracekit"]
    parts = [measure(cli + ["convert", str(src), "--db", str(db), "--replace", "-q"]),
             measure(cli + ["sql", Q_HOT, "--db", str(db)]),      # the default table view (100 rows)
             measure(cli + ["sql", Q_IDLE, "--db", str(db)])]
    return {"wall": sum(p["wall"] for p in parts), "cpu": sum(p["cpu"] for p in parts),
            "rss_mb": max(p["rss_mb"] for p in parts), "info": {"walls": [p["wall"] for p in parts]}}


def phases(info: dict) -> str:
    """The per-phase line of a `_job.py tracekit` job (seconds)."""
    keys = ("import_s", "scan_insert_s", "insert_s", "nesting_s", "persist_s", "finish_s")
    q = [f"{k.removeprefix('query SELECT * FROM ')} {v[0]:.2f}" for k, v in info.items() if k.startswith("query ")]
    return ", ".join(f"{k.removesuffix('_s')} {info[k]:.2f}" for k in keys if k in info) + (
        ", queries: " + ", ".join(q) if q else "")


def issue24(rep: Report, py: str, a, trace: Path, db: Path, work: Path) -> None:
    """Issue 24's targets, one run: tracekit (convert + hotspots + idle_gaps, one process) <= 1.5 s
    wall, >= 10x faster than HTA (load + idle-time + kernel breakdown) at <= 0.3x its peak RSS;
    every view <= 100 ms warm on that store. nsys-ai is the `nsysai` case (added by main)."""
    case = "issue 24: " + trace.name
    # each result answered as `tracekit sql` shows it (the first 100 rows, all counted as they
    # stream); then, for reference, each fetched whole into Arrow (idle_gaps: 114 MB of names)
    tk = repeat([py, JOB, "tracekit", str(trace), str(db), Q_HOT, Q_IDLE], a.repeat)
    print(f"  tracekit phases (last run, wall s): {phases(tk['info'])}", flush=True)
    whole = repeat([py, JOB, "tracekit-whole", str(trace), str(db), Q_HOT, Q_IDLE], a.repeat)
    hta = None
    if Path(a.hta_python).exists():
        hta_dir = work / "hta_trace"
        shutil.rmtree(hta_dir, ignore_errors=True)
        hta_dir.mkdir()
        os.symlink(trace.resolve(), hta_dir / "rank-0.json.gz")
        hta = repeat([a.hta_python, JOB, "hta", str(hta_dir)], a.hta_repeat or a.repeat)
        rep.add(case, "HTA load+idle+kernel", hta)
    else:
        print(f"HTA: not run ({a.hta_python} not found; see bench/README.md to install it)")
    rep.add(case, "tracekit convert+hotspots+idle_gaps", tk, hta, "<= 1.5 s wall", tk["wall"] <= 1.5)
    rep.add(case, "the same, results fetched whole (.to_arrow_table())", whole, hta)
    if hta:
        print(f"  tracekit vs HTA: {hta['wall'] / tk['wall']:.1f}x less wall, {hta['cpu'] / tk['cpu']:.1f}x less "
              f"CPU, {tk['rss_mb'] / hta['rss_mb']:.2f}x the peak RSS", flush=True)
        rep.add(case, "tracekit vs HTA: time", tk, hta, ">= 10x faster", hta["wall"] / tk["wall"] >= 10)
        rep.add(case, "tracekit vs HTA: peak RSS", tk, hta, "<= 0.3x RSS", tk["rss_mb"] <= 0.3 * hta["rss_mb"])
    v = measure([py, JOB, "views", str(db), str(max(3, a.repeat))])["info"]
    slow = sorted(((x["warm_median_s"], k) for k, x in v.items() if x["warm_median_s"] > 0.1), reverse=True)
    print("  views over 100 ms warm (each in its own session; wall, CPU in brackets: a loaded machine "
          "stretches wall time): " + (", ".join(f"{k} {t * 1000:.0f} ms ({v[k]['warm_cpu_median_s'] * 1000:.0f})"
                                                for t, k in slow) or "none"), flush=True)
    first = sorted(((x["first_s"], k) for k, x in v.items() if x["first_s"] > 0.1), reverse=True)
    print(f"  views over 100 ms on their first query (a session's first, as one `tracekit sql`: nothing "
          f"kept yet): {len(first)} of {len(v)}: " + ", ".join(f"{k} {t * 1000:.0f} ms" for t, k in first), flush=True)
    second = sorted(((x["second_s"], k) for k, x in v.items() if x["second_s"] > 0.1), reverse=True)
    print(f"  views over 100 ms on their second query (the one that keeps the shared views it names or "
          f"reads): {len(second)} of {len(v)}: " + ", ".join(f"{k} {t * 1000:.0f} ms" for t, k in second), flush=True)
    worst = max(v.items(), key=lambda kv: kv[1]["warm_median_s"])
    rep.add(case, f"slowest view warm: {worst[0]}",
            {"wall": worst[1]["warm_median_s"], "cpu": float("nan"), "rss_mb": float("nan")},
            None, f"<= 0.1 s each ({len(slow)} of {len(v)} over)", not slow)


_SPEED = """
import time, duckdb
con = duckdb.connect()
con.execute("SET threads = 2")
con.execute("CREATE TABLE t AS SELECT range AS i FROM range(20000000)")
loop, scan, scan_cpu = [], [], []
for _ in range(3):
    t, s = time.perf_counter(), 0
    for i in range(2_000_000):
        s += i * i
    loop.append(time.perf_counter() - t)
    t, c = time.perf_counter(), time.process_time()
    con.execute("SELECT sum(hash(i) % 1000) FROM t").fetchall()
    scan.append(time.perf_counter() - t)
    scan_cpu.append(time.process_time() - c)
print(f"Python loop {min(loop):.3f} s, DuckDB 2-thread scan {min(scan):.3f} s ({min(scan_cpu):.3f} s CPU)")
"""


def machine_speed() -> str:
    """This machine's speed now, for comparing runs: the load average misses the CPU a VM loses to
    other tenants, and on 2 cores that moves every timing. A fixed pure-Python loop (one core) and
    a DuckDB scan on 2 threads, the best of 3 each (seconds; lower is faster), in a child process
    (its 160 MB table would otherwise count in every job's peak RSS: see ``measure``)."""
    r = subprocess.run([sys.executable, "-c", _SPEED], capture_output=True, text=True)
    return "machine speed: " + (r.stdout.strip() or f"not measured ({r.stderr.strip()[-200:]})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kineto", type=Path, help="a real ~500k-event Kineto trace (default: replicate the fixture)")
    ap.add_argument("--events", type=int, default=500_000, help="events of the replicated Kineto trace")
    ap.add_argument("--scale", type=int, default=10, help="copies for the kineto10 case")
    ap.add_argument("--nsys-kernels", type=int, default=10_000_000)
    ap.add_argument("--work", type=Path, default=Path("/tmp/tracekit-bench"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hta-repeat", type=int, default=None, help="runs of HTA (default: --repeat)")
    ap.add_argument("--hta-python", default="/tmp/htavenv/bin/python",
                    help="interpreter of a virtual environment with HTA (traceinsight) installed")
    ap.add_argument("--nsysai-kernels", type=int, default=1_000_000)
    ap.add_argument("--nsysai", default="/tmp/nsysai/bin/nsys-ai",
                    help="the nsys-ai executable of a virtual environment with nsys-ai installed")
    ap.add_argument("--only", nargs="*",
                    choices=["kineto", "kineto10", "nsys", "nsysai", "views", "startup", "ranks", "issue24"])
    a = ap.parse_args()
    py = sys.executable
    only = set(a.only or ["kineto", "kineto10", "nsys", "views", "startup"])
    work = a.work
    work.mkdir(parents=True, exist_ok=True)
    rep = Report()
    print(f"tracekit benchmark: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
          f"work dir {work}", flush=True)
    print(machine_speed(), flush=True)
    # tracekit's bytecode compiled once, as `pip install` does for an installed package (and for
    # the peers in their environments): an editable checkout under PYTHONDONTWRITEBYTECODE=1
    # would otherwise compile every module in every measured process (~0.05 s each)
    subprocess.run([py, "-m", "compileall", "-q", str(REPO / "tracekit")], cwd=REPO,
                   stdout=subprocess.DEVNULL, check=False)
    scanner = subprocess.run(
        [py, "-c", "import tracekit.adapters.kineto as k; print('compiled' if k.SCAN else 'pure Python')"],
        capture_output=True, text=True, cwd=REPO).stdout.strip()
    print(f"Kineto reader: {scanner} scanner", flush=True)

    # -- inputs ------------------------------------------------------------------------------
    fixture = REPO / "fixtures" / "kineto" / "decode_b1.json.gz"
    if a.kineto:
        trace = a.kineto
        print(f"kineto: real capture {trace} ({trace.stat().st_size / 1e6:.1f} MB gzipped)")
    else:
        per = 24392  # events in the fixture
        copies = max(1, round(a.events / per))
        trace = work / f"kineto_decode_b1_x{copies}_v{inputs.VERSION}.json.gz"
        if not trace.exists():
            print(f"building {trace} ({copies} copies of {fixture.name}) ...", flush=True)
            build_input(py, "kineto", fixture, trace, copies)
        print(f"kineto: {trace} (the fixture replicated {copies}x; pass --kineto for a real capture)")
    big = work / f"{trace.name.split('.json')[0]}_x{a.scale}_v{inputs.VERSION}.json.gz"
    if "kineto10" in only and not big.exists():
        print(f"building {big} ({a.scale} copies) ...", flush=True)
        build_input(py, "kineto", trace, big, a.scale)
    nsys_db = work / f"nsys_decode_b1_{a.nsys_kernels // 1000}k_v{inputs.VERSION}.sqlite"
    if "nsys" in only and not nsys_db.exists():
        print(f"building {nsys_db} ...", flush=True)
        build_input(py, "nsys", REPO / "fixtures" / "nsys" / "decode_b1.sqlite", nsys_db, a.nsys_kernels)

    nsysai_db = work / f"nsys_decode_b1_{a.nsysai_kernels // 1000}k_v{inputs.VERSION}.sqlite"
    if "issue24" in only:  # issue 24's figures: the kineto trace, HTA, warm views, nsys-ai
        if Path(a.nsysai).exists():
            only |= {"nsysai"}
        else:  # (without nsys-ai, its case would only time tracekit: building its 1 M-kernel input takes minutes)
            print(f"nsys-ai: not run ({a.nsysai} not found; see bench/README.md to install it)")
    if "nsysai" in only and not nsysai_db.exists():
        print(f"building {nsysai_db} ...", flush=True)
        build_input(py, "nsys", REPO / "fixtures" / "nsys" / "decode_b1.sqlite", nsysai_db, a.nsysai_kernels)

    # -- kineto ------------------------------------------------------------------------------
    db = work / "kineto.duckdb"
    hta = None
    if "issue24" in only:
        issue24(rep, py, a, trace, db, work)
    if "kineto" in only or "views" in only:
        tk = repeat([py, JOB, "tracekit", str(trace), str(db), Q_HOT, Q_IDLE], a.repeat)
    if "kineto" in only:
        hta_dir = work / "hta_trace"
        if Path(a.hta_python).exists():
            shutil.rmtree(hta_dir, ignore_errors=True)
            hta_dir.mkdir()
            os.symlink(trace.resolve(), hta_dir / "rank-0.json.gz")
            hta = repeat([a.hta_python, JOB, "hta", str(hta_dir)], a.hta_repeat or a.repeat)
            rep.add("kineto ~500k events", "HTA load+idle+kernel", hta)
        else:
            print(f"HTA: not run ({a.hta_python} not found; see bench/README.md to install it)")
        rep.add("kineto ~500k events", "tracekit API: convert+hotspots+idle_gaps", tk, hta,
                "<= 2 s, <= 500 MB" + (", >= 8x faster, < 0.4x RSS of HTA" if hta else ""),
                tk["wall"] <= 2 and tk["rss_mb"] <= 500 and (
                    hta is None or (hta["wall"] / tk["wall"] >= 8 and tk["rss_mb"] < 0.4 * hta["rss_mb"])))
        cli = repeat(lambda: tracekit_cli(py, trace, work / "kineto_cli.duckdb"), a.repeat)
        rep.add("kineto ~500k events", "tracekit CLI: 3 commands", cli, hta)
        if scanner == "compiled":  # the same API case without the compiled scanner
            pure = repeat(["env", "TRACEKIT_KINETO_SCAN=0", py, JOB, "tracekit", str(trace), str(db),
                           Q_HOT, Q_IDLE], a.repeat)
            rep.add("kineto ~500k events", "API, pure-Python reader", pure, hta)
    if "kineto10" in only:
        # the scaling target is about conversion: convert alone at 1x and at 10x, same settings
        one = repeat([py, JOB, "tracekit", str(trace), str(db)], a.repeat)
        rep.add("kineto 1x", "tracekit API: convert", one)
        tk10 = repeat([py, JOB, "tracekit", str(big), str(work / "kineto10.duckdb")], a.repeat)
        rep.add(f"kineto {a.scale}x", "tracekit API: convert", tk10, None,
                f"<= {a.scale}x the 1x time ({a.scale * one['wall']:.1f} s), < 1 GB",
                tk10["wall"] <= a.scale * one["wall"] and tk10["rss_mb"] < 1024)
        print(f"  {a.scale}x / 1x convert: {tk10['wall'] / one['wall']:.2f}x the time, "
              f"{tk10['info'].get('rows', 0) / max(1, one['info'].get('rows', 1)):.2f}x the rows", flush=True)
        q10 = repeat([py, JOB, "tracekit", str(big), str(work / "kineto10.duckdb"), Q_HOT, Q_IDLE], 1)
        rep.add(f"kineto {a.scale}x", "tracekit API: convert+hotspots+idle_gaps", q10)

    # -- nsys --------------------------------------------------------------------------------
    if "nsys" in only:
        ns = repeat([py, JOB, "tracekit", str(nsys_db), str(work / "nsys.duckdb"), Q_HOT, Q_API],
                    max(1, a.repeat // 2))
        rep.add(f"nsys {a.nsys_kernels / 1e6:g}M kernels", "tracekit API: convert+hotspots+api_summary",
                ns, None, "<= 15 s (convert + hotspots)",
                ns["info"]["convert_s"] + ns["info"][f"query {Q_HOT}"][0] <= 15)

    # -- nsys-ai, same export, same questions ------------------------------------------------
    if "nsysai" in only:
        case = f"nsys {a.nsysai_kernels / 1e6:g}M kernels"
        ai = None
        if Path(a.nsysai).exists():
            def nsys_ai():
                parts = [measure([a.nsysai, "skill", "run", skill, str(nsysai_db), "--no-cache"])
                         for skill in ("top_kernels", "gpu_idle_gaps")]
                return {"wall": sum(p["wall"] for p in parts), "cpu": sum(p["cpu"] for p in parts),
                        "rss_mb": max(p["rss_mb"] for p in parts), "info": {}}
            ai = repeat(nsys_ai, a.repeat)
            rep.add(case, "nsys-ai top_kernels+gpu_idle_gaps (sqlite3 fallback)", ai)
        else:
            print(f"nsys-ai: not run ({a.nsysai} not found; see bench/README.md to install it)")
        tk = repeat([py, JOB, "tracekit", str(nsysai_db), str(work / "nsysai.duckdb"), Q_HOT, Q_IDLE], a.repeat)
        rep.add(case, "tracekit API: convert+hotspots+idle_gaps", tk)
        whole = repeat([py, JOB, "tracekit-whole", str(nsysai_db), str(work / "nsysai.duckdb"), Q_HOT, Q_IDLE],
                       a.repeat)
        rep.add(case, "the same, results fetched whole (.to_arrow_table())", whole)
        if ai:
            print(f"  nsys-ai vs tracekit: nsys-ai takes {ai['wall'] / tk['wall']:.1f}x tracekit's wall and "
                  f"{ai['cpu'] / tk['cpu']:.1f}x its CPU; tracekit's peak RSS is {tk['rss_mb'] / ai['rss_mb']:.2f}x "
                  "nsys-ai's (its queries' results are outside the memory budget)", flush=True)

    # -- warm views --------------------------------------------------------------------------
    if "views" in only:
        v = measure([py, JOB, "views", str(db), "5"])["info"]
        slow = {k: x for k, x in v.items() if x["warm_median_s"] > 0.1}
        print("\nwarm view queries on the kineto store (SELECT * into Arrow, median of 5):")
        for k, x in sorted(v.items(), key=lambda kv: -kv[1]["warm_median_s"]):
            print(f"  {k:26s} {x['warm_median_s'] * 1000:8.1f} ms   first {x['first_s'] * 1000:8.1f} ms   "
                  f"second {x['second_s'] * 1000:8.1f} ms   rows {x['rows']}")
        worst = max(v.items(), key=lambda kv: kv[1]["warm_median_s"])
        rep.add("views, kineto store", f"slowest: {worst[0]}",
                {"wall": worst[1]["warm_median_s"], "cpu": float("nan"), "rss_mb": float("nan")},
                None, f"<= 0.1 s each ({len(slow)} of {len(v)} over)", not slow)

    # -- many ranks (bench/ranks.py) --------------------------------------------------------
    if "ranks" in only:
        ranks.run_case(rep, py, work, a.repeat)

    # -- start-up ----------------------------------------------------------------------------
    if "startup" in only:
        for args in (["--version"], ["views"]):
            m = repeat([py, "-m", "tracekit", *args], 5)
            rep.add("CLI start-up", "tracekit " + " ".join(args), m, None, "<= 0.5 s", m["wall"] <= 0.5)

    rep.print()
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f} (timings on a shared machine vary); "
          + machine_speed())
    return 0


if __name__ == "__main__":
    sys.exit(main())
