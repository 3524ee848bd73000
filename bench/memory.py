#!/usr/bin/env python3
"""Peak memory of converting one trace, against the memory budget (issue 24): each input converted
by `tracekit convert` in its own child process (a fresh store each); prints wall and CPU seconds
(user + system), peak RSS (the child's ``ru_maxrss``), rows converted, and whether the peak is
within the budget.  Medians of ``--repeat`` runs.

    python bench/memory.py                          # the default inputs (built when missing)
    python bench/memory.py --budget 250MB --budget 1GB INPUT...
    python bench/memory.py --only kineto10 tiny5m   # some of the default inputs

The default inputs, built into ``--work`` (default /tmp/tracekit-bench) by bench/inputs.py when
missing: the real 179 MB capture (``--kineto``, default /tmp/big/decode_0p5b_s64.json.gz; skipped
when absent; bench/README.md says how it was made), its 10x replica (~1.8 GB of JSON), 5 M tiny
Kineto events (`inputs.py tiny`), nsys exports of 200 k and 2 M kernels (replicated from
fixtures/nsys/decode_b1.sqlite), and an ncu CSV fixture (small: ncu exports are one row per
profiled kernel, so they do not reach the budget).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def _cases(work: Path, kineto: Path) -> dict[str, tuple[Path, list[str]]]:
    """name -> (input, the bench/inputs.py arguments that build it, or [] when it is not built)."""
    nsys = ROOT / "fixtures/nsys/decode_b1.sqlite"
    return {
        "kineto1": (kineto, []),
        "kineto10": (work / "kineto_0p5b_x10.json.gz", ["kineto", str(kineto), None, "10"]),
        "tiny5m": (work / "tiny_5m.json.gz", ["tiny", None, "5000000"]),
        "nsys200k": (work / "nsys_decode_b1_200k_v2.sqlite", ["nsys", str(nsys), None, "200000"]),
        "nsys2m": (work / "nsys_decode_b1_2m.sqlite", ["nsys", str(nsys), None, "2000000"]),
        "ncu": (ROOT / "fixtures/ncu/decode_steps_details.csv.gz", []),
    }


def _build(path: Path, args: list) -> None:
    if path.exists() or not args:
        return
    if args[0] == "kineto" and not Path(args[1]).exists():
        return
    args = [str(path) if a is None else a for a in args]
    print(f"building {path} (bench/inputs.py {' '.join(args)})", flush=True)
    subprocess.run([PY, str(ROOT / "bench/inputs.py"), *args], check=True)


def run_one(path: Path, budget: str | None, work: Path) -> dict:
    """Convert ``path`` in a child process; its wall, CPU, peak RSS and converted rows."""
    with tempfile.TemporaryDirectory(dir=work) as d:
        db = Path(d) / "m.duckdb"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(x for x in (str(ROOT), env.get("PYTHONPATH")) if x)
        cmd = [PY, "-m", "tracekit", "convert", str(path), "--db", str(db),
               "--replace", "-q", "--jobs", "1"]
        if budget:
            cmd += ["--memory-budget", budget]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, _, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out, err = proc.stdout.read(), proc.stderr.read()
        if proc.returncode not in (0, None) and not out:
            raise SystemExit(f"{path}: convert failed: {err.strip()}")
        line = out.strip().splitlines()[-1] if out.strip() else ""
        counts = line.split("): ", 1)[-1].split(";")[0]  # "api_calls 69,080, devices 1, ..."
        rows = sum(int(n.replace(",", "")) for n in re.findall(r"[a-z_]+ (\d[\d,]*?)(?=, [a-z_]|$)", counts))
        return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="*", type=Path, help="inputs (default: the cases below)")
    ap.add_argument("--budget", action="append", help="memory budget(s) to run under (default: the default, 400MB)")
    ap.add_argument("--only", nargs="+", help="default cases: kineto1 kineto10 tiny5m nsys200k nsys2m ncu")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--work", type=Path, default=Path("/tmp/tracekit-bench"))
    ap.add_argument("--kineto", type=Path, default=Path("/tmp/big/decode_0p5b_s64.json.gz"))
    a = ap.parse_args()
    if resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 150 * 1024:
        raise SystemExit("this process is too big to measure children (Linux carries peak RSS over fork)")
    a.work.mkdir(parents=True, exist_ok=True)
    if a.inputs:
        cases = {p.name: (p, []) for p in a.inputs}
    else:
        cases = {k: v for k, v in _cases(a.work, a.kineto).items() if not a.only or k in a.only}
    from tracekit import budget as B

    budgets = a.budget or [None]
    print(f"{'input':<12} {'budget':>8} {'rows':>11} {'wall s':>8} {'CPU s':>7} {'peak RSS':>9}  within")
    for b in budgets:
        limit = B.parse(b) if b else B.current()
        for name, (path, build) in cases.items():
            _build(path, build)
            if not path.exists():
                print(f"{name:<12} {'':>8} (no {path}: skipped)")
                continue
            runs = [run_one(path, b, a.work) for _ in range(a.repeat)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            ok = med["rss_mb"] * (1 << 20) <= limit
            print(f"{name:<12} {limit >> 20:>6}MB {int(med['rows']):>11,} {med['wall']:>8.1f} {med['cpu']:>7.1f} "
                  f"{med['rss_mb']:>6.0f} MB  {'yes' if ok else 'NO'}", flush=True)


if __name__ == "__main__":
    main()
