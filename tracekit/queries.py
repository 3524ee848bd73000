"""Runs the named statements of ``sql/queries/`` (`views.query`) over a store: dict rows."""

from __future__ import annotations

from . import views


def dicts(store, module: str, name: str, **params) -> list[dict]:
    """The rows of statement ``name`` of ``sql/queries/<module>.sql`` over ``store``, as dicts of
    JSON-ready values (`jsonable`); ``params`` are its ``$parameters``."""
    from .diagnose import jsonable

    rel = store.sql(views.query(module, name), params=params or None)
    cols = list(rel.columns)
    return [dict(zip(cols, (jsonable(v) for v in r))) for r in rel.fetchall()]


def one(store, module: str, name: str, **params) -> dict | None:
    """The first row of `dicts`, or None."""
    d = dicts(store, module, name, **params)
    return d[0] if d else None
