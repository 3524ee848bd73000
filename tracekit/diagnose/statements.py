"""The SQL of the diagnose rules: the named statements of ``sql/diagnose/<file>.sql`` (loaded by
`views.statements`, the loader of every file of named statements), made into the exact query a
rule runs and shows as evidence.

A statement names its values as ``$parameters``; `statement` writes each as a SQL literal (so an
evidence query pastes into ``tracekit sql`` as shown), or as written where the value is a `Sql`
fragment (a condition one statement gives another), and leaves out each line naming a parameter
given as None (an optional condition)."""

from __future__ import annotations

import re

from .. import views
from .model import lit

_PARAM = re.compile(r"\$([a-z_][a-z0-9_]*)")


class Sql(str):
    """A SQL fragment given to a statement as written (a condition), not as a literal."""


def statement(file: str, name: str, /, **values) -> str:
    """Statement ``name`` of ``sql/diagnose/<file>.sql`` with its parameters' values filled in."""
    path = views.sql_dir() / "diagnose" / f"{file}.sql"
    text = views.statements(path)[name]
    lines = [line for line in text.split("\n") if all(values.get(p, "") is not None for p in _PARAM.findall(line))]

    def value(m: re.Match) -> str:
        if m.group(1) not in values:
            raise KeyError(f"{path}: statement {name} needs ${m.group(1)}")
        v = values[m.group(1)]
        return v if isinstance(v, Sql) else lit(v)

    return _PARAM.sub(value, "\n".join(lines))
