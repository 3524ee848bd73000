"""Shared views, computed once.

A session of queries on a store that nothing writes (opened read-only, or a Parquet
export) keeps the rows of a shared view (`views.kept_views()`: gpu_launches, idle_gaps,
roofline, phase_ops ...) once a second query needs them (naming them or reading them
through another view), and reads them from then on instead of computing them inside every
query again: `tracekit diagnose`, a notebook, a script of several statements. One query
alone is planned whole, as before (DuckDB can then push its filters into the shared
views); the second query of a shared view pays for keeping its rows (all of them, whatever
its filter: on the 179 MB capture roofline's took about a first query's time), the
queries after it read them. The rows are kept as
Arrow, text columns dictionary-encoded (a kernel name of 360 characters is stored once, not
once per row), and read back with the view's own column types. When a parameter they
depend on changes (`--param`, SET VARIABLE), every kept view is dropped and computed again
when needed; a query on `con` itself, which does not look, fails instead of answering with
the old value. `Store.con` never keeps. A store of more than KEEP_MAX_GPU_ROWS GPU
operations keeps nothing, and a session keeps at most KEEP_MAX_BYTES of rows (then the rest
is computed in each query, as before). Figures: docs/scaling.md ("Shared views, computed
once")."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from .. import views
from . import tuning
from .db import ident, sql_lit


class KeptViews:
    """The kept rows of one session's shared views (`Store.kept`), over its connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection, enabled: bool):
        self._con = con
        self.enabled = bool(enabled)  # whether this session keeps (more) rows
        self._needs: dict[str, int] = {}  # shared view -> queries that needed it
        self.small: bool | None = None  # `small_enough`, once asked
        self.views: dict[str, dict] = {}  # kept view -> the parameter values it was computed with
        self._rows: dict[str, pa.Table] = {}

    def note(self, names: list[str]) -> None:
        """A query reads views ``names`` (each after those it reads): keep the rows of each
        shared one among them that a query needs the second time."""
        shared = [n for n in names if n in views.kept_views()]
        if not shared:
            return
        self.drop_stale()
        for n in shared:  # creation order: the shared views a view reads are kept before it
            if n not in self.views and self.enabled:
                self._needs[n] = self._needs.get(n, 0) + 1
                if self._needs[n] >= 2 and self.small_enough():
                    try:
                        self.keep_view(n)
                    except duckdb.Error:  # (the query itself will say what is wrong, if it is)
                        self._needs[n] = -(1 << 30)  # not tried again

    def drop_stale(self) -> None:
        """Drop every kept view if a parameter one was computed with has changed since."""
        if self.views:
            values = self.parameter_values()
            if any(values[p] != v for kept in self.views.values() for p, v in kept.items()):
                self.drop()

    def small_enough(self) -> bool:
        """Whether this store's GPU operations are few enough to keep the shared views' rows
        (KEEP_MAX_GPU_ROWS); asked once per session, and a store over it keeps nothing."""
        if self.small is None:
            n = self._con.execute("SELECT (SELECT count(*) FROM kernels) + (SELECT count(*) FROM memops)").fetchall()[0][0]
            self.small = n <= tuning.KEEP_MAX_GPU_ROWS
            self.enabled = self.enabled and self.small
        return self.small

    def keep(self, order: list[str]) -> list[str]:
        """Keep the rows of the shared views among ``order`` (views, each after those it reads)
        now (`Store.keep`); returns those kept now or before."""
        self.drop_stale()
        for n in order:
            if n in views.kept_views() and n not in self.views and self.enabled and self.small_enough():
                self.keep_view(n)
        return [n for n in order if n in self.views]

    def parameter_values(self) -> dict[str, str | None]:
        """The current value (as text; None: unset) of every parameter a shared view reads."""
        params = sorted({p for n in views.kept_views() for p in views.parameters(n)})
        if not params:
            return {}
        row = self._con.execute("SELECT " + ", ".join(f"getvariable('{p}')::VARCHAR" for p in params)).fetchall()[0]
        return dict(zip(params, row))

    def keep_view(self, name: str) -> None:
        """Keep view ``name``'s rows (its shared views kept already); beyond KEEP_MAX_BYTES, drop
        them again and keep no more in this session."""
        values = self.parameter_values()
        values = {p: values[p] for p in views.parameters(name)}
        rel = self._con.sql(f"SELECT * FROM {name}")
        cols, types = rel.columns, [str(t) for t in rel.types]
        reader = rel.to_arrow_reader(tuning.KEEP_BATCH_ROWS)
        batches = [_dictionary_text(b) for b in reader]
        rows = pa.Table.from_batches(batches, schema=batches[0].schema if batches
                                     else _dictionary_text(reader.schema.empty_table()).schema)
        table = f"__tk_kept_{name}"
        self._con.register(table, rows)
        back = [str(t) for t in self._con.sql(f"SELECT * FROM {table}").types]
        select = ", ".join(ident(c) if b == t else f"CAST({ident(c)} AS {t}) AS {ident(c)}"
                           for c, t, b in zip(cols, types, back))
        where = ""
        if values:
            same = " AND ".join(f"getvariable('{p}')::VARCHAR IS NOT DISTINCT FROM {sql_lit(v)}"
                                for p, v in values.items())
            msg = (f"tracekit: the rows of view {name} were kept with parameters "
                   + ", ".join(f"{p}={v}" for p, v in values.items())
                   + " and one has changed since; run the query through tracekit (Store.sql, "
                   "tracekit.open(...).sql, tracekit sql), which computes them again")
            where = f" WHERE (SELECT CASE WHEN {same} THEN true ELSE error({sql_lit(msg)}) END)"
        self._con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT {select} FROM {table}{where}")
        self.views[name] = values
        self._rows[name] = rows
        if sum(t.nbytes for t in self._rows.values()) > tuning.KEEP_MAX_BYTES:
            self.drop([name])  # too big to hold: this session keeps no more
            self.enabled = False

    def drop(self, which: list[str] | None = None) -> None:
        """Kept views (``which``; None: all) back to their definitions (computed in each query
        again)."""
        names = [n for n in views.creation_order() if n in self.views and (which is None or n in which)]
        views.register(self._con, names)
        for n in names:
            self._con.unregister(f"__tk_kept_{n}")
            del self.views[n], self._rows[n]
            self._needs.pop(n, None)


def _dictionary_text(data):
    """A record batch (or table) with its text columns dictionary-encoded (kept rows: see
    `KeptViews.keep_view`)."""
    import pyarrow.compute as pc

    cols = [pc.dictionary_encode(c) if pa.types.is_string(c.type) or pa.types.is_large_string(c.type)
            or pa.types.is_string_view(c.type) else c for c in data.columns]
    return type(data).from_arrays(cols, names=data.schema.names)

