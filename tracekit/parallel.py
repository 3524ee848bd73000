"""Converting many inputs at once: worker processes, merged into the store in input order.

``convert_inputs(store, paths, jobs=N)`` cuts the inputs into runs of consecutive inputs
(chunks) and converts each chunk in one of ``N`` worker processes (``python -m
tracekit.parallel``) into a private temporary store (``writing()`` + ``Store.convert``, exactly
the one-process code); the parent merges the finished stores into ``store`` **in input order**
while the workers go on: for every table of tracekit/schema.py, ``INSERT INTO main.<t> SELECT
... (source_id + <first new id>) ... FROM part.<t>`` from the worker stores attached read-only
(several waiting stores in one ``UNION ALL``).  Source ids are given at merge time, the way the
one-process path gives them (the next id of the store; a failed input takes none), so the store
has the same source ids and the same rows as the conversion of the same inputs with ``jobs=1``
(``bench/samestore.py`` and tests/scale/test_parallel.py check it; an nsys source's row order is not
its input order either way).

The worker stores live in a hidden folder next to the store (``.<name>.parts-<pid>/``) and are
deleted once merged; the caller's ``writing()`` block still makes the final replace atomic.
docs/scaling.md ("Many ranks") has the design and the figures, and ("Knobs") the constants below.
"""

from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterator, Sequence

import orjson

from . import schema
from .adapters.base import TraceError
from . import OWN_ARROW_POOL, budget
from .names import shown
from .store import SourceSummary, Store, writing
from .store.db import roll_back


def default_jobs() -> int:
    """The number of CPUs this process may run on."""
    return budget.usable_cpus()


class InternalError(Exception):
    """An exception other than TraceError raised while converting an input (a bug, not bad
    input), carried back from a worker process: ``type_name``, ``message`` and the worker's
    ``traceback`` text."""

    def __init__(self, type_name: str, message: str, tb: str = ""):
        self.type_name, self.message, self.traceback = type_name, message, tb
        super().__init__(f"{type_name}: {message}")


@dataclass
class Outcome:
    """The result of one input: a summary (converted and merged) or the error (nothing added)."""

    path: Path
    summary: SourceSummary | None = None
    error: Exception | None = None  # TraceError, InternalError, or (serial path) the exception


# ---------------------------------------------------------------------------------------------
# the worker side: ``python -m tracekit.parallel`` reads one task per line (JSON) on stdin and
# answers with JSON lines on stdout (progress, then the results); it ends when stdin closes.
# Workers are plain subprocesses, not multiprocessing children: nothing of the caller's
# ``__main__`` is re-imported, so the Python API works from any script or notebook.
#
# A task is a run of consecutive inputs (a chunk), converted one after the other into one fresh
# store: creating a store (tables, views, checkpoint) costs about as much as converting a small
# rank's trace, so a chunk of several small inputs pays it once; big inputs get a chunk each.
def _work(inputs: list, part: str, fmt, rank, strict, send=None) -> list:
    """Convert ``inputs`` (``[index, path]`` pairs) into the fresh store ``part``, each as the next
    source of it (a failed input adds nothing, as in the serial path).  Returns per input
    ``["ok", local source_id, path, format, converted, skipped]``, ``["trace", path, what, todo]``
    or ``["internal", type name, message, traceback]``; raises only when the store itself fails."""
    out = []
    with writing(part, replace=True, persist=False) as st:  # views: only in the final store
        threads = os.environ.get("TRACEKIT_WORKER_THREADS")
        if threads:
            st.raw_con.execute(f"SET threads = {int(threads)}")
        for i, path in inputs:
            progress = None
            if send is not None:
                last = [-1]

                def progress(done, total, i=i, last=last):
                    permille = int(1000 * done / total) if total else 1000
                    if permille > last[0] + 9:  # at most ~100 messages per input
                        last[0] = permille
                        send({"i": i, "progress": permille})
            try:
                s = st.convert(path, progress=progress, format=fmt, rank=rank, strict=strict)
                out.append(["ok", s.source_id, s.path, s.format, s.converted, s.skipped, sorted(s.by_design),
                            s.repairs])
            except TraceError as e:
                out.append(["trace", e.path, e.what, e.todo])
            except Exception as e:  # a bug: carried back as text
                out.append(["internal", type(e).__name__, str(e), traceback.format_exc()])
            if send is not None:
                send({"i": i, "progress": 1000})
    return out


def _prctl():
    """libc's prctl (None where there is none), looked up before any fork: the child between
    fork and exec only calls it (no import there)."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl() if sys.platform == "linux" else None


def _set_parent_death_kill() -> None:
    """PR_SET_PDEATHSIG = SIGKILL (9) for this process (Linux; kept across exec), else nothing."""
    if _PRCTL is not None:
        _PRCTL(1, 9, 0, 0, 0)


def _die_with_parent() -> None:
    """Have the kernel kill this worker when its parent dies (Linux's PR_SET_PDEATHSIG, set
    between fork and exec by the parent, `_Worker`, and again here): a killed `convert --jobs N`
    (kill -9) leaves no worker converting on, writing its private store for seconds; the
    parent's next conversion removes what it left (`store.files.clean_stale`).  Elsewhere the worker
    ends when its input closes, after its chunk."""
    parent = int(os.environ.get("TRACEKIT_WORKER_PARENT") or os.getppid())  # (the parent may be gone already)
    _set_parent_death_kill()
    if os.getppid() != parent:  # the parent died before the signal was set
        os._exit(1)


def _worker_main() -> None:
    from . import own_process

    _die_with_parent()
    own_process()  # a worker process of tracekit's own
    out = sys.stdout.buffer

    def send(msg) -> None:
        out.write(orjson.dumps(msg) + b"\n")
        out.flush()

    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        task = orjson.loads(line)
        try:
            res = _work(task["inputs"], task["part"], task["format"], task["rank"], task["strict"],
                        send if task["progress"] else None)
        except Exception:  # the store failed (disk full, ...): the parent converts the chunk itself
            sys.stderr.write(traceback.format_exc())
            res = None
        send({"chunk": task["chunk"], "results": res})


# ---------------------------------------------------------------------------------------------
# the parent side
# at most this many finished worker stores are merged by one INSERT per table (docs/scaling.md, "Knobs")
MERGE_BATCH = 16


def merge_parts(store: Store, parts: Sequence[tuple[str | os.PathLike, int]]) -> None:
    """Append every source of the stores ``parts`` (``(path, base_id)`` pairs, in order) to
    ``store``, source ``k`` of a part becoming ``base_id + k``: for every table of the schema one
    ``INSERT ... SELECT ... UNION ALL ...`` over the parts, rows in their order, all in one
    transaction (a failure adds nothing).  One statement over several parts lets DuckDB insert
    their row groups in parallel (a statement per part and table would use a thread or two)."""
    con = store.raw_con
    aliases = [f"__tk_part{k}" for k in range(len(parts))]
    attached = []
    prev = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    try:
        for alias, (path, _) in zip(aliases, parts):
            con.execute(f"ATTACH '{str(path).replace(chr(39), chr(39) * 2)}' AS {alias} (READ_ONLY)")
            attached.append(alias)
        # DuckDB's memory in the parent while merging: the memory budget's share, as converting
        con.execute(f"SET memory_limit = '{budget.plan().duckdb_limit_text}'")
        con.execute("BEGIN TRANSACTION")
        try:
            for t in schema.TABLES:
                cols = ", ".join(f'"{c}"' for c in t.column_names)
                selects = []
                for alias, (_, base_id) in zip(aliases, parts):
                    sel = ", ".join(f"(source_id + {int(base_id)})::INTEGER" if c == "source_id"
                                    else f'"{c}"' for c in t.column_names)
                    selects.append(f'SELECT {sel} FROM {alias}."{t.name}"')
                con.execute(f'INSERT INTO main."{t.name}" ({cols}) ' + " UNION ALL ".join(selects))
            con.execute("COMMIT")
        except BaseException:
            roll_back(con)  # (a failed ROLLBACK must not hide the error)
            raise
    finally:
        con.execute(f"SET memory_limit = '{prev}'")
        for alias in attached:
            con.execute(f"DETACH {alias}")


def convert_inputs(store: Store, paths: Sequence[str | os.PathLike], jobs: int | None = None,
                   format: str | None = None, rank: int | None = None, strict: bool = False,
                   progress: Callable[[float], None] | None = None) -> Iterator[Outcome]:
    """Convert ``paths`` into ``store`` with ``jobs`` worker processes (default: one per CPU),
    yielding one Outcome per input, in input order, as each is merged.  ``jobs=1`` (or a single
    input) is the serial path: ``store.convert`` in this process, one input after the other.
    ``progress(fraction)`` is called with the done fraction of all inputs (by size)."""
    paths = [Path(p) for p in paths]
    jobs = default_jobs() if not jobs or jobs < 1 else jobs
    if jobs == 1 or len(paths) <= 1 or sys.platform == "win32":  # (selectors on pipes: POSIX only)
        yield from _serial(store, paths, format, rank, strict, progress)
        return
    yield from _parallel(store, paths, min(jobs, len(paths)), format, rank, strict, progress)


def _serial(store, paths, fmt, rank, strict, progress) -> Iterator[Outcome]:
    for k, p in enumerate(paths):
        if progress:
            progress(k / len(paths))
        try:
            s = store.convert(p, format=fmt, rank=rank, strict=strict)
        except TraceError as e:
            yield Outcome(p, error=e)
            continue
        except Exception as e:
            if os.environ.get("TRACEKIT_DEBUG"):
                raise
            yield Outcome(p, error=e)
            continue
        yield Outcome(p, summary=s)


def _size(p: Path) -> int:
    try:
        return max(p.stat().st_size, 1) if p.is_file() else 1
    except OSError:
        return 1


# a chunk holds at least this many bytes of input (when there is that much): a new store costs
# about as much as converting a small rank's trace (docs/scaling.md, "Knobs")
MIN_CHUNK_BYTES = 1_000_000


def _chunks(sizes: list[int], jobs: int) -> list[list[int]]:
    """Cut the inputs (in order) into runs of about total / (4 × jobs) bytes (at least
    MIN_CHUNK_BYTES): about four tasks a worker, so the work stays balanced while small inputs
    share a store."""
    target = max(sum(sizes) / (4 * jobs), MIN_CHUNK_BYTES)
    out: list[list[int]] = [[]]
    acc = 0
    for i, n in enumerate(sizes):
        if out[-1] and acc + n > target:
            out.append([])
            acc = 0
        out[-1].append(i)
        acc += n
    return out


class _Worker:
    """One ``python -m tracekit.parallel`` process and the chunks given to it (in its stdin pipe:
    two at a time, so it never waits for the parent, which merges between reads)."""

    def __init__(self, env: dict, errfile):
        self.proc = subprocess.Popen([sys.executable, "-m", "tracekit.parallel"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=errfile, env=env,
                                     preexec_fn=_set_parent_death_kill if _PRCTL is not None else None)
        self.buf = b""
        self.tasks: list[int] = []
        self.closed = False

    def give(self, msg: dict) -> bool:
        try:
            self.proc.stdin.write(orjson.dumps(msg) + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return False
        self.tasks.append(msg["chunk"])
        return True

    def stop(self) -> None:
        self.closed = True
        try:
            self.proc.stdin.close()
        except OSError:
            pass


def _parallel(store, paths, jobs, fmt, rank, strict, progress) -> Iterator[Outcome]:
    sizes = [_size(p) for p in paths]
    total = sum(sizes)
    done = [0.0] * len(paths)  # fraction done per input
    chunks = _chunks(sizes, jobs)
    jobs = min(jobs, len(chunks))

    def report():
        if progress:
            progress(sum(d * s for d, s in zip(done, sizes)) / total)

    parts = Path(store.path).resolve().parent / f".{Path(store.label).name}.parts-{os.getpid()}"
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir()
    env = dict(os.environ, TRACEKIT_WORKER_THREADS=str(max(1, default_jobs() // jobs)),
               TRACEKIT_WORKER_PARENT=str(os.getpid()))
    env[budget.ENV] = str(budget.current())  # each worker within the same budget (per process)
    env.setdefault("ARROW_DEFAULT_MEMORY_POOL", OWN_ARROW_POOL)  # a process of tracekit's own
    pkg_root = str(Path(__file__).resolve().parents[1])  # so that workers import this tracekit
    env["PYTHONPATH"] = os.pathsep.join(x for x in (pkg_root, os.environ.get("PYTHONPATH")) if x)
    results: dict[int, list | None] = {}  # per chunk; None: failed in the worker, converted here
    todo = list(range(len(chunks)))[::-1]  # a stack: pop() gives the next chunk in order
    workers: list[_Worker] = []
    sel = selectors.DefaultSelector()
    errlog = open(parts / "workers.log", "wb")

    def assign(w: _Worker, depth: int = 2) -> None:
        """Keep two chunks queued at the worker; close its input when there is no more work."""
        while len(w.tasks) < depth and todo and not w.closed:
            c = todo.pop()
            if not w.give({"chunk": c, "inputs": [[i, str(paths[i])] for i in chunks[c]],
                           "part": str(parts / f"{c}.duckdb"), "format": fmt, "rank": rank,
                           "strict": strict, "progress": bool(progress)}):
                todo.append(c)
                w.stop()
        if not todo and not w.closed:
            w.stop()

    def pump(timeout: float) -> None:
        """Read what the workers said; hand the next chunk to each that finished one."""
        for key, _ in sel.select(timeout):
            w: _Worker = key.data
            data = os.read(key.fd, 1 << 16)
            if not data:  # the worker ended (or died: its chunk is converted here)
                sel.unregister(key.fd)
                w.proc.wait()
                for c in w.tasks:  # the one it was on, and the one queued after it
                    results[c] = None
                w.tasks = []
                continue
            w.buf += data
            *lines, w.buf = w.buf.split(b"\n")
            for line in lines:
                msg = orjson.loads(line)
                if "progress" in msg:
                    done[msg["i"]] = max(done[msg["i"]], msg["progress"] / 1000)
                else:
                    results[msg["chunk"]] = msg["results"]
                    w.tasks.remove(msg["chunk"])
                    assign(w)
        report()

    try:
        for _ in range(jobs):
            w = _Worker(env, errlog)
            workers.append(w)
            sel.register(w.proc.stdout, selectors.EVENT_READ, w)
            assign(w, depth=1)
        for w in workers:  # then a second chunk each, so the first ones go round first
            assign(w)
        c = 0
        while c < len(chunks):
            while c not in results:
                if not sel.get_map():  # every worker is gone: the rest is converted here
                    results[c] = None
                    break
                pump(0.2)
            if c in todo:
                todo.remove(c)
            if results[c] is None:  # the worker died on this chunk: the serial path, here
                results.pop(c)
                for i in chunks[c]:
                    outcome = next(_serial(store, [paths[i]], fmt, rank, strict, None))
                    done[i] = 1.0
                    report()
                    yield outcome
                c += 1
                continue
            # this chunk and the finished ones right after it: merged together
            pump(0)
            batch = [c]
            while (len(batch) < MERGE_BATCH and batch[-1] + 1 < len(chunks)
                   and results.get(batch[-1] + 1) is not None):
                batch.append(batch[-1] + 1)
            base = store.next_source_id()
            bases, merge = {}, []
            for k in batch:
                bases[k] = base
                n_ok = sum(1 for r in results[k] if r[0] == "ok")
                if n_ok:
                    merge.append((parts / f"{k}.duckdb", base))
                base += n_ok
            if merge:
                merge_parts(store, merge)
            for k in batch:
                for f in (parts / f"{k}.duckdb", parts / f"{k}.duckdb.wal"):
                    f.unlink(missing_ok=True)
                for i, r in zip(chunks[k], results.pop(k)):
                    p = paths[i]
                    if r[0] == "ok":
                        _, local, spath, sfmt, converted, skipped, by_design, repairs = r
                        yield Outcome(p, summary=SourceSummary(bases[k] + local, spath, sfmt, converted,
                                                               skipped, frozenset(by_design), repairs))
                    elif r[0] == "trace":
                        yield Outcome(p, error=TraceError(r[1], r[2], r[3]))
                    else:
                        if os.environ.get("TRACEKIT_DEBUG"):
                            raise RuntimeError(f"{p}: internal error in a conversion worker:\n{r[3]}")
                        yield Outcome(p, error=InternalError(r[1], r[2], r[3]))
            c = batch[-1] + 1
    finally:
        for w in workers:
            w.stop()
        for w in workers:
            if w.proc.poll() is None and w.tasks:  # stopped early (an error, Ctrl-C)
                w.proc.terminate()
            try:
                w.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()
            w.proc.stdout.close()
        sel.close()
        errlog.close()
        shutil.rmtree(parts, ignore_errors=True)


def error_line(path, e: Exception) -> str:
    """The one-line message (after ``tracekit: error: ``) for an input that failed."""
    if isinstance(e, TraceError):
        return e.one_line()
    name, msg = (e.type_name, e.message) if isinstance(e, InternalError) else (type(e).__name__, str(e))
    first = (msg.splitlines() or [""])[0]
    path = shown(path)
    # the machine's limits, not a bug: say which, and what to do
    if "No space left on device" in msg:
        return f"{path}: no space left on device while converting ({first}); free some space next to the store"
    if name == "OutOfMemoryException" or "Out of Memory" in msg:
        return (f"{path}: out of memory while converting ({first}); give it more with --memory-budget "
                "or free some memory")
    return (f"{path}: internal error while converting ({name}: {first}); please report it, with "
            "TRACEKIT_DEBUG=1 for the traceback")


if __name__ == "__main__":
    _worker_main()
