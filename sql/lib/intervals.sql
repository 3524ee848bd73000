-- lib/intervals: interval idioms shared by the views.
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
