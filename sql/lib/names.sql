-- lib/names: what a name says (phase of a range, communication kernel).
--
-- tk_phase(name) -> VARCHAR
--   the phase of an NVTX range or record_function annotation: its name without a trailing
--   '#<number>' (ProfilerStep#12 -> ProfilerStep), so the instances of a step share one phase.
--
-- tk_is_comm_kernel(name) -> BOOLEAN
--   a collective-communication kernel: the name contains 'nccl' or 'rccl' in any case
--   (ncclKernel_*, ncclDevKernel_*, rccl*).
CREATE OR REPLACE MACRO tk_phase(name) AS regexp_replace(name, '#[0-9]+$', '');

CREATE OR REPLACE MACRO tk_is_comm_kernel(name) AS (name ILIKE '%nccl%' OR name ILIKE '%rccl%');
