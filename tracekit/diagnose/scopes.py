"""What the rules look at: the query helper over a store and the scopes (a device's steady
window, or one phase on one device), read from the views."""

from __future__ import annotations

from dataclasses import dataclass

from .model import Evidence, jsonable, pct
from .statements import statement

class Query:
    """Query helper over a Store: dict rows, evidence capture, view availability."""

    def __init__(self, store, evidence_rows: int = 20):
        self.store = store
        self.evidence_rows = evidence_rows
        self.views = {r[0] for r in store.con.sql(  # store.con: every view registered
            statement("scopes", "views")).fetchall()}
        self._cache: dict[str, tuple[list[str], list[tuple]]] = {}

    def has(self, view: str) -> bool:
        return view in self.views

    def run(self, query: str) -> tuple[list[str], list[tuple]]:
        if query not in self._cache:
            rel = self.store.sql(query)
            self._cache[query] = (list(rel.columns), rel.fetchall())
        return self._cache[query]

    def dicts(self, query: str) -> list[dict]:
        cols, rows = self.run(query)
        return [dict(zip(cols, (jsonable(v) for v in r))) for r in rows]

    def one(self, query: str) -> dict | None:
        d = self.dicts(query)
        return d[0] if d else None

    def evidence(self, view: str, query: str, limit: int | None = None) -> Evidence:
        cols, rows = self.run(query)
        n = limit or self.evidence_rows
        return Evidence(view, " ".join(query.split()), cols,
                        [[jsonable(v) for v in r] for r in rows[:n]], len(rows))



# --------------------------------------------------------------------------------------------
# the scopes: what the rules look at


@dataclass
class Scope:
    """One device of one source (phase None), or the time of one phase on one device."""
    source_id: int
    device_id: int
    phase: str | None
    window_ns: int
    busy_ns: int
    idle: dict[str, int]            # cause -> ns (IDLE_CAUSES, and outside)
    gaps: dict[str, tuple[int, float | None]]  # cause -> (count, median ns); source scopes only
    kernels: int
    launched: int
    short_kernels: int
    kernel_ns: int
    memcpy_ns: int
    exposed_memcpy_ns: int | None
    launch_calls: int | None
    graph_launches: int | None
    med_kernel_ns: float | None = None
    med_latency_ns: float | None = None
    instances: int | None = None
    category: str | None = None
    steady: dict | None = None       # source scopes: the steady_state row (method, steps, start-up)
    short_gap_host_ns: int | None = None  # source scopes: host_wait time in gaps < launch_gap_ns

    @property
    def utilization_pct(self):
        return pct(self.busy_ns, self.window_ns)

    @property
    def short_pct(self):
        return pct(self.short_kernels, self.launched)

    @property
    def idle_ns(self):
        return self.window_ns - self.busy_ns


IDLE_CAUSES = ("host_wait", "sync_wait", "runtime_compile", "kernel_wait", "other")


def source_scopes(q: Query, sid: int, launch_gap_ns: float) -> list[Scope]:
    """One scope per device: its steady window (`steady_state`: first to last repeated step, or
    the whole device window where the source has no repeated steps)."""
    out = []
    for u in q.dicts(statement("scopes", "steady_scopes", sid=sid)):
        dev = u["device_id"]
        gaps = q.dicts(statement("scopes", "steady_gaps", sid=sid, dev=dev, launch_gap_ns=int(launch_gap_ns),
                                 w0=u["window_start_ns"], w1=u["window_end_ns"]))
        ls = q.one(statement("scopes", "launch_latency", sid=sid, dev=dev)) or {}
        idle = {c: u[f"{c}_ns"] or 0 for c in IDLE_CAUSES}
        idle["outside"] = 0
        out.append(Scope(
            source_id=sid, device_id=dev, phase=None, window_ns=u["window_ns"], busy_ns=u["busy_ns"],
            idle=idle, gaps={g["cause"]: (g["n"], g["med"]) for g in gaps},
            kernels=u["kernels"], launched=u["launched"], short_kernels=u["short_kernels"],
            kernel_ns=u["kernel_ns"], memcpy_ns=u["memcpy_ns"], exposed_memcpy_ns=u["exposed_memcpy_ns"],
            launch_calls=u["launch_calls"], graph_launches=u["graph_launches"],
            med_kernel_ns=u["med_kernel_ns"], med_latency_ns=ls.get("med_latency_ns"), steady=u,
            short_gap_host_ns=next((g["short_ns"] or 0 for g in gaps if g["cause"] == "host_wait"), 0)))
    return out


def phase_scope(r: dict) -> Scope:
    return Scope(
        source_id=r["source_id"], device_id=r["device_id"], phase=r["phase"], window_ns=r["span_ns"],
        busy_ns=r["busy_ns"],
        idle={c: r[f"{c}_ns"] for c in (*IDLE_CAUSES, "outside")},
        gaps={}, kernels=r["kernels"] or 0, launched=r["kernels"] or 0,
        short_kernels=r["short_kernels"] or 0, kernel_ns=r["kernel_ns"] or 0,
        memcpy_ns=r["memcpy_ns"] or 0, exposed_memcpy_ns=None, launch_calls=r["launch_calls"],
        graph_launches=r["graph_launches"], instances=r["instances"], category=r["category"])


def phase_rows(q: Query, sid: int, phase: str | None = None, device: int | None = None) -> list[dict]:
    if not q.has("phase_idle"):
        return []
    return q.dicts(statement("scopes", "phase_scopes", sid=sid, phase=phase, dev=device))
