"""Step markers by name whatever their category (issue 45, item 2).

torch.profiler before 1.10 -- the traces of tb_plugin's 2021 samples and tests -- wrote its step
markers `ProfilerStep#N` with the operators' cat (`cpu_op`, earlier `Operator`); newer torch
writes them as `user_annotation`. The real-world corpus (../shared/realworld/kineto/SOURCES.md)
holds no 2021 tb_plugin trace, so each test takes a real trace of the corpus and writes its step
markers back the old way, byte for byte in the JSON (nothing else changes): the phases and the
steady state must come out as on the unmodified trace.
"""

from __future__ import annotations

import gzip
import json

import pytest

from conftest import realworld


def _trace(part: str):
    path = next((p for p in realworld("kineto") if part in p.name), None)
    if path is None:
        pytest.skip("../shared/realworld is not present")
    return path


def _old_style(path, tmp_path, cat: str, n_steps: int):
    """The trace with its `ProfilerStep#N` user_annotation events given cat `cat`."""
    data = gzip.decompress(path.read_bytes())
    new = b'"cat": "%s", "name": "ProfilerStep#' % cat.encode()
    old = b'"cat": "user_annotation", "name": "ProfilerStep#'
    assert data.count(old) == n_steps  # the host-side markers (the GPU projections stay)
    out = tmp_path / f"old_{path.name.removesuffix('.gz')}"
    out.write_bytes(data.replace(old, new))
    return out


STEADY = ("SELECT device_id, method, step_phases, steps, window_start_ns, window_end_ns, busy_ns "
          "FROM steady_state ORDER BY device_id")
PHASE = ("SELECT phase, category, instances, wall_ns, gpu_ops, kernel_ns FROM phases "
         "WHERE phase = 'ProfilerStep'")


@pytest.mark.slow
def test_cpu_op_step_markers_give_the_steps(convert, tmp_path):
    """df_index_resolver (V100, 216k events): ProfilerStep is its only step phase. With the
    markers as cpu_op it was 'whole' before the fix; now the same 5 steps as the original."""
    path = _trace("df_index_resolver")
    want = convert(path)
    got = convert(_old_style(path, tmp_path, "cpu_op", 5))
    assert got.rows(STEADY) == want.rows(STEADY)
    assert got.rows("SELECT method, step_phases, steps FROM steady_state") == [("steps", "ProfilerStep", 5)]
    assert got.rows(PHASE) == want.rows(PHASE)
    assert got.rows("SELECT instances, gpu_ops FROM phases WHERE phase = 'ProfilerStep'") == [(5, 8715)]
    # no operator named ProfilerStep is left, and the change is counted as a repair
    assert got.one("SELECT count(*) FROM events WHERE category = 'cpu_op' AND name LIKE 'ProfilerStep#%'") == 0
    repairs = json.loads(got.one("SELECT metadata->>'$.tracekit_repairs' FROM sources"))
    assert repairs["events.category: step marker ProfilerStep#N of another cat (cpu_op: torch before "
                   "1.10) read as user_annotation"] == 5


@pytest.mark.slow
def test_operator_step_markers_give_the_phases(convert, tmp_path):
    """nccl_data (A100, NCCL DDP): the 3 step markers as cat `Operator` (the 2021 spelling, as in
    tb_plugin's test traces): the same ProfilerStep phase and steady state as the original."""
    path = _trace("nccl_data")
    want = convert(path)
    got = convert(_old_style(path, tmp_path, "Operator", 3))
    assert got.rows(PHASE) == want.rows(PHASE)
    assert got.rows("SELECT instances, gpu_ops FROM phases WHERE phase = 'ProfilerStep'") == [(3, 1401)]
    assert got.rows(STEADY) == want.rows(STEADY)
