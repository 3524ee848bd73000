"""export_perfetto: the selection, then per source its host and GPU tracks, then the counters."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ... import __version__
from .counters import Counters
from .flows import Flows
from .json_writer import JsonWriter
from .options import ExportError, ExportOptions, ExportResult, output_format
from .proto_writer import ProtoWriter
from .selection import Selection
from .sink import Sink
from .slices import Slices
from .tracks import Layout


class _Exporter(Selection, Flows, Slices, Counters):
    def setup(self):
        self.setup_sources()
        self.setup_links()
        self.setup_bound()


    # -- run ---------------------------------------------------------------------------------------
    def run(self, path: Path, fmt: str) -> None:
        self.sources = self.resolve_sources()
        self.r.sources = [{"source_id": sid, "path": s["path"], "format": s["format"], "rank": s["rank"],
                           "host": s["host"], "offset_ns": s["offset"], "offset_from": s["offset_from"],
                           "label": s["label"]} for sid, s in self.sources.items()]
        self.setup()
        sink = Sink(path, gz=str(path).lower().endswith(".gz"), level=self.o.gzip_level)
        ok = False
        try:
            w = JsonWriter(sink) if fmt == "json" else ProtoWriter(sink)
            L = Layout(w, self.sources, *self.names())
            # one source at a time, host first: a launch and its GPU work at the same ts (and
            # dur) then keep file order
            for src in sorted(self.sources.values(), key=lambda x: x["ord"]):
                self.sid = src["source_id"]
                self.host(L, w)
                self.gpu(L, w)
                self.gpu_side(L, w)
            self.sid = None
            self.counters(L, w)
            w.flush()
            top = {"baseTimeNanoseconds": self.t0,
                   "metadata": {"tracekit_version": __version__, "t0_ns": self.t0,
                                "clock": "Unix epoch ns = ts (µs) × 1000 + t0_ns",
                                "sources": self.r.sources}}
            if len(self.sources) == 1:
                s = next(iter(self.sources.values()))
                if s["rank"] is not None:
                    top["distributedInfo"] = {"rank": s["rank"], "world_size": s["world_size"]}
            w.finish(top)
            r = self.r
            r.slices, r.flows, r.counter_samples = w.slices, w.flows, w.samples
            r.counter_tracks = len(L.counters)
            r.extra_lanes = L.extra_lanes
            r.processes = {p.pid: p.name for p in L.processes}
            r.threads = {(t.pid, t.tid): t.name for t in L.threads.values()}
            ok = True
        finally:
            r_bytes = sink.close(ok)
        self.r.bytes_written = r_bytes
        ends = [s["end_ns"] + s["offset"] for s in self.sources.values() if s["end_ns"] is not None]
        if fmt == "json" and ends and self.r.slices and max(ends) - self.t0 >= 10**15:
            self.r.warnings.append(
                f"the exported span is {(max(ends) - self.t0) / 86400e9:.1f} days: beyond 11.5 days "
                "Perfetto's JSON reader loses ns precision; export fewer sources or a .pftrace")
        for t in ("tk_links", "tk_launch", "tk_pairs", "tk_src", "tk_bound"):
            self.con.execute(f"DROP TABLE IF EXISTS {t}")



def export_perfetto(store, out: str | os.PathLike, options: ExportOptions | None = None) -> ExportResult:
    """Export ``store`` (a tracekit.store.Store or a path) to ``out``; returns what was written."""
    from ...store import Store

    opts = options or ExportOptions()
    path = Path(out)
    fmt = output_format(path, opts.format)
    if path.is_dir():
        raise ExportError(f"{path}: is a directory; give a file name")
    if not path.parent.exists():
        raise ExportError(f"{path.parent}: no such directory")
    if opts.start_ns is not None and opts.end_ns is not None and opts.end_ns <= opts.start_ns \
            and opts.relative.get("start") == opts.relative.get("end"):
        raise ExportError("--end must be after --start")
    own = not hasattr(store, "con")
    st = Store(store, read_only=True) if own else store
    t = time.perf_counter()
    result = ExportResult(path=str(path), format=fmt)
    con = st.con
    progress, locked = con.execute(
        "SELECT current_setting('enable_progress_bar'), current_setting('lock_configuration')").fetchall()[0]
    if not locked:  # a sandboxed store has it off already (store.SANDBOX)
        con.execute("SET enable_progress_bar = false")  # DuckDB would draw on stdout
    try:
        _Exporter(con, opts, result).run(path, fmt)
    finally:
        if not locked:
            con.execute(f"SET enable_progress_bar = {'true' if progress else 'false'}")
        if own:
            st.close()
    result.seconds = time.perf_counter() - t
    return result
