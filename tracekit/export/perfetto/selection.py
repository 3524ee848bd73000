"""What is exported: the selected sources with their clock offsets, order and labels; the time
window and device filters as SQL; t0; the names of processes, threads and devices."""

from __future__ import annotations

import re
from pathlib import Path

from ...views import query
from .options import ExportError, ExportOptions, ExportResult

BATCH_ROWS = 32_768
_MARKER = re.compile(r"\{\{(\w+)(?:\(([^)]*)\))?\}\}")  # {{name}} / {{name(args)}} of sql/queries/perfetto.sql


def _source_label(s: dict) -> str:
    parts = []
    if s["rank"] is not None:
        parts.append(f"rank {s['rank']}")
    if s["host"]:
        parts.append(s["host"])
    parts.append(f"{s['format']} #{s['source_id']}")
    return " · ".join(parts)



class Selection:
    def __init__(self, con, opts: ExportOptions, result: ExportResult):
        self.con = con
        self.o = opts
        self.r = result

    # -- selection ----------------------------------------------------------------------------
    def resolve_sources(self) -> dict[int, dict]:
        rel = self.con.sql(self.sql("sources"))
        cols = list(rel.columns)
        allsrc = {r[0]: dict(zip(cols, r)) for r in rel.fetchall()}
        if not allsrc:
            raise ExportError("the store has no sources; convert a trace into it first")
        want = list(dict.fromkeys(self.o.sources)) or list(allsrc)
        missing = [s for s in want if s not in allsrc]
        if missing:
            raise ExportError(f"no source {', '.join(map(str, missing))} in the store "
                              f"(sources: {', '.join(map(str, allsrc))})")
        bad_align = [s for s in self.o.align if s not in want]
        if bad_align:
            raise ExportError(f"--align names source {bad_align[0]}, which is not selected")
        sel = {s: allsrc[s] for s in want}
        self._refuse_no_timeline(sel)
        known = {}
        for sid, s in sel.items():
            if sid in self.o.align:
                s["offset"], s["offset_from"] = self.o.align[sid], "--align"
                known[sid] = s["offset"]
            elif s["clock_offset_ns"] is not None:
                s["offset"], s["offset_from"] = s["clock_offset_ns"], f"clock_offset_ns ({s['clock_origin']})"
                known[sid] = s["offset"]
        starts = [sel[sid]["start_ns"] + off for sid, off in known.items() if sel[sid]["start_ns"] is not None]
        ref = min(starts) if starts else 0
        for sid, s in sel.items():
            if "offset" not in s:
                s["offset"] = ref - (s["start_ns"] or 0)
                s["offset_from"] = "unknown clock: first event aligned to the earliest source"
                if len(sel) > 1 and s["start_ns"] is not None:
                    self.r.warnings.append(
                        f"source {sid} ({Path(s['path']).name}) has no known clock offset; its first "
                        f"event was aligned with the earliest source's. Use --align {sid}=OFFSET_NS "
                        "to place it exactly")
        if self.o.relative:
            firsts = [s["start_ns"] + s["offset"] for s in sel.values() if s["start_ns"] is not None]
            base = min(firsts) if firsts else 0
            for name in ("start", "end"):
                if self.o.relative.get(name) and getattr(self.o, f"{name}_ns") is not None:
                    setattr(self.o, f"{name}_ns", getattr(self.o, f"{name}_ns") + base)
            self.o.relative = {}
            if self.o.start_ns is not None and self.o.end_ns is not None and self.o.end_ns <= self.o.start_ns:
                raise ExportError("--end must be after --start")
        order = sorted(sel.values(), key=lambda s: (s["rank"] is None, s["rank"] or 0, s["host"] or "",
                                                    s["source_id"]))
        for i, s in enumerate(order):
            s["ord"] = i
            s["label"] = _source_label(s)
        return sel

    #: the tables whose rows are drawn on the timeline
    TIMELINE_TABLES = ("events", "api_calls", "kernels", "memops", "syncs", "counters", "memory_events")

    def _refuse_no_timeline(self, sel: dict[int, dict]) -> None:
        """Nothing to draw (e.g. an ncu-only store: per-kernel metrics, no times on a timeline):
        an error, not an empty trace."""
        ids = ", ".join(map(str, sel))
        have = {r[0] for r in self.con.execute(self.sql("tables")).fetchall()}
        for t in self.TIMELINE_TABLES:
            if t in have and self.con.execute(self.sql("has_rows", table=t, ids=ids)).fetchall():
                return
        what = ", ".join(f"{sid} ({Path(s['path']).name}, {s['format']})" for sid, s in sel.items())
        raise ExportError(
            f"nothing to draw: source{'s' if len(sel) > 1 else ''} {what} "
            f"{'have' if len(sel) > 1 else 'has'} no timeline (no kernels, API calls, host events or "
            "counters; Nsight Compute results are per-kernel metrics without times); convert an nsys "
            "or torch.profiler capture of the same run into the store, or use `tracekit sql` / "
            "`tracekit diagnose` on these results")

    def _win(self, alias: str, start="start_ns", end="end_ns") -> str:
        """The window condition on rows of ``alias`` (sql/queries/perfetto.sql: starts_before_end,
        ends_after_start), of the window's bounds that are set."""
        o = self.o
        conds = [query("perfetto", name) for name, bound in (("starts_before_end", o.end_ns),
                                                             ("ends_after_start", o.start_ns)) if bound is not None]
        return " AND ".join(c.replace("{{a}}", alias).replace("{{start}}", start).replace("{{end}}", end)
                            for c in conds) or "TRUE"

    def _dev(self, alias: str, allow_null: bool = False) -> str:
        if not self.o.devices:
            return "TRUE"
        ids = ", ".join(str(int(d)) for d in self.o.devices)
        cond = query("perfetto", "on_devices_or_null" if allow_null else "on_devices")
        return cond.replace("{{a}}", alias).replace("{{devices}}", ids)

    def sql(self, name: str, **parts) -> str:
        """Statement ``name`` of sql/queries/perfetto.sql with its markers filled in: the window
        (`_win`) and device (`_dev`) conditions, the source ids and the ``parts`` given."""
        def fill(m):
            what, args = m.group(1), [a.strip() for a in (m.group(2) or "").split(",") if a.strip()]
            if what == "win":
                return self._win(*args)
            if what in ("dev", "dev_or_null"):
                return self._dev(args[0], what == "dev_or_null")
            if what == "ids" and what not in parts:
                return ", ".join(str(int(sid)) for sid in self.sources)
            return parts[what]
        return _MARKER.sub(fill, query("perfetto", name))

    def params(self, sql: str, **extra) -> dict:
        """The query parameters that ``sql`` uses (DuckDB rejects unused ones)."""
        p = {"ws": self.o.start_ns, "we": self.o.end_ns, **extra}
        return {k: v for k, v in p.items() if re.search(rf"\${k}\b", sql)}

    def execute(self, sql: str, **params):
        return self.con.execute(sql, self.params(sql, **params)).fetchall()

    def reader(self, sql: str, **params):
        rel = self.con.sql(sql, params=self.params(sql, **params))
        return rel.to_arrow_reader(BATCH_ROWS)

    # -- setup ----------------------------------------------------------------------------------
    def setup_sources(self):
        con = self.con
        import pyarrow as pa

        sel = self.sources
        tbl = pa.table({"source_id": pa.array(list(sel), pa.int32()),
                        "off": pa.array([s["offset"] for s in sel.values()], pa.int64()),
                        "ord": pa.array([s["ord"] for s in sel.values()], pa.int32()),
                        "kin": pa.array([s["format"] == "kineto" for s in sel.values()], pa.bool_())})
        con.register("tk_src_arrow", tbl)
        con.execute(self.sql("create_sources"))
        con.unregister("tk_src_arrow")
        t0 = self.execute(self.sql("t0"))[0][0]
        self.t0 = self.r.t0_ns = int(t0) if t0 is not None else 0
        if t0 is None:
            self.r.warnings.append("the selection holds no events; the trace is empty")

    def names(self):
        con = self.con
        proc_names = {}
        for sid, pid, name in con.execute(self.sql("process_names")).fetchall():
            proc_names.setdefault((sid, pid), name)
        thread_names = {}
        for sid, pid, tid, name in con.execute(self.sql("thread_names")).fetchall():
            thread_names.setdefault((sid, pid, tid), name)
        dev_names = {}
        for sid, dev, name in con.execute(self.sql("device_names")).fetchall():
            dev_names.setdefault((sid, dev), name)
        return proc_names, thread_names, dev_names
