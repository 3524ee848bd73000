"""`tracekit diagnose`: the GPU profiling decision tree, automated, each finding with its evidence.

The tree (a GPU engineer's usual path through a capture)::

    is the GPU busy?                                     gpu_utilization, idle_gaps
      low  -> low_utilization, explained by the cause of the idle time:
              GPU waits for launches, kernels short      -> launch_bound   (CUDA graphs / fusion)
              GPU waits for the CPU, kernels long        -> host_bound     (host work on the critical path)
              host blocked in synchronizing calls        -> sync_stall     (remove .item() / .cpu())
      hot kernel (one kernel >= hot_kernel_pct of kernel time) -> hot_kernel (profile it with ncu)
      ncu results of a kernel, by ncu's Speed-of-Light rule (kernel_bounds / hotspots_bound):
              DRAM/memory saturated -> memory_bound; SM saturated -> compute_bound;
              neither -> latency_bound (grid too small, occupancy, stalls)
      memcpy time not hidden under compute               -> transfer_bound
      communication not hidden under compute             -> low_overlap
      ranks arrive late at collectives, others wait      -> rank_imbalance
    a trace without GPU activity                         -> no_gpu_data

Every number comes from the SQL views of ``sql/`` (the logic here only compares them with the
thresholds), and every finding carries the rows it came from (``evidence``: the view, the exact
query — runnable with ``tracekit sql`` — and its rows).

A finding's ``share_pct`` is the time at stake (``time_ns``) as a share of ``of_ns``: the GPU
window of the device (first op start to last op end; for a phase, the union of its instance
windows), so findings of one device compare on one scale. ``severity``: 'high' when
share_pct >= sev_high_pct, 'medium' when >= sev_medium_pct, else 'low'; 'info' for notes.

Scopes: every finding names its source (and device). ``diagnose(..., phase=NAME)`` diagnoses only
the time inside the instances of a phase (an NVTX range or record_function name, '#N' suffixes
dropped): its window is the union of the instance windows (`phase_idle`), its kernels those
launched inside it (`phase_ops`). Without it, launch_bound and low_utilization also say, per phase,
whether the phase itself meets the rule (``phases``).

Thresholds (``THRESHOLDS``; ``--threshold NAME=VALUE`` overrides; the ones marked "view
parameter" are DuckDB variables read by the views and are set on the connection) are listed in
``THRESHOLDS`` below and in docs/diagnose.md.
"""

from .model import (CODES, REMEDIES, SEVERITIES, THRESHOLDS, DiagnoseError, Diagnosis, Evidence, Finding,
                    Threshold, apply_view_params, fmt_names, fmt_ns, fmt_pct, jsonable, lit, parse_thresholds,
                    resolve_thresholds, thresholds_help)
from .render import cell, command, table, to_markdown, to_text
from .registry import RULES, Rule, diagnose
from .scopes import IDLE_CAUSES, Query

__all__ = ["CODES", "IDLE_CAUSES", "REMEDIES", "RULES", "SEVERITIES", "THRESHOLDS", "DiagnoseError", "Diagnosis",
           "Evidence", "Finding", "Query", "Rule", "Threshold", "apply_view_params", "cell", "command", "diagnose", "fmt_names", "fmt_ns",
           "fmt_pct", "jsonable", "lit", "parse_thresholds", "resolve_thresholds", "table", "thresholds_help",
           "to_markdown", "to_text"]
