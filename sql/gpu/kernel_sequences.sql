-- kernel_sequences: the GPU operation sequences host operators launch, most frequent first (HTA's frequent CUDA kernel sequences).
--
-- Definition (HTA's get_frequent_cuda_kernel_sequences, per source):
--   candidates = host ranges of `events` (a pid, no device: torch ops, annotations, Python
--                functions, NVTX ranges, OS runtime calls; not instants) whose name contains
--                the parameter sequence_op (default '': every range)
--   roots      = the candidates of the smallest depth among them (so nested matches are not
--                counted twice) that launched at least min_pattern_len (default 3) GPU operations
--   the GPU operations a root launched = the `gpu_launches` rows whose launch call starts inside
--                the root's range on its thread (start_ns <= call start < end_ns), in GPU start
--                order (then stream, name): kernels, memcpys and memsets
--   pattern    = the root's name and the names of its operations in that order, '|'-separated
-- One row per (source_id, op_name, pattern): how many roots launched exactly that sequence.
-- With the default, the roots are the outermost ranges (the steps of a loop: the row says how
-- many steps launched the same kernels); `--param sequence_op=aten::linear` gives HTA's example.
--   gpu_ns = summed duration of the operations of all those roots; cpu_ns = summed duration of
--   the roots themselves (HTA's "GPU kernel duration" and "CPU op duration")
-- Parameters:
--   sequence_op      ''  only ranges whose name contains this text ('': every range)
--   min_pattern_len  3   the fewest GPU operations a range launched to count
-- Ordered by source_id, count DESC, pattern (HTA's order).
--
-- Uses: gpu_launches
--
-- Columns:
--   source_id       INTEGER    the source
--   op_name         VARCHAR    the root operator / range name
--   ops             BIGINT     GPU operations in the sequence
--   count           BIGINT     roots that launched this sequence
--   gpu_ns          BIGINT     summed duration of their GPU operations, ns
--   cpu_ns          BIGINT     summed duration of the roots, ns
--   first_start_ns  BIGINT     start of the first root with this sequence, ns
--   kernel_names    VARCHAR[]  the operation names in order
--   pattern         VARCHAR    op_name|name 1|name 2|... (HTA's pattern)
CREATE OR REPLACE VIEW kernel_sequences AS
WITH cand AS (
    SELECT source_id, event_id, pid, tid, start_ns, end_ns, name, depth
    FROM events
    WHERE pid IS NOT NULL AND device_id IS NULL AND NOT coalesce(is_instant, false)
      AND end_ns > start_ns AND depth IS NOT NULL
      AND contains(name, getvariable('sequence_op')::VARCHAR)
),
top AS (
    SELECT c.* FROM cand c
    JOIN (SELECT source_id, min(depth) AS depth FROM cand GROUP BY source_id) m USING (source_id, depth)
),
rng AS (
    SELECT {'source_id': source_id, 'pid': pid, 'tid': tid} AS key, event_id AS range_id, start_ns, end_ns
    FROM top
),
ops AS (
    SELECT row_number() OVER () AS point_id, * FROM gpu_launches
),
pts AS (
    SELECT {'source_id': source_id, 'pid': pid, 'tid': tid} AS key, point_id, api_start_ns AS ts FROM ops
),
owned AS (  -- each root's operations (sql/lib/intervals.sql)
    SELECT e.range_id, o.source_id, o.name, o.start_ns, o.stream_id, o.dur_ns
    FROM tk_enclosing('rng', 'pts') e JOIN ops o USING (point_id)
),
roots AS (
    SELECT t.source_id, t.event_id, t.name AS op_name, t.start_ns, t.end_ns - t.start_ns AS cpu_ns,
           count(*) AS ops, sum(o.dur_ns)::BIGINT AS gpu_ns,
           list(o.name ORDER BY o.start_ns, o.stream_id, o.name) AS kernel_names
    FROM top t JOIN owned o ON o.source_id = t.source_id AND o.range_id = t.event_id
    GROUP BY t.source_id, t.event_id, t.name, t.start_ns, t.end_ns
    HAVING count(*) >= getvariable('min_pattern_len')::BIGINT
)
SELECT source_id, op_name, any_value(ops) AS ops, count(*) AS count, sum(gpu_ns)::BIGINT AS gpu_ns,
       sum(cpu_ns)::BIGINT AS cpu_ns, min(start_ns) AS first_start_ns, kernel_names,
       op_name || '|' || array_to_string(kernel_names, '|') AS pattern
FROM roots
GROUP BY source_id, op_name, kernel_names
ORDER BY source_id, count DESC, pattern;
