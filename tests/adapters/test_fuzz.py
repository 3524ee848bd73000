"""The differential fidelity fuzz (bench/fuzz.py) at CI size: >= 3,000 variants of real captures of
all three formats, each one value mutated, plus kills and concurrent conversions. Every variant
must end stored exactly, kept in args, repaired with a note, skipped with a reason, or refused with
a one-line error: 0 silent losses, 0 tracebacks. (Synthetic mutations of real files: the point is
values real captures do not contain.)"""

from __future__ import annotations

import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow  # fuzzes every format with many mutated inputs: minutes

sys.path.insert(0, str(REPO / "bench"))


def test_fuzz_fidelity():
    import fuzz

    res = fuzz.run(seed=20261201, n_kineto=1500, n_nsys=1000, n_ncu=500, n_env=20)
    total = sum(res.values())
    outcomes = {o: sum(c for (_, oo), c in res.items() if oo == o) for _, o in res}
    print(f"{total} variants: {outcomes}")
    assert total >= 3000
    assert res.failures == []
    # every outcome the oracle knows occurs (the fuzz reaches each kind of handling)
    assert {"stored", "kept", "repaired", "skipped"} <= set(outcomes)
