"""Time the `tracekit sql --format table` renderer against DuckDB's box renderer, tabulate and
rich on a real view (10 k and 100 k rows of `idle_gaps`), every row shown, and check what each
does with a multi-line value, an id, an interval and a STRUCT.

    python bench/table_render.py STORE [REPEAT]

STORE: a store with at least 50 k idle gaps, e.g. `tracekit convert --replace --db /tmp/b.duckdb
fixtures/kineto/decode_b32.json.gz ../shared/realworld/kineto/hta__df_index_resolver.json.gz`.
tabulate and rich are optional (`pip install --target DIR tabulate rich`, then PYTHONPATH=DIR).
Only the rendering of the fetched Arrow table is timed (each library from what it takes: rows of
Python values, or strings).
"""

from __future__ import annotations

import contextlib
import io
import sys
import time

import duckdb

import tracekit
from tracekit.render import table_text


def tracekit_render(tbl):
    return table_text(tbl, 0)


def duckdb_box(tbl):
    con = duckdb.connect()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        con.from_arrow(tbl).show(max_rows=tbl.num_rows + 1, max_width=100_000, max_col_width=60)
    con.close()
    return buf.getvalue()


def tabulate_render(tbl):
    from tabulate import tabulate

    return tabulate([list(r.values()) for r in tbl.to_pylist()], headers=tbl.column_names)


def rich_render(tbl):
    from rich.console import Console
    from rich.table import Table

    t = Table(*tbl.column_names)
    for r in tbl.to_pylist():
        t.add_row(*("NULL" if v is None else str(v) for v in r.values()))
    con = Console(file=io.StringIO(), width=400, color_system=None)
    con.print(t)
    return con.file.getvalue()


RENDERERS = {"tracekit": tracekit_render, "duckdb .show()": duckdb_box, "tabulate": tabulate_render,
             "rich": rich_render}

PROBE = ("SELECT E'a\\nb' AS text, 1234567 AS pid, interval 1 day + interval 3 hour AS iv, "
         "{'a': [1, 2]} AS st")


def main():
    store, repeat = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    st = tracekit.open(store)
    base = st.sql("SELECT * FROM idle_gaps ORDER BY ALL").to_arrow_table()
    import pyarrow as pa

    rows = {}
    for n in (10_000, 100_000):
        reps = -(-n // base.num_rows)
        rows[n] = pa.concat_tables([base] * reps).slice(0, n)
    probe = duckdb.sql(PROBE).to_arrow_table()
    print(f"{'renderer':18} {'10k rows':>22}  {'100k rows':>22}  probe: text 'a\\nb', pid 1234567, "
          "interval, struct")
    for name, fn in RENDERERS.items():
        try:
            fn(probe)
        except ImportError:
            print(f"{name:16} (not installed)")
            continue
        cells = []
        for n in (10_000, 100_000):
            runs = [_time(fn, rows[n]) for _ in range(repeat)]
            cells.append(f"{min(t for t, _ in runs):7.3f}s {runs[0][1]:>7,} lines")
        out = fn(probe)
        body = [l for l in out.splitlines() if "1234567" in l][-1:]
        print(f"{name:18} {cells[0]}  {cells[1]}  probe: {len(out.splitlines())} lines, {body}")


def _time(fn, tbl):
    t = time.perf_counter()
    out = fn(tbl)
    return time.perf_counter() - t, len(out.splitlines())


if __name__ == "__main__":
    main()
