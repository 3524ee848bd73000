#!/usr/bin/env python3
"""Per-table hashes of what the nsys and ncu adapters make of every input, to check that a
refactoring converts exactly the same rows.

    python bench/same_rows_nsys.py save BEFORE.json      # hashes of every input now
    python bench/same_rows_nsys.py compare BEFORE.json   # hashes now against a saved file

Inputs: the nsys / ncu fixtures (fixtures/nsys, fixtures/ncu, fixtures/labelled/*.sqlite,
fixtures/roofline/*.sqlite) and every file of ../shared/realworld/{nsys,ncu} (beside the repo
root; left out when absent).  Each input is read with its adapter (no store): per table the row
count and a SHA-256 of the rows in canonical order (sorted by their JSON text), plus the
accounting (converted per table, skipped per reason with its example, by-design reasons) and the
``sources`` fields the adapter fills (metadata included, the export cache's path left out).  An
input the adapter refuses is recorded by its one-line error.  ``compare`` prints every input and
part that differs and exits 1 when any does.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import orjson
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
REALWORLD = ROOT.parent / "shared" / "realworld"


def inputs() -> list[Path]:
    fx = ROOT / "fixtures"
    out = sorted((fx / "nsys").glob("*.sqlite")) + sorted((fx / "nsys").glob("*.nsys-rep"))
    out += sorted(p for p in (fx / "ncu").iterdir() if p.is_file())
    out += sorted((fx / "labelled").glob("*.sqlite")) + sorted((fx / "roofline").glob("*.sqlite"))
    for sub in ("nsys", "ncu"):
        d = REALWORLD / sub
        if d.is_dir():
            out += sorted(p for p in d.iterdir() if p.is_file() and p.name != "SOURCES.md")
    return out


def _rowkey(row: dict) -> bytes:
    return orjson.dumps(row, default=repr, option=orjson.OPT_SORT_KEYS)


def digest(path: Path) -> dict:
    from tracekit.adapters.base import TraceError
    from tracekit.adapters.detect import adapter_for

    try:
        ad = adapter_for(path)
        fmt = ad.FORMAT
        batches: dict[str, list] = {}
        for name, batch in ad.read(path, 1):
            batches.setdefault(name, []).append(batch)
    except TraceError as e:
        return {"error": e.one_line().replace(str(path), "<input>")}
    tables = {}
    for name, bs in sorted(batches.items()):
        rows = pa.Table.from_batches(bs).to_pylist()
        keys = sorted(_rowkey(r) for r in rows)
        h = hashlib.sha256()
        for k in keys:
            h.update(k + b"\n")
        tables[name] = {"rows": len(rows), "sha256": h.hexdigest()}
    acc = ad.accounting
    source = json.loads(orjson.dumps(ad.source, default=repr))
    meta = source.get("metadata") or {}
    meta.pop("exported_sqlite", None)
    meta.pop("report", None)
    return {"format": fmt, "tables": tables, "converted": dict(sorted(acc.converted.items())),
            "skipped": dict(sorted(acc.skipped.items())),
            "examples": dict(sorted(acc.examples.items())), "by_design": sorted(acc.by_design),
            "source": source}


def collect() -> dict:
    out = {}
    for p in inputs():
        key = str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else "realworld/" + str(p.relative_to(REALWORLD))
        out[key] = digest(p)
        counts = ", ".join(f"{t} {v['rows']}" for t, v in out[key].get("tables", {}).items())
        print(f"{key}: {counts or out[key].get('error')}", file=sys.stderr)
    return out


def compare(before: dict, now: dict) -> list[str]:
    diffs = []
    for key in sorted(set(before) | set(now)):
        a, b = before.get(key), now.get(key)
        if a is None or b is None:
            diffs.append(f"{key}: only {'now' if a is None else 'before'}")
            continue
        for part in sorted(set(a) | set(b)):
            if a.get(part) != b.get(part):
                if isinstance(a.get(part), dict) and isinstance(b.get(part), dict):
                    for k in sorted(set(a[part]) | set(b[part])):
                        if a[part].get(k) != b[part].get(k):
                            diffs.append(f"{key}: {part}.{k}: {a[part].get(k)!r} -> {b[part].get(k)!r}")
                else:
                    diffs.append(f"{key}: {part}: {a.get(part)!r} -> {b.get(part)!r}")
    return diffs


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("save", "compare"):
        print(__doc__.strip().splitlines()[3].strip(), file=sys.stderr)
        return 2
    now = collect()
    if argv[0] == "save":
        Path(argv[1]).write_text(json.dumps(now, indent=1, sort_keys=True))
        print(f"saved {len(now)} inputs to {argv[1]}")
        return 0
    diffs = compare(json.loads(Path(argv[1]).read_text()), now)
    for d in diffs:
        print(d)
    print("same rows" if not diffs else f"{len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
