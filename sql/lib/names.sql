-- lib/names: what a name or a row says: phase of a range, graph launch or span, communication kernel.
--
-- tk_phase(name) -> VARCHAR
--   the phase of an NVTX range or record_function annotation: its name without a trailing
--   '#<number>' (ProfilerStep#12 -> ProfilerStep), so the instances of a step share one phase.
--
-- tk_is_phase_range(category, is_instant) -> BOOLEAN
--   an `events` row that is an instance of a phase: a record_function annotation
--   ('user_annotation') or an NVTX range ('nvtx'), not an instant.
--
-- tk_is_graph_launch(api_name) -> BOOLEAN
--   the call launches a whole CUDA / HIP graph: cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch
--   (any suffix: _v10000, _ptsz ...). One call, many kernels -- or, in an nsys
--   --cuda-graph-trace=graph capture, one whole-graph row.
--
-- tk_is_graph_span(graph_id, graph_node_id) -> BOOLEAN
--   a `kernels` row that is a whole graph, not a kernel: graph_id set and graph_node_id NULL
--   (nsys --cuda-graph-trace=graph: `[CUDA graph N]`, the graph's span with its internal gaps).
--
-- tk_is_comm_kernel(name) -> BOOLEAN
--   a collective-communication kernel: the name contains 'nccl' or 'rccl' in any case
--   (ncclKernel_*, ncclDevKernel_*, rccl*).
CREATE OR REPLACE MACRO tk_phase(name) AS regexp_replace(name, '#[0-9]+$', '');

CREATE OR REPLACE MACRO tk_is_phase_range(category, is_instant) AS
    (category IN ('user_annotation', 'nvtx') AND NOT coalesce(is_instant, false));

CREATE OR REPLACE MACRO tk_is_graph_launch(api_name) AS
    coalesce(regexp_matches(api_name, '^(cuda|cu|hip)GraphLaunch'), false);

CREATE OR REPLACE MACRO tk_is_graph_span(graph_id, graph_node_id) AS (graph_id IS NOT NULL AND graph_node_id IS NULL);

CREATE OR REPLACE MACRO tk_is_comm_kernel(name) AS (name ILIKE '%nccl%' OR name ILIKE '%rccl%');
