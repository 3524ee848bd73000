"""The types the schema is written in (tracekit/schema.py holds every table and column): a
column (`Column`, written `C(...)`) with its Arrow type, meaning and input mapping per format, and
a table (`Table`) with its Arrow schema and DuckDB DDL."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

I32, I64, F64, STR, BOOL = pa.int32(), pa.int64(), pa.float64(), pa.string(), pa.bool_()
JSON = pa.string()  # JSON text; DuckDB columns are declared JSON

@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    doc: str
    kineto: str = ""
    nsys: str = ""
    ncu: str = ""
    json: bool = False  # stored as DuckDB JSON

    @property
    def sql_type(self) -> str:
        if self.json:
            return "JSON"
        return {
            pa.int32(): "INTEGER",
            pa.int64(): "BIGINT",
            pa.float64(): "DOUBLE",
            pa.string(): "VARCHAR",
            pa.bool_(): "BOOLEAN",
        }[self.type]


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]
    kineto: str = ""
    nsys: str = ""
    ncu: str = ""
    arrow: pa.Schema = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(
            self, "arrow", pa.schema([pa.field(c.name, c.type) for c in self.columns])
        )

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def ddl(self, qualified_name: str | None = None) -> str:
        from .schema import JSON_COMPRESSION  # the store's setting, which lives with the schema

        cols = ",\n  ".join(f'"{c.name}" {c.sql_type}' + (f" USING COMPRESSION {JSON_COMPRESSION}"
                                                            if c.json and JSON_COMPRESSION else "")
                            for c in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {qualified_name or self.name} (\n  {cols}\n)"


def C(name, type_, doc, kineto="", nsys="", ncu="", json=False) -> Column:
    return Column(name, type_, doc, kineto, nsys, ncu, json)
