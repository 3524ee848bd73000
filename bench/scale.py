#!/usr/bin/env python3
"""Scale curves: ranks (1 → 256 replicas of the real 2-rank DDP capture) × engine (DuckDB, Spark
local), and what a 1,000-rank, 200 GB job would need (docs/scaling.md, "Ranks × engines").

    python bench/scale.py [--max-ranks 256] [--engines duckdb spark] [--work /tmp/tracekit-scale]
                          [--big /tmp/big/decode_0p5b_s64.json.gz] [--repeat 1]

For each world size W = 1, 4, 16, 64, 256 (up to --max-ranks), the rank files are made by bench/ranks.py's
``replicate_ranks`` (rank r from fixtures/kineto/ddp_rank{r % 2}.json.gz, shifted ids, pids and
times), then, each step in its own process tree (wall; CPU and peak RSS summed over the tree,
sampled every 20 ms from /proc: the JVM and Spark's Python workers included):

* **duckdb**: ``tracekit convert --jobs 2 --parquet DIR --partitioned RANKS`` (the store and the
  dataset), then the multi-rank views (``rank_imbalance``, ``overlap``, ``idle_gaps``,
  ``hotspots``, ``gpu_utilization``) over the partitioned dataset in a fresh process;
* **spark**: ``tracekit convert --engine spark --parquet DIR RANKS`` (one Spark task per rank),
  then the same views through ``tracekit.spark.SparkEngine`` (local[*]) in a fresh process, the
  session's start included.

``--big``: the per-byte figures for the extrapolation come from converting one large real capture
(the 179 MB one by default, see bench/README.md): CPU seconds and Parquet bytes per input MB and the
peak RSS of one conversion. The estimate for 1,000 ranks of 200 MB (200 GB) is printed at the end:
total CPU, wall on N cores, the dataset's size, and the memory per concurrent conversion.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from ranks import VIEWS, measure_tree, replicate_ranks  # noqa: E402


def _views_job(engine: str, dataset: str) -> dict:
    """In a child process: open the dataset, run each multi-rank view once; times and rows."""
    t0 = time.perf_counter()
    out: dict = {}
    if engine == "duckdb":
        from tracekit.store import open_parquet

        st = open_parquet(dataset)
        run = lambda q: st.sql(q).to_arrow_table()  # noqa: E731
        close = st.close
    else:
        from tracekit.spark import SparkEngine

        eng = SparkEngine(dataset)
        run, close = eng.query, eng.close
    out["open_s"] = time.perf_counter() - t0
    for v in VIEWS:
        t = time.perf_counter()
        n = run(f"SELECT * FROM {v}").num_rows
        out[v] = [round(time.perf_counter() - t, 3), n]
    close()
    out["total_s"] = time.perf_counter() - t0
    return out


def _dir_mb(d: Path) -> float:
    return sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) / 1e6


def _cli(*args) -> list[str]:
    return [sys.executable, "-m", "tracekit", *map(str, args)]


def point(engine: str, world: int, work: Path, repeat: int) -> dict:
    ranks = replicate_ranks(work / f"ranks{world}", world)
    in_mb = sum(p.stat().st_size for p in ranks) / 1e6
    ds = work / f"{engine}{world}"
    conv, views = [], []
    for _ in range(repeat):
        shutil.rmtree(ds, ignore_errors=True)
        if engine == "duckdb":
            db = work / f"store{world}.duckdb"
            cmd = _cli("convert", "--jobs", 2, "--replace", "-q", "--db", db, "--parquet", ds, "--partitioned",
                       *ranks)
        else:
            cmd = _cli("convert", "--engine", "spark", "--replace", "--parquet", ds, *ranks)
        conv.append(measure_tree(cmd))
        views.append(measure_tree([sys.executable, __file__, "_views", engine, str(ds)]))
    med = lambda runs, k: statistics.median(r[k] for r in runs)  # noqa: E731
    return {"engine": engine, "ranks": world, "input_gz_mb": round(in_mb, 1), "dataset_mb": round(_dir_mb(ds), 1),
            "convert_wall_s": med(conv, "wall"), "convert_cpu_s": med(conv, "cpu_tree"), "convert_rss_mb": med(conv, "rss_mb"),
            "views_wall_s": med(views, "wall"), "views_cpu_s": med(views, "cpu_tree"), "views_rss_mb": med(views, "rss_mb"),
            "views": views[-1]["info"]}


def big_rates(big: Path, work: Path) -> dict:
    """Per-input-MB figures from one large real capture (the extrapolation's base)."""
    import gzip

    with gzip.open(big) if big.suffix == ".gz" else open(big, "rb") as f:
        json_mb = sum(len(b) for b in iter(lambda: f.read(1 << 24), b"")) / 1e6
    ds = work / "big_dataset"
    shutil.rmtree(ds, ignore_errors=True)
    r = measure_tree(_cli("convert", "--replace", "-q", "--jobs", 1, "--db", work / "big.duckdb",
                          "--parquet", ds, "--partitioned", big))
    return {"json_mb": round(json_mb, 1), "cpu_s": r["cpu"], "wall_s": r["wall"], "rss_mb": r["rss_mb"],
            "dataset_mb": round(_dir_mb(ds), 1), "cpu_s_per_json_mb": r["cpu"] / json_mb,
            "dataset_mb_per_json_mb": _dir_mb(ds) / json_mb}


def extrapolate(rates: dict, ranks: int = 1000, rank_mb: float = 200.0, cores=(2, 64, 512)) -> list[str]:
    total_mb = ranks * rank_mb
    cpu = rates["cpu_s_per_json_mb"] * total_mb
    lines = [f"{ranks:,} ranks x {rank_mb:.0f} MB of JSON = {total_mb / 1e3:,.0f} GB, from the "
             f"{rates['json_mb']:.0f} MB capture's rates ({rates['cpu_s_per_json_mb'] * 1e3:.1f} ms CPU and "
             f"{rates['dataset_mb_per_json_mb'] * 100:.1f} % of its size as Parquet per JSON MB; "
             f"peak {rates['rss_mb']:.0f} MB for one conversion):",
             f"  conversion: {cpu / 3600:,.1f} CPU-hours in all; one task per rank, each under its memory budget"]
    for c in cores:
        lines.append(f"    on {c:>3} cores: {cpu / c / 60:8.1f} min wall, peak {c * rates['rss_mb'] / 1024:,.1f} GB "
                     f"(one conversion per core)")
    lines.append(f"  dataset: {rates['dataset_mb_per_json_mb'] * total_mb / 1e3:,.1f} GB of Parquet "
                 f"(partitioned by source: a view over a few ranks reads only theirs)")
    return lines


def main(argv: list[str]) -> None:
    if argv[:1] == ["_views"]:
        print(json.dumps(_views_job(argv[1], argv[2])))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-ranks", type=int, default=256)
    ap.add_argument("--engines", nargs="+", default=["duckdb", "spark"], choices=["duckdb", "spark"])
    ap.add_argument("--work", type=Path, default=Path("/tmp/tracekit-scale"))
    ap.add_argument("--big", type=Path, default=Path("/tmp/big/decode_0p5b_s64.json.gz"))
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", type=Path, help="also write every figure here")
    a = ap.parse_args(argv)
    a.work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYTHONPATH", str(REPO))
    worlds = [w for w in (1, 4, 16, 64, 256, 1024) if w <= a.max_ranks]
    print(f"# scale: {os.cpu_count()} CPUs, ranks {worlds}, engines {a.engines}, median of {a.repeat}")
    hdr = (f"{'engine':<7}{'ranks':>6}{'in gz MB':>9}{'parquet MB':>11}{'conv wall s':>12}{'conv CPU s':>11}"
           f"{'conv peak MB':>13}{'views wall s':>13}{'views CPU s':>12}{'views peak MB':>14}")
    print(hdr)
    rows = []
    for e in a.engines:
        for w in worlds:
            r = point(e, w, a.work, a.repeat)
            rows.append(r)
            print(f"{e:<7}{w:>6}{r['input_gz_mb']:>9.1f}{r['dataset_mb']:>11.1f}{r['convert_wall_s']:>12.2f}"
                  f"{r['convert_cpu_s']:>11.2f}{r['convert_rss_mb']:>13.0f}{r['views_wall_s']:>13.2f}{r['views_cpu_s']:>12.2f}"
                  f"{r['views_rss_mb']:>14.0f}", flush=True)
    rates = None
    if a.big.is_file():
        rates = big_rates(a.big, a.work)
        print()
        print("\n".join(extrapolate(rates)))
    else:
        print(f"\n(no {a.big}: no extrapolation; make the capture as bench/README.md says, or give --big)")
    if a.json:
        a.json.write_text(json.dumps({"points": rows, "big": rates}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
