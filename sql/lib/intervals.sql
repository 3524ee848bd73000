-- lib/intervals: interval idioms shared by the views.
--
-- Includes: names
--
-- tk_merge_intervals(rel) -> TABLE (key, start_ns, end_ns, n)
--   the union of the intervals of `rel` (the name of a table, view or CTE of the calling query,
--   as a string) per `key`, as disjoint, maximal intervals: rel must have the columns key (any
--   type: a struct for several columns, e.g. {'source_id': ..., 'device_id': ...}), start_ns and
--   end_ns. Sorted by (start_ns, end_ns) per key, an interval that starts at or before the
--   running maximum end of the earlier ones joins their interval (touching intervals merge);
--   n = how many input intervals each merged one holds.
CREATE OR REPLACE MACRO tk_merge_intervals(rel) AS TABLE
    SELECT key, min(start_ns) AS start_ns, max(end_ns) AS end_ns, count(*) AS n
    FROM (SELECT *, sum(CASE WHEN prev_end IS NULL OR start_ns > prev_end THEN 1 ELSE 0 END)
                        OVER (PARTITION BY key ORDER BY start_ns, end_ns ROWS UNBOUNDED PRECEDING) AS island
          FROM (SELECT key, start_ns, end_ns,
                       max(end_ns) OVER (PARTITION BY key ORDER BY start_ns, end_ns
                                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
                FROM query_table(rel)))
    GROUP BY key, island;

-- tk_enclosing(ranges, points) -> TABLE (point_id, range_id)
--   every (point, range) pair where the point lies in the range: same `key` (any type, e.g. a
--   struct {source_id, pid, tid}) and range.start_ns <= point.ts < range.end_ns. `ranges` (the
--   name of a table, view or CTE, as a string) has the columns key, range_id, start_ns, end_ns;
--   `points` has key, point_id, ts. Nested ranges all claim the point (pick with their depth).
--   Method (no effect on the result): ranges by length class, level = floor(log2(length)) + 1
--   (2^level > length), so a point inside a range has (ts >> level) = (start >> level) or that
--   + 1: an equi-join per level instead of testing every point against every range of its key.
CREATE OR REPLACE MACRO tk_enclosing(ranges, points) AS TABLE
    WITH r AS (
        SELECT key, range_id, start_ns, end_ns,
               floor(log2(greatest(end_ns - start_ns, 1)))::INTEGER + 1 AS lvl
        FROM query_table(ranges)
        WHERE end_ns > start_ns
    ),
    rb AS (SELECT r.*, (r.start_ns >> r.lvl) + b.d AS bucket FROM r CROSS JOIN (VALUES (0), (1)) b(d)),
    pb AS (
        SELECT p.key, p.point_id, p.ts, v.lvl, p.ts >> v.lvl AS bucket
        FROM query_table(points) p JOIN (SELECT DISTINCT key, lvl FROM r) v ON v.key = p.key
    )
    SELECT pb.point_id, rb.range_id
    FROM pb JOIN rb ON rb.key = pb.key AND rb.lvl = pb.lvl AND rb.bucket = pb.bucket
    WHERE pb.ts >= rb.start_ns AND pb.ts < rb.end_ns;

-- tk_busy_segments(ops) -> TABLE (source_id, device_id, start_ns, end_ns, category)
--   each GPU's busy time (the union of the operations of `ops`, the name of a relation with
--   gpu_activity's columns, as a string) cut where the class of what
--   runs changes, every instant given to one class by precedence: 'compute' (a kernel that is not
--   communication), 'communication' (tk_kernel_type 'communication'), 'memcpy', 'memset'; so
--   memcpy time is counted only where no kernel runs (its exposed part), and communication only
--   where no compute kernel runs. Segments of one GPU are disjoint; adjacent ones may share a
--   class. Method: one time-ordered pass per GPU over the operations' starts and ends with a
--   running count per class.
CREATE OR REPLACE MACRO tk_busy_segments(rel) AS TABLE
    WITH src AS MATERIALIZED (
        SELECT source_id, device_id, start_ns, end_ns, kind, name
        FROM query_table(rel) WHERE device_id IS NOT NULL AND end_ns > start_ns
    ),
    classes AS (  -- each distinct kernel name classified once (the name patterns cost µs a row)
        SELECT kind, name,
               CASE WHEN kind = 'memcpy' THEN 2 WHEN kind = 'memset' THEN 3
                    WHEN tk_kernel_type(kind, name) = 'communication' THEN 1 ELSE 0 END AS cls
        FROM (SELECT DISTINCT kind, name FROM src)
    ),
    ops AS MATERIALIZED (
        SELECT s.source_id, s.device_id, s.start_ns, s.end_ns, c.cls
        FROM src s JOIN classes c ON c.kind IS NOT DISTINCT FROM s.kind AND c.name IS NOT DISTINCT FROM s.name
    ),
    edges AS (
        SELECT source_id, device_id, start_ns AS t, 1 AS d, cls FROM ops
        UNION ALL
        SELECT source_id, device_id, end_ns, -1, cls FROM ops
    ),
    counts AS (
        SELECT source_id, device_id, t,
               lead(t) OVER (PARTITION BY source_id, device_id ORDER BY t, d) AS next_t,
               sum(CASE WHEN cls = 0 THEN d ELSE 0 END) OVER c AS n0,
               sum(CASE WHEN cls = 1 THEN d ELSE 0 END) OVER c AS n1,
               sum(CASE WHEN cls = 2 THEN d ELSE 0 END) OVER c AS n2,
               sum(CASE WHEN cls = 3 THEN d ELSE 0 END) OVER c AS n3
        FROM edges
        WINDOW c AS (PARTITION BY source_id, device_id ORDER BY t, d ROWS UNBOUNDED PRECEDING)
    )
    SELECT source_id, device_id, t AS start_ns, next_t AS end_ns,
           CASE WHEN n0 > 0 THEN 'compute' WHEN n1 > 0 THEN 'communication'
                WHEN n2 > 0 THEN 'memcpy' ELSE 'memset' END AS category
    FROM counts WHERE next_t > t AND n0 + n1 + n2 + n3 > 0;
