"""Slices: API calls, host events, kernels, memops, GPU annotations and sync records, one SQL
query per source and track kind, placed on lanes and handed to the writer."""

from __future__ import annotations

import orjson

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
        have = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
        if not have & {"hotspots_bound", "kernel_bounds"}:
            return None
        if not con.execute("SELECT count(*) FROM (SELECT 1 FROM ncu_kernels LIMIT 1)").fetchall()[0][0]:
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
            cands.append(("SELECT source_id, name, any_value(bound) AS bound FROM hotspots_bound "
                          "WHERE bound IS NOT NULL GROUP BY ALL",
                          "tkb.source_id = k.source_id AND tkb.name = k.name"))
    if "kernel_bounds" in have:
        c = cols("kernel_bounds")
        if "bound" in c:
            for kc in ("short_name", "name"):
                if kc in c:
                    cands.append((f"SELECT {kc}, any_value(bound) AS bound FROM kernel_bounds "
                                  f"WHERE bound IS NOT NULL GROUP BY ALL", f"tkb.{kc} = k.{kc}"))
                    break
    for sub, on in cands:
        try:
            con.execute(f"SELECT * FROM ({sub}) LIMIT 0").fetchall()
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
            con.execute(f"CREATE OR REPLACE TEMP TABLE tk_bound AS {bound[0]}")
            self.bound_join, self.bound_expr = f" LEFT JOIN tk_bound tkb ON {bound[1]}", "tkb.bound::VARCHAR"

    # -- streams ---------------------------------------------------------------------------------
    # One query per source and stream kind, ordered by track, then (ts, longer first); DuckDB
    # builds the args text (string concatenation: its JSON functions cost µs per row) and, for
    # JSON, the event text around pid/tid.  Memory: DuckDB sorts one source at a time, Python
    # holds one Arrow batch.
    _TEXT = """,
        '{"ph":"' || CASE WHEN instant THEN 'i","s":"t' ELSE 'X' END || '","cat":'
          || to_json(coalesce(cat, 'other')) || ',"name":' || to_json(coalesce(nullif(name, ''), '[No name]'))
          || ',' AS pre,
        '"ts":' || (ts // 1000) || '.' || lpad((ts % 1000)::VARCHAR, 3, '0')
          || CASE WHEN instant OR dur < 0 THEN ''
                  ELSE ',"dur":' || (dur // 1000) || '.' || lpad((dur % 1000)::VARCHAR, 3, '0') END
          || CASE WHEN out_first IS NOT NULL THEN ',"bind_id":' || out_first || ',"flow_out":true'
                  WHEN in_link IS NOT NULL THEN ',"bind_id":' || in_bind || ',"flow_in":true' ELSE '' END AS post"""

    def _wrap(self, w, inner: str, order: str) -> str:
        text = self._TEXT if w.text else ""
        return f"SELECT * {text} FROM ({inner}) ORDER BY {order}"

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
        W = self._win
        api_args = _args_sql("a", [("correlation", "a.correlation_id", "num"),
                                   ("External id", "a.external_id", "num")])
        inner = f"""
            SELECT 0 AS kind, a.source_id, a.pid, a.tid, a.start_ns + s.off - $t0 AS ts, a.dur_ns AS dur,
                   false AS instant, a.name, coalesce(CASE a.api WHEN 'hip_runtime' THEN 'cuda_runtime' ELSE a.api END,
                                                      'cuda_api') AS cat, {api_args} AS args,
                   l.first_link AS out_first, l.n_links AS out_n, NULL::BIGINT AS in_link, NULL::BIGINT AS in_bind
            FROM api_calls a JOIN tk_src s USING (source_id) LEFT JOIN tk_launch l ON l.api_rowid = a.rowid
            WHERE a.source_id = $sid AND {W('a')}
            UNION ALL
            SELECT 1, e.source_id, e.pid, e.tid, e.start_ns + s.off - $t0, e.dur_ns,
                   coalesce(e.is_instant, false), e.name, e.category, {_args_sql("e", [])}, NULL, NULL, NULL, NULL
            FROM events e JOIN tk_src s USING (source_id)
            WHERE e.source_id = $sid AND e.device_id IS NULL AND e.stream_id IS NULL AND {W('e')}"""
        sql = self._wrap(w, inner, "(pid IS NULL OR pid < 1), pid, (tid IS DISTINCT FROM pid), "
                                   "tid NULLS LAST, ts, dur DESC, kind DESC")
        self._stream(w, sql, ("source_id", "pid", "tid"),
                     lambda k, lane: L.host_thread(k[0], k[1], k[2], lane), lambda k: True)

    def gpu(self, L: Layout, w):
        W, D = self._win, self._dev
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
        inner = f"""
            SELECT 0 AS kind, k.source_id, k.device_id, k.stream_id, k.start_ns + s.off - $t0 AS ts,
                   k.dur_ns AS dur, false AS instant, k.name, 'kernel' AS cat, {k_args} AS args,
                   NULL::BIGINT AS out_first, NULL::BIGINT AS out_n, l.link_id AS in_link,
                   l.link_id - l.link_rank AS in_bind
            FROM kernels k JOIN tk_src s USING (source_id)
                 LEFT JOIN tk_links l ON l.tbl = 'k' AND l.g_rowid = k.rowid {self.bound_join}
            WHERE k.source_id = $sid AND {W('k')} AND {D('k')}
            UNION ALL
            SELECT 1, m.source_id, m.device_id, m.stream_id, m.start_ns + s.off - $t0, m.dur_ns, false,
                   m.name, CASE m.kind WHEN 'memcpy' THEN 'gpu_memcpy' WHEN 'memset' THEN 'gpu_memset'
                                       ELSE coalesce(m.kind, 'memop') END, {m_args},
                   NULL, NULL, l.link_id, l.link_id - l.link_rank
            FROM memops m JOIN tk_src s USING (source_id)
                 LEFT JOIN tk_links l ON l.tbl = 'm' AND l.g_rowid = m.rowid
            WHERE m.source_id = $sid AND {W('m')} AND {D('m')}"""
        sql = self._wrap(w, inner, "device_id NULLS LAST, stream_id NULLS LAST, ts, dur DESC, kind")
        self._stream(w, sql, ("source_id", "device_id", "stream_id"),
                     lambda k, lane: L.gpu_thread(k[0], k[1], "stream", k[2], lane), lambda k: False)

    def gpu_side(self, L: Layout, w):
        """GPU annotations and sync records, next to their stream."""
        W, D = self._win, self._dev
        e_args = _args_sql("e", [("device", "e.device_id", "num"), ("stream", "e.stream_id", "num"),
                                 ("correlation", "e.correlation_id", "num"),
                                 ("External id", "e.external_id", "num")])
        y_args = _args_sql("y", [("device", "y.device_id", "num"), ("stream", "y.stream_id", "num"),
                                 ("correlation", "y.correlation_id", "num"), ("sync type", "y.sync_type", "str"),
                                 ("wait_on_cuda_event_id", "y.event_id", "num")])
        inner = f"""
            SELECT 'annot' AS kind, e.source_id, e.device_id, e.stream_id, e.start_ns + s.off - $t0 AS ts,
                   e.dur_ns AS dur, coalesce(e.is_instant, false) AS instant, e.name, e.category AS cat,
                   {e_args} AS args, NULL::BIGINT AS out_first, NULL::BIGINT AS out_n, NULL::BIGINT AS in_link,
                   NULL::BIGINT AS in_bind
            FROM events e JOIN tk_src s USING (source_id)
            WHERE e.source_id = $sid AND (e.device_id IS NOT NULL OR e.stream_id IS NOT NULL)
              AND {W('e')} AND {D('e')}
            UNION ALL
            SELECT 'sync', y.source_id, y.device_id, y.stream_id, y.start_ns + s.off - $t0, y.dur_ns, false,
                   CASE y.sync_type WHEN 'stream_sync' THEN 'Stream Sync' WHEN 'event_sync' THEN 'Event Sync'
                        WHEN 'context_sync' THEN 'Context Sync' WHEN 'stream_wait_event' THEN 'Stream Wait Event'
                        ELSE coalesce(y.sync_type, 'sync') END,
                   'cuda_sync', {y_args}, NULL, NULL, NULL, NULL
            FROM syncs y JOIN tk_src s USING (source_id)
            WHERE y.source_id = $sid AND {W('y')} AND {D('y')}"""
        sql = self._wrap(w, inner, "device_id NULLS LAST, kind, stream_id NULLS LAST, ts, dur DESC")
        self._stream(w, sql, ("source_id", "device_id", "kind", "stream_id"),
                     lambda k, lane: L.gpu_thread(k[0], k[1], k[2], k[3], lane), lambda k: k[2] == "annot")
