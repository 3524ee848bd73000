-- lib/phases: which GPU operations belong to a phase instance (the one rule phase_instances,
-- phase_ops and phase_idle share).
--
-- Includes: names
--
-- tk_phase_launches(launches) -> TABLE
--   every (phase instance, GPU operation) pair where the operation's launch call started on the
--   instance's thread inside it: an instance is an `events` row with
--   tk_is_phase_range(category, is_instant, name) and a known pid; the operation, a row of
--   `launches` (the name of a relation with gpu_launches' columns, as a string), belongs to it
--   when source_id, pid and tid are equal and range.start_ns <= api_start_ns < range.end_ns.
--   Nested instances all claim the operation. Columns: phase (tk_phase of the range name),
--   category, event_id (the range's), range_start_ns, range_end_ns, then every column of
--   `launches`.
--   Method (no effect on the result): ranges by length class, level = floor(log2(length)) + 1
--   (2^level > length), so a launch inside a range has (api_start_ns >> level) = (range start >>
--   level) or that + 1: an equi-join per level on the thread, not every launch against every
--   range of the thread (as tk_enclosing, with the thread as the key and whole rows out).
CREATE OR REPLACE MACRO tk_phase_launches(launches) AS TABLE
    WITH r AS (
        SELECT source_id, tk_phase(name) AS phase, category, event_id, pid, tid, start_ns, end_ns,
               floor(log2(greatest(end_ns - start_ns, 1)))::INTEGER + 1 AS lvl
        FROM events
        WHERE tk_is_phase_range(category, is_instant, name) AND pid IS NOT NULL
    ),
    rb AS (SELECT r.*, (r.start_ns >> r.lvl) + b.d AS bucket FROM r CROSS JOIN (VALUES (0), (1)) b(d)),
    lb AS (
        SELECT l.*, v.lvl AS __lvl, l.api_start_ns >> v.lvl AS __bucket
        FROM query_table(launches) l
        JOIN (SELECT DISTINCT source_id, pid, tid, lvl FROM r) v
          ON v.source_id = l.source_id AND v.pid = l.pid AND v.tid = l.tid
    )
    SELECT rb.phase, rb.category, rb.event_id, rb.start_ns AS range_start_ns,
           rb.end_ns AS range_end_ns, lb.* EXCLUDE (__lvl, __bucket)
    FROM rb JOIN lb
      ON lb.source_id = rb.source_id AND lb.pid = rb.pid AND lb.tid = rb.tid
     AND lb.__lvl = rb.lvl AND lb.__bucket = rb.bucket
    WHERE lb.api_start_ns >= rb.start_ns AND lb.api_start_ns < rb.end_ns;
