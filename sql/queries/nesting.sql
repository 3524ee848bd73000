-- nesting: the statements of events.depth / parent_id (tracekit/nesting.py): the events a source's
-- reader left unnested (depth NULL), the set-based nesting of whole tracks (`derive_nesting`
-- without the compiled module), the temporary tables of the compiled module's piecewise path,
-- the re-nesting of the tracks a reader left to the store, and the write-back.  $sid is the
-- source; a track is (pid, tid, device_id, stream_id), NULL matching NULL.

-- unnested_count: the number of events of source $sid that have no depth yet.
-- Columns: n
SELECT count(*) AS n FROM events WHERE source_id = $sid AND depth IS NULL;

-- unnested: the events of source $sid that have no depth yet, with what the nesting needs
-- (the columns `native.nest` takes), in no particular order.
-- Columns: event_id, pid, tid, device_id, stream_id, start_ns, end_ns
SELECT event_id, pid, tid, device_id, stream_id, start_ns, end_ns FROM events
WHERE source_id = $sid AND depth IS NULL;

-- sorted_unnested: the unnested events of source $sid into the temporary table __tk_nord, sorted
-- by DuckDB (which spills beyond its memory limit) in the order of `nest` (tracekit/_native.c):
-- track (NULLs first), start, end descending, event id; read back a piece at a time (piece).
-- Columns: event_id, pid, tid, device_id, stream_id, start_ns, end_ns
CREATE OR REPLACE TEMP TABLE __tk_nord AS
SELECT event_id, pid, tid, device_id, stream_id, start_ns, end_ns FROM events
WHERE source_id = $sid AND depth IS NULL
ORDER BY pid NULLS FIRST, tid NULLS FIRST, device_id NULLS FIRST, stream_id NULLS FIRST,
         start_ns, end_ns DESC, event_id;

-- fix_table: the temporary table __tk_nfix that the pieces' results are appended to.
-- Columns: event_id, depth, parent_id
CREATE OR REPLACE TEMP TABLE __tk_nfix (event_id BIGINT, depth INTEGER, parent_id BIGINT);

-- sorted_base: the first rowid of __tk_nord.  Rowids of a table created in an open transaction
-- start high (DuckDB's transaction-local storage), contiguous in the sorted order.
-- Columns: base
SELECT min(rowid) AS base FROM __tk_nord;

-- piece: the rows of __tk_nord of rowid $a to $b (excluded), in the sorted order.
-- Columns: event_id, pid, tid, device_id, stream_id, start_ns, end_ns
SELECT event_id, pid, tid, device_id, stream_id, start_ns, end_ns FROM __tk_nord
WHERE rowid >= $a AND rowid < $b ORDER BY rowid;

-- fix_count: the number of rows of __tk_nfix (every unnested event once: checked).
-- Columns: n
SELECT count(*) AS n FROM __tk_nfix;

-- fix_span: the first and last event id of __tk_nfix (the write-back goes in slices of ids).
-- Columns: lo, hi
SELECT min(event_id) AS lo, max(event_id) AS hi FROM __tk_nfix;

-- write_back: the events of source $sid of event id $lo to $hi get depth / parent_id from the
-- table {{fix}} (event_id, depth, parent_id: __tk_fix, registered from Arrow, or __tk_nfix).
-- Both sides are limited to the ids, so that one UPDATE touches a piece's worth of rows.
UPDATE events AS e SET depth = f.depth, parent_id = f.parent_id
FROM {{fix}} AS f WHERE e.source_id = $sid AND e.event_id = f.event_id
AND e.event_id BETWEEN $lo AND $hi AND f.event_id BETWEEN $lo AND $hi;

-- ordered: the unnested events of source $sid into the temporary table __tk_ord, each with its
-- track's number (track, from 1) and its position in the track (pos, from 0) in the order
-- start, end descending, event id.  Tracks are numbered through a small table of distinct
-- tracks (a hash join), not a window over all events; positions by one sort per track.
-- Columns: event_id, s (start_ns), e (end_ns), track, pos
CREATE OR REPLACE TEMP TABLE __tk_ord AS
WITH ev AS (SELECT event_id, start_ns, end_ns, pid, tid, device_id, stream_id FROM events
            WHERE source_id = $sid AND depth IS NULL),
tr AS (SELECT pid, tid, device_id, stream_id,
              row_number() OVER (ORDER BY pid, tid, device_id, stream_id) AS track
       FROM (SELECT DISTINCT pid, tid, device_id, stream_id FROM ev))
SELECT event_id, start_ns AS s, end_ns AS e, track,
       row_number() OVER (PARTITION BY track ORDER BY start_ns, end_ns DESC, event_id) - 1 AS pos
FROM ev JOIN tr ON ev.pid IS NOT DISTINCT FROM tr.pid AND ev.tid IS NOT DISTINCT FROM tr.tid
     AND ev.device_id IS NOT DISTINCT FROM tr.device_id
     AND ev.stream_id IS NOT DISTINCT FROM tr.stream_id;

-- ordered_count: the number of rows of __tk_ord.
-- Columns: n
SELECT count(*) AS n FROM __tk_ord;

-- depths: the depth of each event of __tk_ord into the temporary table __tk_depth.  With the
-- events of a track in order (start, end descending, input order), the events still open when
-- event i starts are the earlier ones with end > start_i, and when no two events of the track
-- partially overlap they form a chain, so depth_i is their number:
-- depth_i = pos_i - #(earlier events with e <= s_i), counted in one sweep over the start and end
-- points of the track: an end point sorts before the start points at its time, except a
-- zero-length event's, which sorts right after its own start point.  The sweep sorts only
-- (track, pos, time) and joins the rest back.
-- Columns: event_id, track, pos, e, depth
CREATE OR REPLACE TEMP TABLE __tk_depth AS
WITH sweep AS (
    SELECT track, pos, is_start,
           sum(1 - is_start) OVER (PARTITION BY track ORDER BY t, tie, pos, is_start DESC
                                   ROWS UNBOUNDED PRECEDING) AS n_closed
    FROM (SELECT track, pos, s AS t, 1 AS tie, 1 AS is_start FROM __tk_ord
          UNION ALL
          SELECT track, pos, e, (e = s)::INTEGER, 0 FROM __tk_ord))
SELECT o.event_id, o.track, o.pos, o.e, o.pos - w.n_closed AS depth
FROM sweep w JOIN __tk_ord o USING (track, pos) WHERE w.is_start = 1;

-- depth_range: the ranges of __tk_depth, which decide whether (track, depth, pos) packs into one
-- BIGINT (parents_packed) or not (parents).
-- Columns: lo (min depth), hi (max depth), tracks (max track), positions (max pos)
SELECT min(depth) AS lo, max(depth) AS hi, max(track) AS tracks, max(pos) AS positions
FROM __tk_depth;

-- parents_packed: the parent of each event of __tk_depth into the temporary table __tk_nest: the
-- last earlier event of the track one level up (depth - 1).  With (track, depth, pos) packed
-- into one BIGINT (20 + 12 + 31 bits: depth 0 to 3999, tracks below 2^20, positions below 2^31)
-- that is a one-key ASOF lookup of (track, depth - 1, pos) whose match must have the same
-- (track, depth - 1).  The chain holds exactly when every event ends no later than the parent
-- found that way; bad marks the events where it does not (partial overlaps on their track).
-- Columns: event_id, track, depth, parent_id, bad
CREATE OR REPLACE TEMP TABLE __tk_nest AS
WITH k AS (SELECT event_id, track, e, depth,
                  (track << 43) + ((depth + 1) << 31) + pos AS key FROM __tk_depth),
m AS (SELECT c.event_id, c.track, c.depth, c.e,
             CASE WHEN p.key >> 31 = (c.key >> 31) - 1 THEN p.event_id END AS parent_id,
             CASE WHEN p.key >> 31 = (c.key >> 31) - 1 THEN p.e END AS parent_e
      FROM k c ASOF LEFT JOIN k p ON c.key - (1::BIGINT << 31) > p.key)
SELECT event_id, track, depth::INTEGER AS depth, parent_id,
       depth > 0 AND (parent_id IS NULL OR e > parent_e) AS bad
FROM m;

-- parents: parents_packed where the ranges do not pack: an ASOF join on track and depth - 1.
-- Columns: event_id, track, depth, parent_id, bad
CREATE OR REPLACE TEMP TABLE __tk_nest AS
SELECT c.event_id, c.track, c.depth::INTEGER AS depth, p.event_id AS parent_id,
       c.depth < 0 OR (c.depth > 0 AND (p.event_id IS NULL OR c.e > p.e)) AS bad
FROM __tk_depth c ASOF LEFT JOIN __tk_depth p
     ON p.track = c.track AND p.depth = c.depth - 1 AND c.pos > p.pos;

-- bad_tracks: the tracks of __tk_nest with partial overlaps (nested event by event instead).
-- Columns: track
SELECT DISTINCT track FROM __tk_nest WHERE bad;

-- bad_events: the events of source $sid on the tracks $bad (a list of __tk_nest's track numbers),
-- in track order (track, start, end descending, event id), for `_nest_track`.
-- Columns: event_id, start_ns, end_ns, track
SELECT event_id, start_ns, end_ns, t.track FROM events
JOIN (SELECT event_id, track FROM __tk_nest WHERE list_contains($bad, track)) t
USING (event_id)
WHERE source_id = $sid
ORDER BY t.track, start_ns, end_ns DESC, event_id;

-- fix_nest: __tk_nest's rows of the tracks nested event by event get their depth / parent_id
-- from __tk_fix (event_id, depth, parent_id, registered from Arrow).
UPDATE __tk_nest AS n SET depth = f.depth, parent_id = f.parent_id
FROM __tk_fix AS f WHERE n.event_id = f.event_id;

-- write_nest: the events of source $sid get their depth / parent_id from __tk_nest.
UPDATE events AS e SET depth = n.depth, parent_id = n.parent_id
FROM __tk_nest AS n WHERE e.source_id = $sid AND e.event_id = n.event_id;

-- late_count: the number of events of source $sid on the tracks of __tk_late (pid, tid,
-- device_id, stream_id, registered from Arrow).
-- Columns: n
SELECT count(*) AS n FROM events e SEMI JOIN __tk_late t
ON e.pid IS NOT DISTINCT FROM t.pid AND e.tid IS NOT DISTINCT FROM t.tid
   AND e.device_id IS NOT DISTINCT FROM t.device_id AND e.stream_id IS NOT DISTINCT FROM t.stream_id
WHERE e.source_id = $sid;

-- late_reset: the events of source $sid on the tracks of __tk_late lose their depth / parent_id
-- (too many to nest in memory: nested again with the others left NULL).
UPDATE events AS e SET depth = NULL, parent_id = NULL FROM __tk_late AS t
WHERE e.source_id = $sid
  AND e.pid IS NOT DISTINCT FROM t.pid AND e.tid IS NOT DISTINCT FROM t.tid
  AND e.device_id IS NOT DISTINCT FROM t.device_id AND e.stream_id IS NOT DISTINCT FROM t.stream_id;

-- late_rows: the events of source $sid on the tracks of __tk_late, with their stored nesting.
-- Columns: event_id, pid, tid, device_id, stream_id, start_ns, end_ns, depth, parent_id
SELECT e.event_id, e.pid, e.tid, e.device_id, e.stream_id, e.start_ns, e.end_ns, e.depth, e.parent_id
FROM events e SEMI JOIN __tk_late t
ON e.pid IS NOT DISTINCT FROM t.pid AND e.tid IS NOT DISTINCT FROM t.tid
   AND e.device_id IS NOT DISTINCT FROM t.device_id AND e.stream_id IS NOT DISTINCT FROM t.stream_id
WHERE e.source_id = $sid;

-- any_nested: one row when some event of source $sid has its depth (its reader nested it).
-- Columns: one (1)
SELECT 1 AS one FROM events WHERE source_id = $sid AND depth IS NOT NULL LIMIT 1;

-- unnested_tracks: the tracks of the events of source $sid that have no depth yet.
-- Columns: pid, tid, device_id, stream_id
SELECT DISTINCT pid, tid, device_id, stream_id FROM events WHERE source_id = $sid AND depth IS NULL;
