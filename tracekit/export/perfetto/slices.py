"""Slices: API calls, host events, kernels, memops, GPU annotations and sync records, one SQL
query per source and track kind, placed on lanes and handed to the writer."""

from __future__ import annotations

import orjson

from ...views import query
from .json_writer import fix_big_ints, has_big_int, maybe_big
from .tracks import Lanes, Layout


def _args_sql(alias: str, cols: list, always: list = ()) -> str:
    """SQL for a row's args as JSON object text: ``cols`` (key, SQL expression, kind: 'num',
    'str' or 'raw' JSON text; NULLs left out) then the row's own args JSON.  Kineto rows keep
    their original args alone (the columns were read from them, in the same spelling); other
    formats' args hold only what no column took, so both go in.  ``always`` keys go in for every
    row.  NULL when empty.  (String concatenation: DuckDB's JSON functions cost µs per row.)"""

    def pair(k, e, kind):
        v = {"num": f"({e})::VARCHAR", "str": f"to_json({e})::VARCHAR", "raw": f"({e})"}[kind]
        key = orjson.dumps(k).decode().replace("'", "''")
        return f"CASE WHEN ({e}) IS NOT NULL THEN '{key}:' || {v} END"

    def obj(pairs):
        return "concat_ws(',', " + ", ".join(pair(*x) for x in pairs) + ")" if pairs else "''"

    # JSON text holds raw newlines only between tokens (Kineto writes one arg per line): drop them,
    # one event per line
    raw = f"replace({alias}.args::VARCHAR, chr(10), '')"
    inner = f"CASE WHEN {raw} LIKE '{{%}}' THEN nullif(trim({raw}[2:-2]), '') END"
    ext = obj(always)
    own = f"nullif('{{' || concat_ws(',', nullif({ext}, ''), nullif({obj(cols)}, ''), {inner}) || '}}', '{{}}')"
    if always:
        kin = f"CASE WHEN {ext} = '' THEN {raw} ELSE '{{' || concat_ws(',', {ext}, {inner}) || '}}' END"
    else:
        kin = raw
    return f"CASE WHEN s.kin AND {alias}.args IS NOT NULL THEN {kin} ELSE {own} END"


def _bound_sql(con) -> tuple[str, str] | None:
    """ncu's bound per kernel, from the `hotspots_bound` view (per source and name) or the
    `kernel_bounds` view (per kernel short name) when another part of tracekit provides one and
    the store holds ncu results."""
    try:
        have = {r[0] for r in con.execute(query("perfetto", "views")).fetchall()}
        if not have & {"hotspots_bound", "kernel_bounds"}:
            return None
        if not con.execute(query("perfetto", "has_ncu")).fetchall()[0][0]:
            return None
    except Exception:  # noqa: BLE001
        return None

    def cols(v):
        try:
            return {r[0] for r in con.execute(f"DESCRIBE {v}").fetchall()}
        except Exception:  # noqa: BLE001
            return set()

    cands = []
    if "hotspots_bound" in have:
        c = cols("hotspots_bound")
        if {"source_id", "name", "bound"} <= c:
            cands.append((query("perfetto", "bound_by_name"), "tkb.source_id = k.source_id AND tkb.name = k.name"))
    if "kernel_bounds" in have:
        c = cols("kernel_bounds")
        if "bound" in c:
            for kc in ("short_name", "name"):
                if kc in c:
                    cands.append((query("perfetto", "bound_by_column").replace("{{col}}", kc), f"tkb.{kc} = k.{kc}"))
                    break
    for sub, on in cands:
        try:
            con.execute(query("perfetto", "probe").replace("{{sub}}", sub)).fetchall()
        except Exception:  # noqa: BLE001
            continue
        return sub, on
    return None



class Slices:
    def setup_bound(self):
        con = self.con
        bound = _bound_sql(con)
        self.bound_join, self.bound_expr = "", "NULL::VARCHAR"
        if bound:  # computed once: the bound views are not cheap
            con.execute(self.sql("create_bound", sub=bound[0]))
            self.bound_join, self.bound_expr = f" LEFT JOIN tk_bound tkb ON {bound[1]}", "tkb.bound::VARCHAR"

    # -- streams ---------------------------------------------------------------------------------
    # One query per source and stream kind, ordered by track, then (ts, longer first); DuckDB
    # builds the args text (string concatenation: its JSON functions cost µs per row) and, for
    # JSON, the event text around pid/tid.  Memory: DuckDB sorts one source at a time, Python
    # holds one Arrow batch.

    def _slices(self, w, name: str, **parts) -> str:
        """Statement ``name`` of sql/queries/perfetto.sql, with the JSON event text (json_text)
        for JSON output."""
        return self.sql(name, text=query("perfetto", "json_text") if w.text else "", **parts)
    def _stream(self, w, sql: str, key_cols: tuple, make_track, nest) -> None:
        json_mode = w.text
        record = not json_mode
        skipped = self.r.skipped
        cur = None
        lanes = None
        tracks: list = []
        n = 0  # JSON lines appended and not yet counted
        for batch in self.reader(sql, t0=self.t0, sid=self.sid):
            c = batch.to_pydict()
            keys = list(zip(*(c[k] for k in key_cols)))
            tss, durs, insts, argss = c["ts"], c["dur"], c["instant"], c["args"]
            outs, outn, ins = c["out_first"], c["out_n"], c["in_link"]
            if not json_mode and maybe_big("\n".join(a for a in argss if a).encode()):
                argss = [fix_big_ints(a) if a and has_big_int(a) else a for a in argss]
            if json_mode:
                pres, posts = c["pre"], c["post"]
                buf = w.buf
                buf_append = buf.append
            else:
                names, cats = c["name"], c["cat"]
            for i in range(len(keys)):
                key = keys[i]
                if key != cur:
                    if lanes is not None:
                        self._close(lanes, tracks, w)
                    cur, lanes, tracks = key, Lanes(nest(key), record), []
                    place, place_instant = lanes.place, lanes.place_instant
                ts = tss[i]
                dur = durs[i]
                if dur is None or dur < 0:
                    skipped["rows with a negative or missing duration"] += 1
                    continue
                lane = place_instant(ts) if insts[i] else place(ts, ts + dur)
                if record and lanes.ended:
                    self._ends(lanes, tracks, w)
                if lane >= len(tracks):
                    while len(tracks) <= lane:
                        tracks.append(make_track(key, len(tracks)))
                args = argss[i]
                if json_mode:
                    pt = tracks[lane].end_packet
                    if args:
                        buf_append(f'{pres[i]}{pt}{posts[i]},"args":{args}}}')
                    else:
                        buf_append(f"{pres[i]}{pt}{posts[i]}}}")
                    n += 1
                    if len(buf) >= 8192:
                        w.slices += n
                        n = 0
                        w.flush()
                        buf = w.buf
                        buf_append = buf.append
                else:
                    first = outs[i]
                    w.slice(tracks[lane], ts, names[i], cats[i], args,
                            out_links=range(first, first + outn[i]) if first is not None else None,
                            in_link=ins[i], instant=insts[i])
            if json_mode:
                w.flows += sum(x for x in outn if x)
        if lanes is not None:
            self._close(lanes, tracks, w)
        if json_mode:
            w.slices += n

    def _ends(self, lanes: Lanes, tracks, w):
        for lane, end in lanes.ended:
            w.end(tracks[lane], end)
        lanes.ended.clear()

    def _close(self, lanes: Lanes, tracks, w):
        lanes.close_all()
        if lanes.ended:
            self._ends(lanes, tracks, w)

    def host(self, L: Layout, w):
        api_args = _args_sql("a", [("correlation", "a.correlation_id", "num"),
                                   ("External id", "a.external_id", "num")])
        sql = self._slices(w, "host_slices", api_args=api_args, event_args=_args_sql("e", []))
        self._stream(w, sql, ("source_id", "pid", "tid"),
                     lambda k, lane: L.host_thread(k[0], k[1], k[2], lane), lambda k: True)

    def gpu(self, L: Layout, w):
        common = [("device", "{t}.device_id", "num"), ("stream", "{t}.stream_id", "num"),
                  ("context", "{t}.context_id", "num"), ("correlation", "{t}.correlation_id", "num"),
                  ("External id", "{t}.external_id", "num")]
        k_args = _args_sql("k", [(n, e.format(t="k"), kd) for n, e, kd in common] + [
            ("grid", "'[' || k.grid_x || ',' || k.grid_y || ',' || k.grid_z || ']'", "raw"),
            ("block", "'[' || k.block_x || ',' || k.block_y || ',' || k.block_z || ']'", "raw"),
            ("registers per thread", "k.registers_per_thread", "num"),
            ("shared memory", "k.shared_bytes", "num"),
            ("static shared memory", "k.static_shared_bytes", "num"),
            ("dynamic shared memory", "k.dynamic_shared_bytes", "num"),
            ("graph id", "k.graph_id", "num"), ("graph node id", "k.graph_node_id", "num"),
            ("launch type", "k.launch_type", "num")],
            always=[("ncu", f"'{{\"bound\":' || to_json({self.bound_expr}) || '}}'", "raw")])
        m_args = _args_sql("m", [(n, e.format(t="m"), kd) for n, e, kd in common] + [
            ("bytes", "m.bytes", "num"),
            ("GB/s", "CASE WHEN m.dur_ns > 0 THEN round(m.bytes / m.dur_ns, 3) END", "num"),
            ("copy kind", "m.copy_kind", "str"), ("src kind", "m.src_kind", "str"),
            ("dst kind", "m.dst_kind", "str"), ("graph node id", "m.graph_node_id", "num")])
        sql = self._slices(w, "gpu_slices", k_args=k_args, m_args=m_args, bound_join=self.bound_join)
        self._stream(w, sql, ("source_id", "device_id", "stream_id"),
                     lambda k, lane: L.gpu_thread(k[0], k[1], "stream", k[2], lane), lambda k: False)

    def gpu_side(self, L: Layout, w):
        """GPU annotations and sync records, next to their stream."""
        e_args = _args_sql("e", [("device", "e.device_id", "num"), ("stream", "e.stream_id", "num"),
                                 ("correlation", "e.correlation_id", "num"),
                                 ("External id", "e.external_id", "num")])
        y_args = _args_sql("y", [("device", "y.device_id", "num"), ("stream", "y.stream_id", "num"),
                                 ("correlation", "y.correlation_id", "num"), ("sync type", "y.sync_type", "str"),
                                 ("wait_on_cuda_event_id", "y.event_id", "num")])
        sql = self._slices(w, "gpu_side_slices", e_args=e_args, y_args=y_args)
        self._stream(w, sql, ("source_id", "device_id", "kind", "stream_id"),
                     lambda k, lane: L.gpu_thread(k[0], k[1], k[2], k[3], lane), lambda k: k[2] == "annot")
