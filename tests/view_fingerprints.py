"""Fingerprints of every view on a fixed set of fixture stores, against results saved in
tests/data/view_fingerprints.json: a refactoring must give the same rows (issue 21).

    python tests/view_fingerprints.py --save     # write the file (after a deliberate change;
                                                 # with ../shared/realworld beside the checkout)
    python tests/view_fingerprints.py            # print what differs from the file

A fingerprint is the row count and an MD5 over the rows' texts, sorted (row order does not
matter); floats are rounded to 9 significant digits so that a different summation order is not a
difference. Views the saved file does not know (new ones) are reported, not compared.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIX = REPO / "fixtures"
SAVED = REPO / "tests" / "data" / "view_fingerprints.json"
STORES = {
    "kineto_decode_b1": ["kineto/decode_b1.json.gz"],
    "kineto_ddp_2ranks": ["kineto/ddp_rank0.json.gz", "kineto/ddp_rank1.json.gz"],
    "kineto_graphs": ["kineto/graphs.json.gz"],
    "nsys_decode_b1": ["nsys/decode_b1_with_torch.sqlite"],
    "nsys_graphs": ["nsys/graphs.sqlite"],
    "roofline_b1_kineto_nsys": ["roofline/roof_b1.json.gz", "roofline/roof_b1.sqlite"],
    "memory_train": ["roofline/train.json.gz"],
}
# real-world captures of ../shared/realworld (skipped where that folder is absent)
REALWORLD = REPO.parent / "shared" / "realworld"
REALWORLD_STORES = {
    "rw_kineto_hta_nccl_data": ["kineto/hta__nccl_data.json.gz"],
    "rw_kineto_tracelens_h100_qwen": ["kineto/tracelens__h100_qwen1.5-0.5b.json.gz"],
    "rw_nsys_mfu_2gpu_before": ["nsys/GindaChen__nsys-ai__mfu_2gpu_before.sqlite"],
    "rw_nsys_uvmtorch": ["nsys/CO18326__uvmTorch__report1.sqlite"],
}


def _cell(v):
    if isinstance(v, float):
        return float(f"{v:.9g}")
    if isinstance(v, (list, tuple)):
        return [_cell(x) for x in v]
    if isinstance(v, dict):
        return {k: _cell(x) for k, x in v.items()}
    return v


def fingerprints(views=None, stores=None, base=FIX, kept: dict | None = None) -> dict:
    """Per store, per view: [rows, md5].  With ``kept`` (a dict), each view is queried twice
    through ``Store.rows`` instead, the second answer counts (so the shared views that it reads
    are by then kept rows: tracekit/store/kept.py), and ``kept[store]`` gets the
    views that were kept."""
    import tracekit
    from tracekit import views as V

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, files in (STORES if stores is None else stores).items():
            db = str(Path(tmp) / f"{name}.duckdb")
            tracekit.convert([str(base / f) for f in files], db=db)
            st = tracekit.open(db)
            got = {}
            for v in V.all_views():
                if views and v.name not in views:
                    continue
                q = f"SELECT * FROM {v.name}"
                if kept is not None:
                    st.rows(q)
                rows = st.rows(q) if kept is not None else st.con.execute(q).fetchall()
                texts = sorted(json.dumps(_cell(list(r)), default=str) for r in rows)
                got[v.name] = [len(rows), hashlib.md5("\n".join(texts).encode()).hexdigest()]
            if kept is not None:
                kept[name] = sorted(st.kept.views)
            st.close()
            out[name] = got
    return out


def differences(saved: dict, now: dict) -> list[str]:
    out = []
    for store, views in saved.items():
        for view, fp in views.items():
            if view not in now.get(store, {}):
                out.append(f"{store}: view {view} is gone")
            elif now[store][view] != fp:
                out.append(f"{store}: {view}: saved {fp[0]} rows {fp[1][:8]}, now "
                           f"{now[store][view][0]} rows {now[store][view][1][:8]}")
    return out


def all_fingerprints() -> dict:
    out = fingerprints()
    if REALWORLD.is_dir():
        out.update(fingerprints(stores=REALWORLD_STORES, base=REALWORLD))
    return out


if __name__ == "__main__":
    now = all_fingerprints()
    if "--save" in sys.argv:
        SAVED.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"wrote {SAVED}")
    else:
        saved = json.loads(SAVED.read_text()) if SAVED.exists() else {}
        diff = differences(saved, now)
        new = sorted({v for s in now.values() for v in s} - {v for s in saved.values() for v in s})
        print("\n".join(diff) or "same rows", f"\nnew views (not compared): {', '.join(new) or 'none'}")
        sys.exit(1 if diff else 0)
