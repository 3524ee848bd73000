#!/usr/bin/env python3
"""Fault script (issue 49): what a demanding user does to tracekit's outputs, and what is left.

Cases, each on real fixtures (a store holding fixtures/kineto/matmul.json.gz, the "old" state;
fixtures/nsys/decode_b1.sqlite converted into it, the "new" state):

  kill convert     SIGKILL of `tracekit convert NEW --db STORE` at N moments spread over its run
                   (from the interpreter's start to its end), then a normal conversion into the
                   store (it must work and remove the killed run's leftovers)
  kill replace     the same for `convert --replace NEW --db STORE`
  kill export      the same for `convert --replace NEW --db STORE --parquet DIR` over an old export
                   of the old store in DIR (flat and --partitioned, alternately)
  full disk        a small tmpfs mounted for the store (skipped, and said so, where mounting is not
                   allowed): `convert` adding to the store, `--parquet`, `sql -o FILE` over an old
                   FILE, each with a few free-space levels, so the disk fills at different moments
  concurrent       writers converting three inputs into one store at once while readers query it

After each case the store (and the export, the -o file) must be the old one or the new one,
whole: read back table by table (row counts of every table of the schema), it must equal one of
the two.  Printed at the end:

  cases tried, tracebacks (in any command's standard error), stores or exports changed (neither
  the old nor the new one, or unreadable), rows lost (rows of the old state missing from what is
  left), leftovers (files left beside a store after the next normal run), and the states seen.

    python bench/faults.py [--kills 10] [--no-disk] [--rounds 2] [--work DIR] [--keep]

A benchmark script, not a unit test (tests/store/test_nothing_lost.py has the unit tests of each fault):
a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import tracekit  # noqa: E402
from tracekit import schema  # noqa: E402

FIX = REPO / "fixtures"
OLD_INPUT = FIX / "kineto" / "matmul.json.gz"
NEW_INPUT = FIX / "nsys" / "decode_b1.sqlite"
OTHER_INPUTS = [FIX / "ncu" / "mm_raw.csv", FIX / "kineto" / "kernels.json.gz"]
TK = [sys.executable, "-m", "tracekit"]
TABLES = [t.name for t in schema.TABLES]


class Tally:
    def __init__(self):
        self.cases = 0
        self.tracebacks: list[str] = []
        self.changed: list[str] = []
        self.rows_lost = 0
        self.leftovers: list[str] = []
        self.failures: list[str] = []  # a command that should have worked and did not
        self.states: collections.Counter = collections.Counter()

    def traceback(self, what: str, stderr: str) -> None:
        if "Traceback (most recent call last)" in stderr:
            self.tracebacks.append(f"{what}: {stderr.strip().splitlines()[-1][:200]}")


def run(args, cwd=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([*TK, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout)


def counts(path: Path) -> dict[str, int] | str:
    """Rows per table of a store or a Parquet export, read as `tracekit sql` reads it; the error
    line when it cannot be read."""
    try:
        with tracekit.open(str(path)) as st:
            return {t: st.one(f"SELECT count(*) FROM {t}") for t in TABLES}
    except Exception as e:  # noqa: BLE001 - any failure to read it back is the finding
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]


def plus(a: dict, b: dict) -> dict:
    return {t: a[t] + b[t] for t in TABLES}


def judge(tally: Tally, what: str, got, old: dict, new: dict, lost_from: dict | None = None) -> str:
    """'old' or 'new' when ``got`` is one of them; else counted as changed, with the rows of
    ``lost_from`` (default: the old state) missing from it counted as lost."""
    if got == old:
        state = "whole" if old == new else "old"
    elif got == new:
        state = "new"
    else:
        state = "changed"
        tally.changed.append(f"{what}: {got if isinstance(got, str) else {t: n for t, n in got.items() if n}}")
        base = lost_from or old
        if isinstance(got, str):
            tally.rows_lost += sum(base.values())
        else:
            tally.rows_lost += sum(max(0, base[t] - got[t]) for t in TABLES)
    tally.states[(what.split(" #")[0], state)] += 1
    return state


def beside(store: Path) -> list[str]:
    """Files in the store's folder other than the store and what the case put there itself."""
    return sorted(p.name for p in store.parent.iterdir() if p.name not in (store.name, "exp", "out.csv", "fill"))


def killed(args, delay: float, cwd: Path) -> str:
    """Run a command, SIGKILL it after ``delay`` seconds (if still running); its stderr."""
    err = cwd / "stderr.txt"
    with open(err, "w") as f:
        p = subprocess.Popen([*TK, *map(str, args)], stdout=subprocess.DEVNULL, stderr=f, cwd=cwd,
                             start_new_session=True)
        try:
            p.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # the command and any worker it started
            p.wait()
    text = err.read_text(errors="replace")
    err.unlink()
    return text


# -- references --------------------------------------------------------------------------------

def references(work: Path) -> dict:
    """The old store (template), its exports, the row counts of each state, and each command's
    uninterrupted wall time (the kill moments are spread over it)."""
    ref = work / "ref"
    ref.mkdir()
    out = {}
    t0 = time.perf_counter()
    r = run(["convert", "-q", OLD_INPUT, "--db", ref / "old.duckdb"])
    assert r.returncode == 0, r.stderr
    out["t_old"] = time.perf_counter() - t0
    for layout in ("flat", "partitioned"):
        d = ref / f"old_{layout}"
        shutil.copy(ref / "old.duckdb", d.with_suffix(".duckdb"))
        r = run(["convert", "-q", "--replace", OLD_INPUT, "--db", d.with_suffix(".duckdb"), "--parquet", d,
                 *(["--partitioned"] if layout == "partitioned" else [])])
        assert r.returncode == 0, r.stderr
        out[f"old_{layout}"] = d
    out["old"] = counts(ref / "old.duckdb")
    t0 = time.perf_counter()
    r = run(["convert", "-q", NEW_INPUT, "--db", ref / "new.duckdb"])
    assert r.returncode == 0, r.stderr
    out["t_new"] = time.perf_counter() - t0
    out["new_alone"] = counts(ref / "new.duckdb")
    out["added"] = plus(out["old"], out["new_alone"])
    for p in OTHER_INPUTS:
        r = run(["convert", "-q", p, "--db", ref / f"{p.name}.duckdb"])
        assert r.returncode == 0, r.stderr
        out[p.name] = counts(ref / f"{p.name}.duckdb")
    out["template"] = ref / "old.duckdb"
    return out


def fresh(work: Path, name: str, refs: dict) -> Path:
    d = work / name
    d.mkdir()
    shutil.copy(refs["template"], d / "s.duckdb")
    return d / "s.duckdb"


def delays(total: float, n: int) -> list[float]:
    return [total * (i + 0.5) / n for i in range(n)]


# -- cases ---------------------------------------------------------------------------------------

def kill_convert(tally: Tally, work: Path, refs: dict, n: int, replace: bool) -> None:
    kind = "kill replace" if replace else "kill convert"
    new = refs["new_alone"] if replace else refs["added"]
    for i, delay in enumerate(delays(refs["t_new"] * 1.3, n)):
        tally.cases += 1
        store = fresh(work, f"{kind.replace(' ', '_')}{i}", refs)
        err = killed(["convert", "-q", *(["--replace"] if replace else []), NEW_INPUT, "--db", store],
                     delay, store.parent)
        tally.traceback(f"{kind} #{i}", err)
        state = judge(tally, f"{kind} #{i} (after {delay:.2f} s)", counts(store), refs["old"], new)
        # the next conversion works and leaves nothing of the killed one behind
        r = run(["convert", "-q", "--allow-duplicate", OTHER_INPUTS[0], "--db", store])
        tally.traceback(f"{kind} #{i} next convert", r.stderr)
        if r.returncode != 0:
            tally.failures.append(f"{kind} #{i}: the next convert failed: {r.stderr.strip()[:200]}")
        else:
            want = plus(refs["old"] if state == "old" else new, refs[OTHER_INPUTS[0].name])
            judge(tally, f"{kind}, next run #{i}", counts(store), want, want,
                  lost_from=refs["old"] if state == "old" else new)
        left = beside(store)
        if left:
            tally.leftovers.append(f"{kind} #{i}: {left}")


def kill_export(tally: Tally, work: Path, refs: dict, n: int) -> None:
    for i, delay in enumerate(delays(refs["t_new"] * 1.3, n)):
        tally.cases += 1
        layout = "partitioned" if i % 2 else "flat"
        store = fresh(work, f"kill_export{i}", refs)
        exp = store.parent / "exp"
        shutil.copytree(refs[f"old_{layout}"], exp)
        err = killed(["convert", "-q", "--replace", NEW_INPUT, "--db", store, "--parquet", exp,
                      *(["--partitioned"] if layout == "partitioned" else [])], delay, store.parent)
        tally.traceback(f"kill export #{i}", err)
        judge(tally, f"kill export store #{i} (after {delay:.2f} s)", counts(store), refs["old"],
              refs["new_alone"])
        judge(tally, f"kill export {layout} #{i} (after {delay:.2f} s)", counts(exp), refs["old"],
              refs["new_alone"])
        r = run(["sql", "--db", exp, "SELECT count(*) FROM kernels"])
        tally.traceback(f"kill export #{i} sql", r.stderr)
        if r.returncode not in (0, 2) or (r.returncode == 2 and len(r.stderr.strip().splitlines()) != 1):
            tally.failures.append(f"kill export #{i}: sql --db DIR exit {r.returncode}: {r.stderr.strip()[:200]}")


def _mount(mnt: Path, size_mb: int) -> str | None:
    """Mount a tmpfs of ``size_mb`` MB at ``mnt``; None, or why it cannot be."""
    if shutil.which("mount") is None:
        return "no mount command"
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    return None if r.returncode == 0 else (r.stderr.strip() or f"mount exit {r.returncode}")


def _fill(d: Path, leave_mb: float) -> None:
    """Fill the file system of ``d`` up to ``leave_mb`` MB free."""
    st = os.statvfs(d)
    free = st.f_bavail * st.f_frsize
    n = max(0, int(free - leave_mb * 2**20))
    with open(d / "fill", "wb") as f:
        while n > 0:
            k = min(n, 1 << 20)
            f.write(b"\0" * k)
            n -= k


def full_disk(tally: Tally, work: Path, refs: dict) -> str | None:
    """The full-disk cases on a small tmpfs; the reason when they cannot run."""
    mnt = work / "tmpfs"
    mnt.mkdir()
    why = _mount(mnt, 48)
    if why:
        return why
    try:
        store_mb = refs["template"].stat().st_size / 2**20
        for k, leave in enumerate((0.2, 1, 3, 6, 12)):  # convert adding to the store
            tally.cases += 1
            d = mnt / f"c{k}"
            d.mkdir()
            store = d / "s.duckdb"
            shutil.copy(refs["template"], store)
            _fill(d, leave + store_mb)  # room for about one copy of the store, then `leave` MB
            r = run(["convert", "-q", NEW_INPUT, "--db", store])
            tally.traceback(f"full disk convert ({leave} MB)", r.stderr)
            if r.returncode not in (0, 2) or (r.returncode == 2 and len(r.stderr.strip().splitlines()) != 1):
                tally.failures.append(f"full disk convert ({leave} MB): exit {r.returncode}: {r.stderr.strip()[:200]}")
            judge(tally, f"full disk convert #{k} ({leave} MB free, exit {r.returncode})", counts(store),
                  refs["old"], refs["added"])
            left = beside(store)
            if left:
                tally.leftovers.append(f"full disk convert ({leave} MB): {left}")
            shutil.rmtree(d)
        for k, leave in enumerate((1, 2, 4, 6)):  # --parquet over an old export
            tally.cases += 1
            d = mnt / f"p{k}"
            d.mkdir()
            store, exp = d / "s.duckdb", d / "exp"
            shutil.copy(refs["template"], store)
            shutil.copytree(refs["old_flat"], exp)
            _fill(d, leave)
            r = run(["convert", "-q", "--replace", NEW_INPUT, "--db", store, "--parquet", exp])
            tally.traceback(f"full disk export ({leave} MB)", r.stderr)
            if r.returncode not in (0, 2) or (r.returncode == 2 and len(r.stderr.strip().splitlines()) != 1):
                tally.failures.append(f"full disk export ({leave} MB): exit {r.returncode}: {r.stderr.strip()[:200]}")
            judge(tally, f"full disk export store #{k} ({leave} MB free, exit {r.returncode})", counts(store),
                  refs["old"], refs["new_alone"])
            judge(tally, f"full disk export #{k} ({leave} MB free, exit {r.returncode})", counts(exp),
                  refs["old"], refs["new_alone"])
            shutil.rmtree(d)
        for k, leave in enumerate((0.05, 0.3, 0.8)):  # sql -o over an old file
            tally.cases += 1
            d = mnt / f"o{k}"
            d.mkdir()
            store, out = d / "s.duckdb", d / "out.csv"
            old_text = "old,file\n1,2\n"
            out.write_text(old_text)
            shutil.copy(refs["template"].with_name("new.duckdb"), store)  # 6,949 api_calls: ~1 MB of CSV
            q = "SELECT * FROM api_calls ORDER BY start_ns, tid"
            want = run(["sql", "--db", store, q, "--format", "csv", "--max-rows", "0"]).stdout
            _fill(d, leave)
            r = run(["sql", "--db", store, q, "--format", "csv", "--max-rows", "0", "-o", out])
            tally.traceback(f"full disk sql -o ({leave} MB)", r.stderr)
            got = out.read_text(errors="replace") if out.exists() else None
            if r.returncode not in (0, 2) or (r.returncode == 2 and len(r.stderr.strip().splitlines()) != 1):
                tally.failures.append(f"full disk sql -o ({leave} MB): exit {r.returncode}: {r.stderr.strip()[:200]}")
            state = "new" if r.returncode == 0 and got == want else \
                "old" if r.returncode != 0 and got == old_text else "changed"
            if state == "changed":
                tally.changed.append(f"full disk sql -o ({leave} MB free, exit {r.returncode}): "
                                     f"{'missing' if got is None else f'{len(got)} bytes'}")
            tally.states[("full disk sql -o", state)] += 1
            shutil.rmtree(d)
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
    return None


def concurrent(tally: Tally, work: Path, refs: dict, rounds: int) -> None:
    inputs = [NEW_INPUT, *OTHER_INPUTS]
    final = refs["old"]
    for p in inputs:
        final = plus(final, refs["new_alone"] if p == NEW_INPUT else refs[p.name])
    for k in range(rounds):
        tally.cases += 1
        store = fresh(work, f"concurrent{k}", refs)
        writers = [subprocess.Popen([*TK, "convert", "-q", "--allow-duplicate", str(p), "--db", str(store)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                   for p in inputs]
        reads = []
        while any(w.poll() is None for w in writers):
            r = run(["sql", "--db", store, "--format", "csv", "SELECT count(*) FROM sources"])
            reads.append(r)
        codes = [w.wait() for w in writers]
        for w in writers:
            tally.traceback(f"concurrent #{k} writer", w.stderr.read())
        if codes != [0] * len(writers):
            tally.failures.append(f"concurrent #{k}: writers exit {codes}")
        judge(tally, f"concurrent #{k}", counts(store), final, final)
        seen = []
        for r in reads:
            tally.traceback(f"concurrent #{k} reader", r.stderr)
            if r.returncode == 0:
                seen.append(int(r.stdout.split()[-1]))
            elif r.returncode != 2 or len(r.stderr.strip().splitlines()) != 1:
                tally.failures.append(f"concurrent #{k}: reader exit {r.returncode}: {r.stderr.strip()[:200]}")
        if seen != sorted(seen) or any(not 1 <= s <= 1 + len(inputs) for s in seen):
            tally.changed.append(f"concurrent #{k}: readers saw sources {seen}")
        tally.states[("concurrent reads", f"{len(seen)} of {len(reads)} answered")] += 1
        left = beside(store)
        if left:
            tally.leftovers.append(f"concurrent #{k}: {left}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, default=10, help="kill moments per killed command (default 10)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of concurrent writers and readers")
    ap.add_argument("--no-disk", action="store_true", help="skip the full-disk cases")
    ap.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tracekit-faults-", dir=a.work))
    t0 = time.perf_counter()
    tally = Tally()
    try:
        refs = references(work)
        print(f"references: old store {sum(refs['old'].values()):,} rows, new {sum(refs['new_alone'].values()):,} "
              f"rows; convert NEW {refs['t_new']:.2f} s", flush=True)
        kill_convert(tally, work, refs, a.kills, replace=False)
        kill_convert(tally, work, refs, a.kills, replace=True)
        kill_export(tally, work, refs, a.kills)
        disk = "skipped (--no-disk)" if a.no_disk else full_disk(tally, work, refs)
        concurrent(tally, work, refs, a.rounds)
    finally:
        if a.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"cases tried                     {tally.cases}")
    print(f"tracebacks                      {len(tally.tracebacks)}")
    print(f"stores or exports changed       {len(tally.changed)}")
    print(f"rows lost                       {tally.rows_lost}")
    print(f"leftovers after the next run    {len(tally.leftovers)}")
    print(f"commands failing unexpectedly   {len(tally.failures)}")
    print(f"full disk                       {'skipped: ' + disk if disk else 'run (tmpfs of 48 MB)'}")
    print(f"time                            {time.perf_counter() - t0:.0f} s")
    print("states seen:")
    for (case, state), n in sorted(tally.states.items()):
        print(f"  {case:28s} {state:24s} {n}")
    for title, items in (("tracebacks", tally.tracebacks), ("changed", tally.changed),
                         ("leftovers", tally.leftovers), ("failures", tally.failures)):
        for x in items:
            print(f"{title}: {x}")
    bad = tally.tracebacks or tally.changed or tally.rows_lost or tally.leftovers or tally.failures
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
