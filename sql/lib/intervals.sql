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
