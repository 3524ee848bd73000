"""Every view gives the rows saved in tests/data/view_fingerprints.json on seven fixture stores
(Kineto, nsys, two ranks, CUDA graphs, roofline, memory) and four real-world captures of
../shared/realworld (2 Kineto, 2 nsys): a refactoring that changes a view's rows
fails here. After a deliberate change: `python tests/view_fingerprints.py --save`, and say why in
the commit. The file was first written from the code before the issue-21 refactoring (369cdef):
every view of that code gave the same rows (the 7 fixture stores: 153,712 rows; the 4 real-world
captures: 131,460), except `roofline` / `phase_roofline` on the roofline fixture, whose
nondeterministic tie-breaks (mode() and arg_max() over ties) were fixed at the same time."""

from __future__ import annotations

import json

import pytest
import view_fingerprints as F

pytestmark = pytest.mark.slow  # every view on every fingerprint store, real-world traces included


def test_every_view_gives_the_saved_rows():
    saved = {k: v for k, v in json.loads(F.SAVED.read_text()).items() if k in F.STORES}
    now = F.fingerprints()
    assert set(now) == set(saved)
    missing = {s: sorted(set(v) - set(saved[s])) for s, v in now.items() if set(v) - set(saved[s])}
    assert not missing, f"views without saved rows (run python tests/view_fingerprints.py --save): {missing}"
    assert F.differences(saved, now) == []
    assert sum(n for s in saved.values() for n, _ in s.values()) > 50_000  # rows compared


def test_every_view_gives_the_saved_rows_on_real_captures():
    for files in F.REALWORLD_STORES.values():
        for f in files:
            if not (F.REALWORLD / f).exists():
                pytest.skip(f"{F.REALWORLD / f} is not present")
    saved = {k: v for k, v in json.loads(F.SAVED.read_text()).items() if k in F.REALWORLD_STORES}
    now = F.fingerprints(stores=F.REALWORLD_STORES, base=F.REALWORLD)
    assert set(now) == set(saved) == set(F.REALWORLD_STORES)
    assert F.differences(saved, now) == []
    assert sum(n for s in saved.values() for n, _ in s.values()) > 10_000


def test_kept_shared_views_give_the_saved_rows():
    """A session that queries each view twice through Store.rows answers the second time from the
    kept rows of the shared views (gpu_launches, idle_gaps, roofline ...): the same rows."""
    saved = {k: v for k, v in json.loads(F.SAVED.read_text()).items() if k in F.STORES}
    kept: dict = {}
    now = F.fingerprints(kept=kept)
    assert F.differences(saved, now) == []
    # the kept path ran: on every store, every shared view was kept before its second answer
    from tracekit import views

    assert all(set(kept[s]) == views.kept_views() for s in F.STORES), kept
    assert len(views.kept_views()) == 18
