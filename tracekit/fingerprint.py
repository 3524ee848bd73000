"""Converting the same file twice: each source's content fingerprint, and the refusal.

A second conversion of one input into a store adds a second source with the same rows, and every
view and finding then counts it twice. ``check_inputs`` refuses it before anything is converted
(the store is left as it was): an input whose fingerprint is already recorded for a source of the
store, or that was given twice. ``allow_duplicate`` (``convert --allow-duplicate``) adds it anyway.

The fingerprint is a SHA-256 of the file's bytes, the whole file up to ``WHOLE_BYTES``; beyond,
of its size, its first and last ``EDGE_BYTES`` and ``SAMPLES`` blocks of ``SAMPLE_BYTES`` spread
evenly between (hashing a whole file costs ~3 ms per MB, ~15 % of a big trace's conversion; the
sample, ~17 MB, a tenth of that). It is kept in ``tracekit_meta`` as ``source_fingerprint:<source_id>``
(a source without one, e.g. from an older tracekit, is not matched).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .store import Store, StoreError

WHOLE_BYTES = 32 << 20
EDGE_BYTES = 8 << 20
SAMPLES = 16
SAMPLE_BYTES = 64 << 10
KEY = "source_fingerprint:"


def fingerprint(path: str | os.PathLike) -> str:
    """The content fingerprint of a file (see the module's text)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size <= WHOLE_BYTES:
            return hashlib.file_digest(f, "sha256").hexdigest() if hasattr(hashlib, "file_digest") \
                else hashlib.sha256(f.read()).hexdigest()
        h.update(f"size={size};".encode())
        h.update(f.read(EDGE_BYTES))
        step = (size - 2 * EDGE_BYTES) // (SAMPLES + 1)
        for k in range(1, SAMPLES + 1):
            f.seek(EDGE_BYTES + k * step)
            h.update(f.read(SAMPLE_BYTES))
        f.seek(size - EDGE_BYTES)
        h.update(f.read(EDGE_BYTES))
    return "sampled:" + h.hexdigest()


def recorded(st: Store) -> dict[str, dict]:
    """fingerprint -> the source it was recorded for (source_id, path, converted_at)."""
    rows = st.raw_con.execute(
        f"""SELECT m.value, s.source_id, s.path, s.converted_at
            FROM tracekit_meta m JOIN sources s
              ON s.source_id = TRY_CAST(substr(m.key, {len(KEY) + 1}) AS INTEGER)
            WHERE m.key LIKE '{KEY}%' ORDER BY s.source_id""").fetchall()
    out: dict[str, dict] = {}
    for fp, sid, path, at in rows:
        out.setdefault(fp, {"source_id": sid, "path": path, "converted_at": at})
    return out


def check_inputs(st: Store, paths, allow_duplicate: bool = False, replace_flag: str = "--replace",
                 allow_flag: str = "--allow-duplicate") -> list[str | None]:
    """The fingerprint of each input (None where it cannot be read: the adapter says why).
    Raises StoreError, before anything is converted, for an input that is already a source of
    ``st`` or that is given twice, unless ``allow_duplicate``."""
    have = recorded(st)
    seen: dict[str, Path] = {}
    out: list[str | None] = []
    for p in map(Path, paths):
        try:
            fp = fingerprint(p) if p.is_file() else None
        except OSError:
            fp = None
        out.append(fp)
        if fp is None or allow_duplicate:
            continue
        if fp in have:
            s = have[fp]
            raise StoreError(
                f"{p}: already in {st.label} as source {s['source_id']} ({s['path']}, converted "
                f"{s['converted_at']}): the same content would count twice; nothing was converted. "
                f"Pass {replace_flag} to start the store afresh, or {allow_flag} to add it again")
        if fp in seen:
            raise StoreError(f"{p}: same content as the input {seen[fp]} given before; nothing was "
                             f"converted. Give it once, or pass {allow_flag} to add it twice")
        seen[fp] = p
    return out


def record(st: Store, source_id: int, fp: str | None) -> None:
    """Record the fingerprint of a converted source (in the store's open conversion)."""
    if fp is not None:
        st.raw_con.execute("INSERT OR REPLACE INTO tracekit_meta VALUES (?, ?)", [f"{KEY}{source_id}", fp])
