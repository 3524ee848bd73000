"""The memory budget of a conversion: the one setting that bounds the peak memory of converting a
trace, whatever its size (what does not fit goes to spill files on disk instead).

It is set, in order of precedence, by ``tracekit convert --memory-budget``, ``tracekit.convert(...,
memory_budget=...)``, the environment variable ``TRACEKIT_MEMORY_BUDGET``, or ``DEFAULT`` (400 MB);
a value is a size such as ``400MB``, ``1.5GB``, ``250M`` or a number of bytes.  It is per
process: with ``--jobs N`` each worker process and the merging parent each stay within it (the
parent hands its budget to the workers).

Everything that holds memory in proportion to some setting is sized from it here, in one place
(`plan`); docs/scaling.md ("Memory budget") has the measured figures behind the shares.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import dataclass

ENV = "TRACEKIT_MEMORY_BUDGET"
DEFAULT = "400MB"
MIN_BYTES = 128 << 20  # a Python process with DuckDB, pyarrow and polars loaded takes ~100 MB
BASE_BYTES = 100 << 20  # ... which the shares of `plan` leave out
MB = 1 << 20

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": MB, "MB": MB, "MIB": MB,
          "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30, "T": 1 << 40, "TB": 1 << 40, "TIB": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*$")

_override: int | None = None  # set by the CLI option / the Python API (`using`)


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (``taskset``, a cpuset cgroup as Docker's
    ``--cpuset-cpus`` or a Slurm allocation sets it), else all of them.  DuckDB sizes its thread
    pool by the machine's cores (and a cgroup CPU quota), not by the affinity: pinned to 2 CPUs of
    a 16-core host it would run 16 threads (`tracekit.store.fit_threads` caps it)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class BudgetError(ValueError):
    """A memory budget that is not a size, or too small; the message is one line."""


def parse(value, where: str = "memory budget") -> int:
    """A size (``"400MB"``, ``"1.5GB"``, ``"250M"``, ``"1073741824"``, or an int of bytes) in
    bytes; KB / MB / GB count in 1024s (as ru_maxrss and `ps` do; DuckDB's own MB are 10^6 bytes,
    so its memory_limit is set in MiB)."""
    if isinstance(value, bool):
        raise BudgetError(f"{where} {value!r}: not a size")
    if isinstance(value, int):
        n = value
    else:
        m = _SIZE.match(str(value))
        unit = m and m.group(2).upper()
        if not m or unit not in _UNITS:
            raise BudgetError(f"{where} {value!r}: not a size (write e.g. 400MB, 1.5GB or a number of bytes)")
        n = int(float(m.group(1)) * _UNITS[unit])
    if n < MIN_BYTES:
        raise BudgetError(f"{where} {value!r}: too small; a conversion needs at least "
                          f"{MIN_BYTES // MB} MB (the Python process alone takes ~100 MB)")
    return n


def current() -> int:
    """The budget in force, in bytes (override, else $TRACEKIT_MEMORY_BUDGET, else DEFAULT)."""
    if _override is not None:
        return _override
    env = os.environ.get(ENV)
    if env not in (None, ""):
        return parse(env, f"${ENV}")
    return parse(DEFAULT)


@contextmanager
def using(value):
    """Set the budget for the block (None: leave it as it is)."""
    global _override
    if value is None:
        yield
        return
    was = _override
    _override = parse(value)
    try:
        yield
    finally:
        _override = was


@dataclass(frozen=True)
class Plan:
    """What a conversion may hold, derived from a budget of ``budget`` bytes."""

    budget: int
    duckdb_limit: int      # DuckDB's memory_limit while converting with parallel inserts (nsys) and
                           # merging (beyond it: spill files)
    duckdb_serial_limit: int  # ... while one thread inserts (Kineto, ncu): one insert thread's share.
                           # It holds that thread's open row groups; more only keeps written blocks
                           # (~25 MB more peak RSS at 128 MiB, no faster; docs/scaling.md)
    insert_threads: int    # at most this many DuckDB threads insert in parallel (each fills row groups)
    nsys_chunk_rows: int   # rows per rowid range of the nsys reader (kernel rows: ~700 B each with args)
    nsys_readers: int      # at most this many ranges read ahead by the nsys reader's threads
    nest_rows: int         # events per piece of the nesting pass (~150 B each while it runs)
    kineto_block: int      # bytes of JSON per block (and chunk) of the Kineto reader
    insert_bytes: int      # Arrow bytes of one table gathered before they are inserted (one INSERT)

    @property
    def duckdb_limit_text(self) -> str:
        return f"{self.duckdb_limit // MB}MiB"


def _pow2_floor(x: float, lo: int, hi: int) -> int:
    n = lo
    while n * 2 <= min(x, hi):
        n *= 2
    return n


def plan(budget: int | None = None) -> Plan:
    """The shares of a budget (bytes; None: `current()`).  At the default 400 MB: DuckDB 128 MiB (64 MiB
    where one thread inserts),
    2 insert threads, nsys ranges of 8,192 rows, nesting pieces of 262,144 events, Kineto blocks
    of 4 MiB, inserts of 8 MiB of one table; the rest is
    the Python process itself (~100 MB), the readers' blocks and the batches in flight."""
    b = current() if budget is None else budget
    free = max(0, b - BASE_BYTES)  # what the process itself does not take
    duck = max(8 * MB, free * 128 // 300)  # 128 MiB at 400 MB: spills little on big traces
    return Plan(
        budget=b,
        duckdb_limit=duck,
        insert_threads=max(1, duck // (64 * MB)),
        duckdb_serial_limit=min(duck, 64 * MB),
        nsys_chunk_rows=_pow2_floor(free / 48 / 700, 4096, 65536),
        nsys_readers=max(1, min(8, b // (200 * MB))),
        nest_rows=_pow2_floor(free / 1200, 16384, 1 << 22),
        kineto_block=_pow2_floor(free / 75, 1 << 20, 64 << 20),
        insert_bytes=min(_pow2_floor(free / 32, 1 << 20, 64 << 20), free // 32),  # 0: each batch alone
    )
