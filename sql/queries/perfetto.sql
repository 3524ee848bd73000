-- perfetto: the statements of `tracekit export` to Perfetto (tracekit/export/perfetto/): the
-- selected sources, the rows of each track kind, the launch links, the counters. A statement
-- reads the selection from TEMP tables the export creates (tk_src: source_id, off (the clock
-- offset added to its times, ns), ord (its place in the output), kin (a Kineto source); tk_links,
-- tk_launch, tk_bound: below). Times are exported as ts = time + off - $t0. Besides DuckDB's
-- prepared parameters ($t0, $sid, $ws/$we: the window's start/end, $B: the bucket length),
-- the text holds markers the export fills in (`Selection.sql`):
--   {{win(a)}}, {{win(a, start, end)}}  the time window on rows of alias a (starts_before_end,
--                                       ends_after_start, below); TRUE without --start/--end
--   {{dev(a)}}, {{dev_or_null(a)}}      on_devices, on_devices_or_null (below); TRUE without --device
--   {{ids}}                             the selected source ids, comma-separated
--   {{name}}                            a piece of SQL the caller builds (args JSON text, ...)

-- starts_before_end: the window's end condition on a row of alias {{a}} ({{start}}: its start
-- column): it starts before $we (exported time).
{{a}}.{{start}} + s.off < $we;

-- ends_after_start: the window's start condition on a row of alias {{a}} ({{start}}, {{end}}:
-- its start and end columns): it ends after $ws, or, of length 0, starts at or after $ws.
({{a}}.{{end}} + s.off > $ws OR ({{a}}.{{end}} = {{a}}.{{start}} AND {{a}}.{{start}} + s.off >= $ws));

-- on_devices: the device condition on a row of alias {{a}}: on one of the devices of --device
-- ({{devices}}, comma-separated).
{{a}}.device_id IN ({{devices}});

-- on_devices_or_null: on_devices, or of no device (a host-side counter).
({{a}}.device_id IS NULL OR {{a}}.device_id IN ({{devices}}));

-- sources: every source of the store, in order.
-- Columns: source_id, path, format, host, rank, world_size, clock_origin, clock_offset_ns,
--   start_ns, end_ns
SELECT source_id, path, format, host, rank, world_size, clock_origin, clock_offset_ns, start_ns, end_ns
FROM sources ORDER BY source_id;

-- tables: the tables of the store.
-- Columns: table_name
SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main';

-- has_rows: one row if table {{table}} has a row of a selected source.
SELECT 1 FROM {{table}} WHERE source_id IN ({{ids}}) LIMIT 1;

-- create_sources: tk_src, from the Arrow table the export registers as tk_src_arrow.
CREATE OR REPLACE TEMP TABLE tk_src AS SELECT * FROM tk_src_arrow;

-- t0: the earliest exported time (ns, offsets added) of the selection: API calls, host events,
-- kernels, memops, syncs, counter samples and memory events in the window and on the devices.
SELECT min(v) FROM (
  SELECT min(a.start_ns + s.off) v FROM api_calls a JOIN tk_src s USING (source_id) WHERE {{win(a)}}
  UNION ALL SELECT min(a.start_ns + s.off) FROM events a JOIN tk_src s USING (source_id)
    WHERE {{win(a)}} AND (a.device_id IS NULL OR {{dev(a)}})
  UNION ALL SELECT min(a.start_ns + s.off) FROM kernels a JOIN tk_src s USING (source_id)
    WHERE {{win(a)}} AND {{dev(a)}}
  UNION ALL SELECT min(a.start_ns + s.off) FROM memops a JOIN tk_src s USING (source_id)
    WHERE {{win(a)}} AND {{dev(a)}}
  UNION ALL SELECT min(a.start_ns + s.off) FROM syncs a JOIN tk_src s USING (source_id)
    WHERE {{win(a)}} AND {{dev(a)}}
  UNION ALL SELECT min(a.ts_ns + s.off) FROM counters a JOIN tk_src s USING (source_id)
    WHERE {{win(a, ts_ns, ts_ns)}} AND {{dev_or_null(a)}}
  UNION ALL SELECT min(a.ts_ns + s.off) FROM memory_events a JOIN tk_src s USING (source_id)
    WHERE {{win(a, ts_ns, ts_ns)}} AND {{dev_or_null(a)}});

-- process_names: the named processes of the selected sources.
-- Columns: source_id, pid, name
SELECT source_id, pid, name FROM processes WHERE source_id IN ({{ids}}) AND name IS NOT NULL
ORDER BY source_id, pid;

-- thread_names: the named threads of the selected sources.
-- Columns: source_id, pid, tid, name
SELECT source_id, pid, tid, name FROM threads WHERE source_id IN ({{ids}}) AND name IS NOT NULL
ORDER BY source_id, pid, tid;

-- device_names: the named devices of the selected sources.
-- Columns: source_id, device_id, name
SELECT source_id, device_id, name FROM devices WHERE source_id IN ({{ids}}) AND name IS NOT NULL
ORDER BY source_id, device_id;

-- create_pairs: tk_pairs, each exported kernel or memop (tbl 'k' or 'm', g_rowid its rowid,
-- g_s its exported start) with the exported launch call that launched it (api_rowid, api_s):
-- the launch call of each (source, pid, correlation id) is tk_launch_calls() of
-- sql/lib/host_calls.sql, as its api_calls row (calls with the same start and end are one call
-- twice: the first row), joined by the one launch rule tk_launch_link. ok: the GPU work comes
-- after its call in Perfetto's order (by ts, then longer first, then file order: host first).
CREATE OR REPLACE TEMP TABLE tk_pairs AS
WITH chosen AS (
  SELECT c.source_id, c.pid, c.correlation_id, c.n_pids, min(a.rowid) AS api_rowid,
         c.start_ns + s.off AS api_s, c.dur_ns AS api_dur
  FROM tk_launch_calls() c JOIN tk_src s USING (source_id)
       JOIN api_calls a ON a.source_id = c.source_id AND a.pid IS NOT DISTINCT FROM c.pid
        AND a.correlation_id = c.correlation_id AND a.start_ns = c.start_ns
        AND a.end_ns IS NOT DISTINCT FROM c.end_ns
  WHERE c.source_id IN ({{ids}}) AND {{win(a)}}
  GROUP BY ALL
), gpu AS (
  SELECT 'k' AS tbl, k.rowid AS g_rowid, k.source_id, k.pid, k.correlation_id,
         k.start_ns + s.off AS g_s, k.dur_ns AS g_dur
  FROM kernels k JOIN tk_src s USING (source_id)
  WHERE k.correlation_id IS NOT NULL AND {{win(k)}} AND {{dev(k)}}
  UNION ALL
  SELECT 'm', m.rowid, m.source_id, m.pid, m.correlation_id, m.start_ns + s.off, m.dur_ns
  FROM memops m JOIN tk_src s USING (source_id)
  WHERE m.correlation_id IS NOT NULL AND {{win(m)}} AND {{dev(m)}}
)
SELECT g.tbl, g.g_rowid, c.api_rowid, g.g_s, c.api_s,
       g.g_s > c.api_s OR (g.g_s = c.api_s AND g.g_dur <= c.api_dur) AS ok
FROM gpu g JOIN chosen c ON g.source_id = c.source_id AND g.correlation_id = c.correlation_id
WHERE tk_launch_link(g.pid, c.pid, c.n_pids);

-- late_links: the launch links whose GPU work starts before its call (no arrow: counted).
SELECT count(*) FROM tk_pairs WHERE NOT ok;

-- create_links: tk_links, the arrows drawn: link_id numbers them by call, then GPU start;
-- link_rank is the place of the GPU work among its call's.
CREATE OR REPLACE TEMP TABLE tk_links AS
SELECT tbl, g_rowid, api_rowid,
       row_number() OVER (ORDER BY api_rowid, g_s, tbl, g_rowid) AS link_id,
       row_number() OVER (PARTITION BY api_rowid ORDER BY g_s, tbl, g_rowid) - 1 AS link_rank
FROM tk_pairs WHERE ok;

-- create_launch: tk_launch, per launch call with arrows: its first link id and its links.
CREATE OR REPLACE TEMP TABLE tk_launch AS
SELECT api_rowid, min(link_id) AS first_link, count(*) AS n_links FROM tk_links GROUP BY api_rowid;

-- views: the views of the connection.
SELECT view_name FROM duckdb_views();

-- has_ncu: 1 when the store holds an ncu result.
SELECT count(*) FROM (SELECT 1 FROM ncu_kernels LIMIT 1);

-- bound_by_name: ncu's bound per source and kernel name (`hotspots_bound`).
-- Columns: source_id, name, bound
SELECT source_id, name, any_value(bound) AS bound FROM hotspots_bound
WHERE bound IS NOT NULL GROUP BY ALL;

-- bound_by_column: ncu's bound per value of column {{col}} (short_name or name) of
-- `kernel_bounds`.
-- Columns: {{col}}, bound
SELECT {{col}}, any_value(bound) AS bound FROM kernel_bounds
WHERE bound IS NOT NULL GROUP BY ALL;

-- probe: no rows; fails where {{sub}} cannot run.
SELECT * FROM ({{sub}}) LIMIT 0;

-- create_bound: tk_bound, the rows of {{sub}} (a bound_by_* statement), computed once.
CREATE OR REPLACE TEMP TABLE tk_bound AS {{sub}};

-- json_text: the JSON event text around pid/tid of a slice row (`Slices._stream`): pre, the
-- text up to the pid, and post, the time, duration and flow binding after it.
,
'{"ph":"' || CASE WHEN instant THEN 'i","s":"t' ELSE 'X' END || '","cat":'
  || to_json(coalesce(cat, 'other')) || ',"name":' || to_json(coalesce(nullif(name, ''), '[No name]'))
  || ',' AS pre,
'"ts":' || (ts // 1000) || '.' || lpad((ts % 1000)::VARCHAR, 3, '0')
  || CASE WHEN instant OR dur < 0 THEN ''
          ELSE ',"dur":' || (dur // 1000) || '.' || lpad((dur % 1000)::VARCHAR, 3, '0') END
  || CASE WHEN out_first IS NOT NULL THEN ',"bind_id":' || out_first || ',"flow_out":true'
          WHEN in_link IS NOT NULL THEN ',"bind_id":' || in_bind || ',"flow_in":true' ELSE '' END AS post;

-- host_slices: the host rows of source $sid: API calls (kind 0, with the arrows they start)
-- and host events (kind 1: no device, no stream), with {{text}} (json_text, or nothing for a
-- .pftrace); per process and thread (pid < 1 and NULL last, the main thread first), then by
-- time, longer first.
-- Columns: kind, source_id, pid, tid, ts, dur, instant, name, cat, args, out_first, out_n,
--   in_link, in_bind
SELECT * {{text}} FROM (
    SELECT 0 AS kind, a.source_id, a.pid, a.tid, a.start_ns + s.off - $t0 AS ts, a.dur_ns AS dur,
           false AS instant, a.name, coalesce(CASE a.api WHEN 'hip_runtime' THEN 'cuda_runtime' ELSE a.api END,
                                              'cuda_api') AS cat, {{api_args}} AS args,
           l.first_link AS out_first, l.n_links AS out_n, NULL::BIGINT AS in_link, NULL::BIGINT AS in_bind
    FROM api_calls a JOIN tk_src s USING (source_id) LEFT JOIN tk_launch l ON l.api_rowid = a.rowid
    WHERE a.source_id = $sid AND {{win(a)}}
    UNION ALL
    SELECT 1, e.source_id, e.pid, e.tid, e.start_ns + s.off - $t0, e.dur_ns,
           coalesce(e.is_instant, false), e.name, e.category, {{event_args}}, NULL, NULL, NULL, NULL
    FROM events e JOIN tk_src s USING (source_id)
    WHERE e.source_id = $sid AND e.device_id IS NULL AND e.stream_id IS NULL AND {{win(e)}})
ORDER BY (pid IS NULL OR pid < 1), pid, (tid IS DISTINCT FROM pid), tid NULLS LAST, ts, dur DESC, kind DESC;

-- gpu_slices: the kernels (kind 0, with ncu's bound through {{bound_join}}) and memops
-- (kind 1) of source $sid, with the arrow each ends; per device and stream, then by time.
-- Columns: as host_slices, device_id and stream_id for pid and tid
SELECT * {{text}} FROM (
    SELECT 0 AS kind, k.source_id, k.device_id, k.stream_id, k.start_ns + s.off - $t0 AS ts,
           k.dur_ns AS dur, false AS instant, k.name, 'kernel' AS cat, {{k_args}} AS args,
           NULL::BIGINT AS out_first, NULL::BIGINT AS out_n, l.link_id AS in_link,
           l.link_id - l.link_rank AS in_bind
    FROM kernels k JOIN tk_src s USING (source_id)
         LEFT JOIN tk_links l ON l.tbl = 'k' AND l.g_rowid = k.rowid {{bound_join}}
    WHERE k.source_id = $sid AND {{win(k)}} AND {{dev(k)}}
    UNION ALL
    SELECT 1, m.source_id, m.device_id, m.stream_id, m.start_ns + s.off - $t0, m.dur_ns, false,
           m.name, CASE m.kind WHEN 'memcpy' THEN 'gpu_memcpy' WHEN 'memset' THEN 'gpu_memset'
                               ELSE coalesce(m.kind, 'memop') END, {{m_args}},
           NULL, NULL, l.link_id, l.link_id - l.link_rank
    FROM memops m JOIN tk_src s USING (source_id)
         LEFT JOIN tk_links l ON l.tbl = 'm' AND l.g_rowid = m.rowid
    WHERE m.source_id = $sid AND {{win(m)}} AND {{dev(m)}})
ORDER BY device_id NULLS LAST, stream_id NULLS LAST, ts, dur DESC, kind;

-- gpu_side_slices: GPU annotations (kind 'annot': events with a device or stream) and sync
-- records (kind 'sync') of source $sid, next to their stream.
-- Columns: as gpu_slices, kind a VARCHAR
SELECT * {{text}} FROM (
    SELECT 'annot' AS kind, e.source_id, e.device_id, e.stream_id, e.start_ns + s.off - $t0 AS ts,
           e.dur_ns AS dur, coalesce(e.is_instant, false) AS instant, e.name, e.category AS cat,
           {{e_args}} AS args, NULL::BIGINT AS out_first, NULL::BIGINT AS out_n, NULL::BIGINT AS in_link,
           NULL::BIGINT AS in_bind
    FROM events e JOIN tk_src s USING (source_id)
    WHERE e.source_id = $sid AND (e.device_id IS NOT NULL OR e.stream_id IS NOT NULL)
      AND {{win(e)}} AND {{dev(e)}}
    UNION ALL
    SELECT 'sync', y.source_id, y.device_id, y.stream_id, y.start_ns + s.off - $t0, y.dur_ns, false,
           CASE y.sync_type WHEN 'stream_sync' THEN 'Stream Sync' WHEN 'event_sync' THEN 'Event Sync'
                WHEN 'context_sync' THEN 'Context Sync' WHEN 'stream_wait_event' THEN 'Stream Wait Event'
                ELSE coalesce(y.sync_type, 'sync') END,
           'cuda_sync', {{y_args}}, NULL, NULL, NULL, NULL
    FROM syncs y JOIN tk_src s USING (source_id)
    WHERE y.source_id = $sid AND {{win(y)}} AND {{dev(y)}})
ORDER BY device_id NULLS LAST, kind, stream_id NULLS LAST, ts, dur DESC;

-- counters: the store's counter samples in the window and on the devices (or of no device),
-- per source, process, device and name, by time.
-- Columns: ord, source_id, pid, device_id, name, ts, value
SELECT s.ord, c.source_id, c.pid, c.device_id, c.name, c.ts_ns + s.off - $t0 AS ts, c.value
FROM counters c JOIN tk_src s USING (source_id)
WHERE {{win(c, ts_ns, ts_ns)}} AND {{dev_or_null(c)}}
ORDER BY ord, pid NULLS LAST, device_id NULLS LAST, name, ts;

-- memory: device memory under each GPU, the allocator's totals after every allocation and free
-- (tk_memory_series() of sql/lib/memory.sql, the definition `memory_timeline` uses).
-- Columns: sord, source_id, device_id, allocator, ts, allocated, reserved
SELECT s.ord AS sord, m.source_id, m.device_id, m.allocator, m.ts_ns + s.off - $t0 AS ts,
       m.allocated, m.reserved
FROM tk_memory_series() m JOIN tk_src s USING (source_id)
WHERE {{win(m, ts_ns, ts_ns)}} AND {{dev(m)}}
ORDER BY sord, m.device_id, m.allocator, m.ord;

-- gpu_end: the latest end (ns, offsets added) of an exported kernel or memop.
SELECT max(v) FROM (
  SELECT max(k.end_ns + s.off) AS v FROM kernels k JOIN tk_src s USING (source_id) WHERE {{win(k)}} AND {{dev(k)}}
  UNION ALL SELECT max(m.end_ns + s.off) FROM memops m JOIN tk_src s USING (source_id)
  WHERE {{win(m)}} AND {{dev(m)}});

-- utilization: per GPU and bucket of $B ns, the busy time in it: the busy periods of `gpu_busy`
-- ({{a}}, {{b}}: their start and end, clipped to the window), split at bucket edges.
-- Columns: ord, source_id, device_id, bi (bucket index), busy (ns)
WITH busy AS (
  SELECT s.ord, g.source_id, g.device_id, {{a}} - $t0 AS a, {{b}} - $t0 AS b
  FROM gpu_busy g JOIN tk_src s USING (source_id)
  WHERE {{win(g)}} AND {{dev(g)}}
), bk AS (
  SELECT ord, source_id, device_id, a, b, unnest(generate_series(a // $B, (b - 1) // $B)) AS bi FROM busy
  WHERE b > a
)
SELECT ord, source_id, device_id, bi,
       sum(least(b, (bi + 1) * $B) - greatest(a, bi * $B))::DOUBLE AS busy
FROM bk GROUP BY ALL ORDER BY ord, device_id NULLS LAST, bi;

-- launch_queue: per GPU and bucket of $B ns, the launch queue depth: kernels launched (their
-- call's start, through tk_links) and not yet ended; the largest depth in the bucket and the
-- depth at its end.
-- Columns: ord, source_id, device_id, bi, mx, last
WITH q AS (
  SELECT s.ord, k.source_id, k.device_id, a.start_ns + s.off - $t0 AS t, 1 AS d
  FROM tk_links l JOIN kernels k ON l.tbl = 'k' AND k.rowid = l.g_rowid
       JOIN api_calls a ON a.rowid = l.api_rowid JOIN tk_src s ON s.source_id = k.source_id
  UNION ALL
  SELECT s.ord, k.source_id, k.device_id, k.end_ns + s.off - $t0, -1
  FROM tk_links l JOIN kernels k ON l.tbl = 'k' AND k.rowid = l.g_rowid
       JOIN tk_src s ON s.source_id = k.source_id
), r AS (
  SELECT *, sum(d) OVER (PARTITION BY source_id, device_id ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS depth,
         row_number() OVER (PARTITION BY source_id, device_id ORDER BY t, d) AS rn
  FROM q
)
SELECT ord, source_id, device_id, t // $B AS bi, max(depth) AS mx, arg_max(depth, rn) AS last
FROM r GROUP BY ALL ORDER BY ord, device_id NULLS LAST, bi;
