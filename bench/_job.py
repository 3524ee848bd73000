"""One measured job of bench/run.py, run in its own process (so its wall time and peak memory are
its own).  Prints one JSON line of phase timings.

    python bench/_job.py tracekit INPUT DB QUERY...   convert INPUT into a fresh DB, then each query,
                                                      answered as `tracekit sql` shows it (Store.head:
                                                      the first 100 rows, all rows counted as they
                                                      stream past)
    python bench/_job.py tracekit-whole INPUT DB QUERY...   the same, each result fetched whole
                                                      into one Arrow table (the Python API's
                                                      .to_arrow_table())
    python bench/_job.py sql DB QUERY                 one query on an existing store (read-only)
    python bench/_job.py views DB REPEAT              every view: a first and a second query, then REPEAT warm
    python bench/_job.py hta TRACE_DIR                HTA: load + idle-time + kernel breakdown

The `hta` job imports only HTA (run it with the interpreter of HTA's own environment).
"""

from __future__ import annotations

import json
import sys
import time


def _timed(mod, name: str, acc: dict, key: str) -> None:
    """Wrap mod.name so that the wall time of its calls (on any thread) adds up in acc[key]."""
    f = getattr(mod, name)

    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            acc[key] = acc.get(key, 0.0) + time.perf_counter() - t

    setattr(mod, name, wrapper)


def _tracekit(path: str, db: str, queries: list[str], whole: bool = False) -> dict:
    """convert, then each query; the phases (wall seconds): import_s (tracekit, DuckDB, Arrow),
    convert_s (the whole conversion, store moved into place), of which scan_insert_s (reading the
    input and inserting its rows: the adapter runs on a thread beside the inserts, so the two
    overlap), insert_s (inside those: the inserting calls), nesting_s (depth / parent_id),
    persist_s (writing the views and macros into the store) and finish_s (checkpoint, move)."""
    t0 = time.perf_counter()
    import tracekit

    tracekit.own_process()  # a benchmark job owns its process, as the `tracekit` command does
    from tracekit import views
    from tracekit.store import convert
    from tracekit.store import Store, writing

    out = {"import_s": time.perf_counter() - t0}
    acc: dict = {}
    _timed(convert, "insert", acc, "insert_s")
    _timed(convert, "nest_source", acc, "nesting_s")
    _timed(views, "persist", acc, "persist_s")
    t1 = time.perf_counter()
    with writing(db, replace=True) as st:
        s = st.convert(path)
        t2 = time.perf_counter()
    t3 = time.perf_counter()
    out["convert_s"] = t3 - t0
    out["scan_insert_s"] = t2 - t1
    out.update({k: acc.get(k, 0.0) for k in ("insert_s", "nesting_s", "persist_s")})
    out["finish_s"] = t3 - t2 - out["persist_s"]
    out["rows"] = sum(s.converted.values())
    out["skipped"] = sum(s.skipped.values())
    with Store(db, read_only=True) as st:
        for q in queries:
            t = time.perf_counter()
            n = st.sql(q).to_arrow_table().num_rows if whole else st.head(q, 100)[1]
            out[f"query {q}"] = [time.perf_counter() - t, n]
    out["total_s"] = time.perf_counter() - t0
    return out


def _sql(db: str, query: str) -> dict:
    t0 = time.perf_counter()
    import tracekit

    tracekit.own_process()
    from tracekit.store import Store

    with Store(db, read_only=True) as st:
        n = st.sql(query).to_arrow_table().num_rows
    return {"total_s": time.perf_counter() - t0, "rows": n}


def _views(db: str, repeat: int) -> dict:
    """Every view, each in a session of its own (a fresh read-only Store): a first run (as one
    `tracekit sql` command would: the shared views it reads are planned inside it), a second
    (which keeps the shared views it names or reads: tracekit/store/kept.py),
    then `repeat` warm runs: the first and second runs' wall, medians of the warm runs' wall and
    CPU time (this process, all threads; a loaded machine stretches wall time more than CPU
    time), and the views whose rows the session kept."""
    import tracekit

    tracekit.own_process()
    from tracekit import views
    from tracekit.store import Store

    out = {}
    for v in views.all_views():
        with Store(db, read_only=True) as st:
            times, cpus = [], []
            for _ in range(repeat + 2):  # the first two warm the caches (the second keeps)
                t, c = time.perf_counter(), time.process_time()
                try:
                    n = st.sql(f"SELECT * FROM {v.name}").to_arrow_table().num_rows
                except Exception as e:  # a view that needs data this store lacks
                    n = f"error: {str(e).splitlines()[0][:80]}"
                times.append(time.perf_counter() - t)
                cpus.append(time.process_time() - c)
            warm, warm_cpu = sorted(times[2:]), sorted(cpus[2:])
            out[v.name] = {"first_s": times[0], "second_s": times[1], "warm_median_s": warm[len(warm) // 2],
                           "warm_cpu_median_s": warm_cpu[len(warm_cpu) // 2], "rows": n,
                           "kept": sorted(st.kept.views)}
    return out


def _hta(trace_dir: str) -> dict:
    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis

    ta = TraceAnalysis(trace_dir=trace_dir)
    t1 = time.perf_counter()
    idle = ta.get_idle_time_breakdown(visualize=False)
    t2 = time.perf_counter()
    kern = ta.get_gpu_kernel_breakdown(visualize=False)
    t3 = time.perf_counter()
    rows = len(kern[1]) if isinstance(kern, tuple) else None
    return {"load_s": t1 - t0, "idle_s": t2 - t1, "kernel_s": t3 - t2, "total_s": t3 - t0,
            "idle_rows": len(idle[0]) if isinstance(idle, tuple) else None, "kernel_rows": rows}


def main(argv: list[str]) -> None:
    kind, args = argv[0], argv[1:]
    if kind in ("tracekit", "tracekit-whole"):
        out = _tracekit(args[0], args[1], args[2:], whole=kind == "tracekit-whole")
    elif kind == "sql":
        out = _sql(args[0], args[1])
    elif kind == "views":
        out = _views(args[0], int(args[1]))
    elif kind == "hta":
        out = _hta(args[0])
    else:
        raise SystemExit(f"unknown job {kind}")
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
