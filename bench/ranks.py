#!/usr/bin/env python3
"""The `ranks` case of bench/run.py: a job of many ranks built from the real two-rank DDP capture.

    python bench/ranks.py build OUT_DIR [WORLD]     write rank0..rank{WORLD-1}.json.gz (default 64)
    python bench/ranks.py views STORE|PARQUET_DIR REPEAT   time the multi-rank views (one JSON line)
    python bench/ranks.py export STORE DIR          the partitioned Parquet export of a store
    python bench/ranks.py bench WORK REPEAT JOBS... the case alone, with those --jobs values
    python bench/run.py --only ranks                the case within the benchmark (--jobs 1 and 2)

``replicate_ranks`` makes rank r from ``fixtures/kineto/ddp_rank{r % 2}.json.gz`` (the real
2-rank DDP step, 388 kernels and 8 NCCL all-reduces a rank): distributedInfo says rank r of
WORLD (process group of all WORLD ranks), the NCCL args (``Rank``, ``Group size``, ``Process
Group Ranks``) agree, host pid and main-thread tid become ``10000 + r`` (the GPU is the capture's,
device 0 or 1), correlation / External / flow ids are shifted by
``r × 10^8``, and every timestamp by ``(r // 2) × 7 µs`` (so the collectives of the ranks arrive at
different times and `rank_imbalance` has skew to find).  The event text is otherwise the capture's.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import msgspec

REPO = Path(__file__).resolve().parents[1]
ID_STEP = 10**8
SHIFT_US = 7
VIEWS = ("rank_imbalance", "overlap", "idle_gaps", "hotspots", "gpu_utilization")

_IDS = re.compile(rb'"(ts|id|correlation|External id|external id)": (\d+)')


def _rank_text(raw: bytes, base_rank: int, r: int, world: int) -> bytes:
    base_pid = 771 + base_rank  # the host pid of the capture (771 rank 0, 772 rank 1)
    pid = 10000 + r
    shift_us, ids = (r // 2) * SHIFT_US, r * ID_STEP

    def sub(m):
        add = shift_us if m.group(1) == b"ts" else ids
        return b'"%s": %d' % (m.group(1), int(m.group(2)) + add)

    t = _IDS.sub(sub, raw)
    t = re.sub(rb'"(pid|tid)": %d\b' % base_pid, lambda m: b'"%s": %d' % (m.group(1), pid), t)
    t = re.sub(rb'"Rank": %d\b' % base_rank, b'"Rank": %d' % r, t)
    t = t.replace(b'"Group size": 2', b'"Group size": %d' % world)
    ranks = json.dumps(list(range(world))).encode()
    t = t.replace(b'"Process Group Ranks": "[0, 1]"', b'"Process Group Ranks": "%s"' % ranks)
    # distributedInfo (one JSON object near the top)
    m = re.search(rb'"distributedInfo": (\{.*?\}\]?, "nccl_version": "[^"]*"\})', t, re.S)
    info = msgspec.json.decode(m.group(1))
    info["rank"], info["world_size"] = r, world
    for pg in info.get("pg_config", []):
        pg["pg_size"], pg["ranks"] = world, list(range(world))
    t = t[:m.start(1)] + json.dumps(info).encode() + t[m.end(1):]
    return t.replace(b"/tmp/fx/ddp/ddp_rank%d.json" % base_rank, b"/tmp/fx/ddp/rank%d.json" % r)


def replicate_ranks(out_dir: Path, world: int = 64) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    base = {k: gzip.decompress((REPO / "fixtures" / "kineto" / f"ddp_rank{k}.json.gz").read_bytes())
            for k in (0, 1)}
    paths = []
    for r in range(world):
        p = out_dir / f"rank{r}.json.gz"
        if not p.exists():
            tmp = p.with_name(p.name + ".part")
            tmp.write_bytes(gzip.compress(_rank_text(base[r % 2], r % 2, r, world), 6))
            tmp.replace(p)
        paths.append(p)
    return paths


def time_views(target: str, repeat: int) -> dict:
    """First (fresh process) and warm (median of ``repeat``) time of each multi-rank view, over a
    DuckDB store or a partitioned Parquet dataset (a directory)."""
    t0 = time.perf_counter()
    from tracekit.store import Store, open_parquet

    st = open_parquet(target) if Path(target).is_dir() else Store(target, read_only=True)
    out = {"open_s": time.perf_counter() - t0}
    with st:
        for v in VIEWS:
            times = []
            for _ in range(repeat + 1):
                t = time.perf_counter()
                n = st.sql(f"SELECT * FROM {v}").to_arrow_table().num_rows
                times.append(time.perf_counter() - t)
            out[v] = {"first_s": times[0], "warm_median_s": statistics.median(times[1:]), "rows": n}
    return out


def measure_tree(cmd: list[str]) -> dict:
    """Run cmd; wall time, CPU time (user + sys, with its children) and peak memory: ``rss_mb`` is
    the peak of the summed RSS of the process and all its descendants (sampled every 20 ms from
    /proc; the figure that matters for a process pool), ``rss_max_proc_mb`` the kernel's
    ru_maxrss (the largest single process)."""
    ticks: dict[int, int] = {}  # CPU ticks (user + system) last seen of each process of the tree
    hz = os.sysconf("SC_CLK_TCK")

    def tree_rss(pid: int) -> int:
        total, stack = 0, [pid]
        while stack:
            p = stack.pop()
            try:
                with open(f"/proc/{p}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                ticks[p] = int(fields[11]) + int(fields[12])
                with open(f"/proc/{p}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1])
                            break
                with open(f"/proc/{p}/task/{p}/children") as f:
                    stack += [int(x) for x in f.read().split()]
            except (OSError, ValueError):
                pass
        return total

    t = time.perf_counter()
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=null)
        import threading

        peak = [0]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], tree_rss(p.pid))
                stop.wait(0.02)

        th = threading.Thread(target=sample, daemon=True)
        th.start()
        out = p.stdout.read()
        stop.set()  # before the wait: /proc of a finished process is gone
        th.join()
        _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status):
        raise RuntimeError(f"{' '.join(map(str, cmd[:4]))} ... exited with {os.waitstatus_to_exitcode(status)}")
    last = out.decode().strip().splitlines()[-1] if out.strip() else "{}"
    try:
        info = json.loads(last)
    except ValueError:
        info = {"out": last}
    # cpu: the process and the children it waited for (the kernel's count); cpu_tree: every
    # process of the tree as last sampled (also a JVM that pyspark starts and never waits for)
    cpu = ru.ru_utime + ru.ru_stime
    return {"wall": wall, "cpu": cpu, "cpu_tree": max(cpu, sum(ticks.values()) / hz), "rss_mb": peak[0] / 1024,
            "rss_max_proc_mb": ru.ru_maxrss / 1024, "info": info}


def _median(runs: list[dict]) -> dict:
    keys = ("wall", "cpu", "rss_mb", "rss_max_proc_mb")
    return {k: statistics.median(r[k] for r in runs) for k in keys} | {
        "n": len(runs), "walls": [round(r["wall"], 2) for r in runs], "info": runs[-1]["info"]}


def run_case(rep, py: str, work: Path, repeat: int, world: int = 64, jobs=(1, 2)) -> dict:
    """The `ranks` case: convert the WORLD rank files with each --jobs (median of ``repeat``),
    check the stores are the same, export the partitioned Parquet dataset, and time the
    multi-rank views over the store and over the dataset.  Adds rows to ``rep`` (run.Report)."""
    # built in a child process: this one's peak RSS would carry over to every job it starts
    subprocess.run([py, __file__, "build", str(work / f"ranks{world}"), str(world)], check=True,
                   stdout=subprocess.DEVNULL)
    files = [work / f"ranks{world}" / f"rank{r}.json.gz" for r in range(world)]
    mb = sum(p.stat().st_size for p in files) / 1e6
    print(f"ranks: {world} files ({mb:.1f} MB gzipped) in {work / f'ranks{world}'}", flush=True)
    dbs = {}
    out: dict = {}
    for j in jobs:
        db = work / f"ranks{world}_jobs{j}.duckdb"
        cmd = [py, "-m", "tracekit", "convert", *map(str, files), "--db", str(db), "--replace",
               "-q", "--jobs", str(j)]
        m = _median([measure_tree(cmd) for _ in range(repeat)])
        dbs[j] = db
        out[f"convert_jobs{j}"] = m
        rep.add(f"{world} ranks convert", f"tracekit convert --jobs {j}", m)
        print(f"    (largest single process {m['rss_max_proc_mb']:.0f} MB; load average "
              f"{os.getloadavg()[0]:.1f})", flush=True)
    first = dbs[jobs[0]]
    for j, db in dbs.items():
        if db != first:
            same = subprocess.run([py, str(Path(__file__).parent / "samestore.py"), str(first), str(db)],
                                  capture_output=True, text=True)
            print(f"  store of --jobs {jobs[0]} vs --jobs {j}: {same.stdout.strip().splitlines()[-1]}")
    pq = work / f"ranks{world}.parquet"
    shutil.rmtree(pq, ignore_errors=True)
    m = measure_tree([py, __file__, "export", str(first), str(pq)])
    out["export"] = m
    print(f"  partitioned Parquet export: {m['wall']:.2f} s, {m['info'].get('bytes', 0) / 1e6:.1f} MB "
          f"(store {first.stat().st_size / 1e6:.1f} MB)", flush=True)
    for label, target in (("DuckDB store", first), ("Parquet dataset", pq)):
        v = [measure_tree([py, __file__, "views", str(target), "5"])["info"] for _ in range(repeat)]
        out[f"views {label}"] = v
        print(f"  views over the {world}-rank {label} (first: a fresh process, median of {repeat}; "
              f"warm: median of 5 after it; open: {statistics.median(x['open_s'] for x in v) * 1000:.0f} ms):")
        worst = (None, 0.0)
        for name in VIEWS:
            fs = statistics.median(x[name]["first_s"] for x in v)
            ws = statistics.median(x[name]["warm_median_s"] for x in v)
            print(f"    {name:18s} first {fs * 1000:8.1f} ms   warm {ws * 1000:8.1f} ms   rows {v[-1][name]['rows']}")
            worst = max(worst, (name, ws), key=lambda x: x[1])
        rep.add(f"{world} ranks views", f"{label}: slowest warm ({worst[0]})",
                {"wall": worst[1], "cpu": float("nan"), "rss_mb": float("nan")}, None,
                "<= 0.1 s each", worst[1] <= 0.1)
    return out


def main(argv: list[str]) -> None:
    if argv[:1] == ["build"]:
        ps = replicate_ranks(Path(argv[1]), int(argv[2]) if len(argv) > 2 else 64)
        print(json.dumps({"files": len(ps), "bytes": sum(p.stat().st_size for p in ps)}))
    elif argv[:1] == ["bench"]:
        import run

        rep = run.Report()
        print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)
        run_case(rep, sys.executable, Path(argv[1]), int(argv[2]), jobs=tuple(int(j) for j in argv[3:]) or (1, 2))
        rep.print()
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    elif argv[:1] == ["export"]:
        from tracekit.store import Store

        with Store(argv[1], read_only=True, sandbox=False) as st:  # export writes files
            st.export_parquet(argv[2], partitioned=True)
        print(json.dumps({"bytes": sum(p.stat().st_size for p in Path(argv[2]).rglob("*.parquet"))}))
    elif argv[:1] == ["views"]:
        print(json.dumps(time_views(argv[1], int(argv[2]))))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
