-- phase_instances: every instance of a phase (NVTX range / user annotation) with its window on the GPU.
--
-- Definition: an instance is an `events` row of category 'user_annotation' (torch.profiler
-- record_function) or 'nvtx' (NVTX push/pop or start/end range) with a known pid, not an instant;
-- its phase is the name without a trailing '#<number>' (ProfilerStep#12 -> ProfilerStep): the
-- same instances as the `phases` view. Its GPU work is every `gpu_launches` op whose launch call
-- started on the same thread (pid, tid) inside [start_ns, end_ns) (as in `phases`).
--   window = [start_ns, window_end_ns) with window_end_ns = max(end_ns, end of its last GPU op):
--            the GPU work of a range may finish after the CPU left it
-- Instances of one phase may overlap in their windows (work queued ahead of the GPU, e.g. CUDA
-- graph replays); `phase_idle` takes the union.
-- The GPU work is paired with the ranges by the one rule of sql/lib/phases.sql
-- (`tk_phase_launches`).
--
-- Uses: gpu_launches
--
-- Columns:
--   source_id      INTEGER  the source
--   phase          VARCHAR  range name without trailing '#N' or per-call ids (tk_phase)
--   category       VARCHAR  'user_annotation' or 'nvtx'
--   event_id       BIGINT   the range's events.event_id
--   name           VARCHAR  the range's full name
--   pid            BIGINT   process
--   tid            BIGINT   thread
--   start_ns       BIGINT   range start, ns
--   end_ns         BIGINT   range end (host side), ns
--   dur_ns         BIGINT   end_ns - start_ns
--   gpu_ops        BIGINT   GPU operations launched inside the range
--   gpu_end_ns     BIGINT   end of the last of them (NULL when none)
--   window_end_ns  BIGINT   greatest(end_ns, gpu_end_ns)
--   window_ns      BIGINT   window_end_ns - start_ns
CREATE OR REPLACE VIEW phase_instances AS
WITH l AS (SELECT * FROM gpu_launches),
r AS (
    SELECT source_id, event_id, name, pid, tid, start_ns, end_ns, dur_ns, category,
           tk_phase(name) AS phase
    FROM events
    WHERE tk_is_phase_range(category, is_instant, name) AND pid IS NOT NULL
),
ops AS (
    SELECT source_id, event_id, count(*) AS gpu_ops, max(end_ns) AS gpu_end_ns
    FROM tk_phase_launches('l')
    GROUP BY ALL
)
SELECT r.source_id, r.phase, r.category, r.event_id, r.name, r.pid, r.tid, r.start_ns, r.end_ns,
       r.dur_ns, coalesce(o.gpu_ops, 0) AS gpu_ops, o.gpu_end_ns,
       greatest(r.end_ns, coalesce(o.gpu_end_ns, r.end_ns)) AS window_end_ns,
       greatest(r.end_ns, coalesce(o.gpu_end_ns, r.end_ns)) - r.start_ns AS window_ns
FROM r LEFT JOIN ops o USING (source_id, event_id)
ORDER BY r.source_id, r.start_ns, r.event_id;
