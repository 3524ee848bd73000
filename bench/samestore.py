#!/usr/bin/env python3
"""Check that two tracekit stores hold the same rows (as multisets, row order ignored).

    python bench/samestore.py A.duckdb B.duckdb

Every table of the schema is compared with EXCEPT ALL both ways; in `sources` the columns that
differ between two conversions of the same input (converted_at, tracekit_version, path) are left
out.  Exit status 0 when equal, 1 otherwise (the differing tables are printed).  Used to check
that a performance change converts exactly the same data as before.
"""

from __future__ import annotations

import sys

import duckdb

from tracekit import schema

VOLATILE = {"sources": {"converted_at", "tracekit_version", "path"}}


def differences(a: str, b: str) -> list[str]:
    con = duckdb.connect()
    con.execute(f"ATTACH '{a}' AS a (READ_ONLY)")
    con.execute(f"ATTACH '{b}' AS b (READ_ONLY)")
    out = []
    for t in schema.TABLES:
        cols = ", ".join(f'"{c.name}"' for c in t.arrow if c.name not in VOLATILE.get(t.name, ()))
        na, nb = (con.execute(f"SELECT count(*) FROM {d}.{t.name}").fetchone()[0] for d in ("a", "b"))
        only_a = con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM a.{t.name} EXCEPT ALL "
                             f"SELECT {cols} FROM b.{t.name})").fetchone()[0]
        only_b = con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM b.{t.name} EXCEPT ALL "
                             f"SELECT {cols} FROM a.{t.name})").fetchone()[0]
        if na != nb or only_a or only_b:
            out.append(f"{t.name}: {na} vs {nb} rows; {only_a} only in A, {only_b} only in B")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    diff = differences(*argv)
    for line in diff:
        print(line)
    print("same rows" if not diff else f"{len(diff)} tables differ")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
