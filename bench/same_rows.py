#!/usr/bin/env python3
"""Fingerprints of converted stores, to check that a refactoring converts exactly the same rows.

    python bench/same_rows.py snapshot -o BEFORE.json INPUT...   # convert each input, fingerprint
    python bench/same_rows.py store DB [-o OUT.json]             # fingerprint an existing store
    python bench/same_rows.py compare BEFORE.json AFTER.json     # exit 1 (and say where) if not equal

A fingerprint, per table of the schema: the row count and an MD5 over all rows in a canonical
order (each row's text as DuckDB casts the row to VARCHAR, hashed, the hashes sorted and hashed
again: row order and insertion order do not matter, duplicates do); plus, in full, the rows of
``skipped_rows`` and each source's columns and metadata (leaving out what differs between two
conversions of the same input: converted_at, tracekit_version).  ``snapshot`` converts each input
alone (``tracekit.convert(jobs=1)``, a fresh store each) in this process; an input that fails is
recorded with its one-line error, which is compared too.  Any format works (Kineto, nsys, ncu);
environment variables that change a reader (``TRACEKIT_KINETO_SCAN=0``) are taken from the
environment, so run it once per setting:

    TRACEKIT_KINETO_SCAN=0 python bench/same_rows.py snapshot -o before_py.json fixtures/kineto/*.json.gz
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import duckdb

VOLATILE = {"sources": {"converted_at", "tracekit_version"}}


def fingerprint(db: str) -> dict:
    """The fingerprint of the store at ``db`` (read-only)."""
    from tracekit import schema

    con = duckdb.connect(db, read_only=True)
    try:
        have = {r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()}
        tables = {}
        for t in schema.TABLES:
            if t.name not in have:
                continue
            cols = ", ".join(f'"{c}"' for c in t.column_names if c not in VOLATILE.get(t.name, ()))
            n, digest = con.execute(
                f"select count(*), md5(coalesce(string_agg(h, '' order by h), '')) from ("
                f"select md5(cast(r as varchar)) as h from (select row({cols}) as r from {t.name}))"
            ).fetchone()
            tables[t.name] = {"rows": n, "md5": digest}
        skipped = [list(r) for r in con.execute(
            "select source_id, reason, count, example, by_design from skipped_rows "
            "order by all").fetchall()] if "skipped_rows" in have else []
        sources = []
        if "sources" in have:
            cur = con.execute("select * exclude (converted_at, tracekit_version) from sources order by source_id")
            names = [d[0] for d in cur.description]
            for row in cur.fetchall():
                d = dict(zip(names, row))
                if isinstance(d.get("metadata"), str):
                    try:
                        d["metadata"] = json.loads(d["metadata"])
                    except ValueError:
                        pass
                sources.append(d)
        return {"tables": tables, "skipped_rows": skipped, "sources": sources}
    finally:
        con.close()


def snapshot(inputs: list[str], log=print) -> dict:
    """Convert each input alone into a fresh store and fingerprint it: {input: fingerprint or
    {"error": the one-line message}}."""
    import tracekit

    out = {}
    with tempfile.TemporaryDirectory(prefix="same_rows_") as tmp:
        for i, path in enumerate(inputs):
            db = str(Path(tmp) / f"s{i}.duckdb")
            t0 = time.perf_counter()
            try:
                tracekit.convert([path], db=db, replace=True, jobs=1)
            except Exception as e:  # the error is part of the fingerprint
                out[path] = {"error": f"{type(e).__name__}: {e}"}
            else:
                out[path] = fingerprint(db)
                for suffix in ("", ".wal"):
                    if os.path.exists(db + suffix):
                        os.remove(db + suffix)
            log(f"{time.perf_counter() - t0:6.2f}s {path}: "
                + (out[path]["error"] if "error" in out[path] else
                   " ".join(f"{k}={v['rows']}" for k, v in out[path]["tables"].items() if v["rows"])))
    return out


def compare(a: dict, b: dict) -> list[str]:
    """What differs between two snapshots (or two fingerprints), one line each."""
    if "tables" in a or "error" in a:
        a, b = {"store": a}, {"store": b}
    diff = []
    for k in sorted(a.keys() | b.keys()):
        if k not in a or k not in b:
            diff.append(f"{k}: only in {'B' if k not in a else 'A'}")
            continue
        x, y = a[k], b[k]
        if "error" in x or "error" in y:
            if x.get("error") != y.get("error"):
                diff.append(f"{k}: error {x.get('error')!r} vs {y.get('error')!r}")
            continue
        for t in sorted(x["tables"].keys() | y["tables"].keys()):
            if x["tables"].get(t) != y["tables"].get(t):
                diff.append(f"{k}: table {t}: {x['tables'].get(t)} vs {y['tables'].get(t)}")
        if x["skipped_rows"] != y["skipped_rows"]:
            diff.append(f"{k}: skipped_rows differ")
        if x["sources"] != y["sources"]:
            diff.append(f"{k}: sources differ")
    return diff


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("snapshot")
    s.add_argument("-o", "--out", required=True)
    s.add_argument("inputs", nargs="+")
    st = sub.add_parser("store")
    st.add_argument("db")
    st.add_argument("-o", "--out")
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    args = ap.parse_args(argv)
    if args.cmd == "snapshot":
        res = snapshot(args.inputs)
        Path(args.out).write_text(json.dumps(res, indent=1, sort_keys=True, default=str) + "\n")
        print(f"{len(res)} inputs fingerprinted ({sum('error' in v for v in res.values())} failed) -> {args.out}")
        return 0
    if args.cmd == "store":
        text = json.dumps(fingerprint(args.db), indent=1, sort_keys=True, default=str)
        if args.out:
            Path(args.out).write_text(text + "\n")
        else:
            print(text)
        return 0
    a, b = (json.loads(Path(p).read_text()) for p in (args.a, args.b))
    diff = compare(a, b)
    for line in diff:
        print(line)
    n = len(a) if "tables" not in a and "error" not in a else 1
    print(f"same rows ({n} inputs compared)" if not diff else f"{len(diff)} differences")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
