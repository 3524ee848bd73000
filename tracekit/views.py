"""Loads the SQL views of ``sql/<subject>/`` (one view per file) into a DuckDB connection.

Each file starts with a header comment whose first line is ``-- <view>: <one-line description>``,
followed by the exact definition, a line ``-- Uses: <the views it reads, comma-separated>`` (or
``(tables only)``), the ``-- Columns:`` list (name, DuckDB type, meaning), then one
``CREATE OR REPLACE VIEW <view> AS ...`` statement.  The declared uses decide the order the views
are created in; a test checks them against the statement.  Views are created as TEMP views, so they work
on read-only stores and always match the installed tracekit version.

A conversion also writes the library and every view into the store itself (`persist`, not TEMP),
so any DuckDB client (the `duckdb` CLI, ``duckdb.connect('run.duckdb')`` in a notebook) finds
them without tracekit.  A read-only session reads those copies instead of creating TEMP ones only
while they are exactly this version's (`store.copies.copies_are_current`); DuckDB resolves a name
to the TEMP object first, also inside the body of a persisted view, so a store's persisted copies
never change what tracekit itself computes.

Rules that several views share are written once, as DuckDB macros in ``sql/lib/*.sql`` (each
file's header documents its macros); `register_library` creates them (TEMP) on a connection
before any view.

Parameters are DuckDB variables read with ``getvariable('name')``; ``tracekit sql --param
name=value`` sets them. Each has one default, declared in the header of the view that owns it
(a ``-- Parameters:`` section: ``--   <name>  <default SQL literal>  <meaning>``; a view that reads
another's parameter lists it as ``--   <name>  (<owner view>)``). The loader writes each
``getvariable('name')`` of a view as ``coalesce(getvariable('name'), <default>)`` (`expand`), so
that the SQL bodies hold no second copy of a default; `parameter_defaults` gives them to Python
(the diagnose thresholds that are view parameters) and to the Spark translator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import duckdb

_HEADER = re.compile(r"^--\s*([a-z_][a-z0-9_]*)\s*:\s*(.+)$")
_CREATE = re.compile(r"CREATE\s+OR\s+REPLACE\s+VIEW", re.IGNORECASE)


def sql_dir() -> Path:
    here = Path(__file__).resolve().parent
    for cand in (here / "sql", here.parent / "sql"):  # installed wheel, then source checkout
        if cand.is_dir():
            return cand
    raise FileNotFoundError("tracekit's sql/ folder is missing from the installation")


@dataclass(frozen=True)
class View:
    name: str
    description: str
    path: Path
    header: str       # the header as written, comment markers removed (`tracekit views --doc`)
    definition: str   # the statement as written in the file (`tracekit views --sql`)
    sql: str          # the whole file, made a TEMP view (what `register` runs)
    uses: tuple[str, ...]  # the views it reads (its header's `-- Uses:` line)
    text: str = ""  # the file as written (`CREATE OR REPLACE VIEW`: what `persist` stores)


def source_parts(text: str) -> tuple[str, str]:
    """A file of sql/ as (its header comment with the `-- ` markers removed and every other
    character, indentation included, as written; the SQL after it, as written)."""
    lines = text.split("\n")
    n = next((i for i, line in enumerate(lines) if not line.startswith("--")), len(lines))
    doc = "\n".join(line[3:] if line.startswith("-- ") else line[2:] for line in lines[:n])
    return doc.rstrip() + "\n", "\n".join(lines[n:]).strip() + "\n"


_USES = re.compile(r"^--\s*Uses:\s*(.*)$", re.MULTILINE)


_PARAMS_SECTION = re.compile(r"^--\s*Parameters(?: \([^)]*\))?:\s*$((?:\n--   \S.*$)+)", re.MULTILINE)
_PARAM_LINE = re.compile(r"^--   ([a-z_][a-z0-9_]*)\s+(\([a-z_][a-z0-9_]*\)|NULL|-?[0-9][0-9_.e]*|'[^']*')(?:\s+(.*))?$")


def _declared_parameters(path: Path, text: str) -> dict[str, tuple[str | None, str | None, str]]:
    """A view file's ``-- Parameters:`` section: name -> (default SQL literal or None, owner view
    or None, meaning)."""
    m = _PARAMS_SECTION.search(text)
    out: dict[str, tuple[str | None, str | None, str]] = {}
    if not m:
        return out
    for line in m.group(1).strip("\n").split("\n"):
        pm = _PARAM_LINE.match(line)
        if not pm:
            raise ValueError(f"{path}: a '-- Parameters:' line must read '--   <name>  <default>  <meaning>' "
                             f"or '--   <name>  (<owner view>)': {line!r}")
        name, dflt, meaning = pm.group(1), pm.group(2), (pm.group(3) or "").strip()
        out[name] = (None, dflt[1:-1], meaning) if dflt.startswith("(") else (dflt.replace("_", ""), None, meaning)
    return out


@lru_cache(maxsize=1)
def parameter_defaults() -> dict[str, str]:
    """Every view parameter's default, as the SQL literal its owner's header declares ('NULL':
    none; the view then says what it does without one). A parameter read by a view must be
    declared in its header: with its default by exactly one view, by name of that view by the
    others."""
    owners: dict[str, tuple[str, str]] = {}
    refs: list[tuple[Path, str, str]] = []
    for p in _view_files():
        text = p.read_text()
        decl = _declared_parameters(p, text)
        read = set(_PARAM.findall(text))
        if set(decl) != read:
            raise ValueError(f"{p}: '-- Parameters:' must list exactly the parameters the view reads "
                             f"({', '.join(sorted(read)) or 'none'})")
        for name, (dflt, owner, _) in decl.items():
            if dflt is not None:
                if name in owners:
                    raise ValueError(f"{p}: parameter {name} already has its default in {owners[name][1]}")
                owners[name] = (dflt, p.name)
            else:
                refs.append((p, name, owner or ""))
    for p, name, owner in refs:
        if name not in owners or owners[name][1] != f"{owner}.sql":
            raise ValueError(f"{p}: parameter {name} is owned by {owners.get(name, ('', 'no view'))[1]}, "
                             f"not {owner}")
    return {k: v[0] for k, v in sorted(owners.items())}


def expand(text: str) -> str:
    """A view's SQL with each ``getvariable('name')`` given its default (`parameter_defaults`)."""
    defaults = parameter_defaults()
    return _PARAM.sub(lambda m: f"coalesce({m.group(0)}, {defaults[m.group(1)]})", text)


def _view_files() -> list[Path]:
    # a view per file: sql/<subject>/*.sql (sql/lib/ holds the macros, sql/queries/
    # the statements of the Python modules, `query`, sql/diagnose/ those of the diagnose rules)
    return sorted((p for p in sql_dir().rglob("*.sql") if p.parent.name not in ("lib", "queries", "diagnose")),
                  key=lambda p: p.stem)


@lru_cache(maxsize=1)
def all_views() -> tuple[View, ...]:
    out = []
    for p in _view_files():
        written = p.read_text()
        text = expand(written)
        first = text.splitlines()[0] if text else ""
        m = _HEADER.match(first)
        if not m or m.group(1) != p.stem:
            raise ValueError(f"{p}: first line must be '-- {p.stem}: <description>'")
        header, definition = source_parts(written)
        u = _USES.search(text)
        if not u:
            raise ValueError(f"{p}: no '-- Uses: ...' line in the header")
        uses = tuple(x.strip() for x in u.group(1).split(",") if x.strip() and x.strip() != "(tables only)")
        out.append(View(m.group(1), m.group(2).strip(), p, header, definition,
                        _CREATE.sub("CREATE OR REPLACE TEMP VIEW", text, count=1), uses, text))
    return tuple(out)


_MACRO = re.compile(r"CREATE\s+OR\s+REPLACE\s+MACRO", re.IGNORECASE)


@lru_cache(maxsize=1)
def library() -> tuple[tuple[Path, str], ...]:
    """The shared SQL library: (path, statements) of each ``sql/lib/*.sql`` file, its macros
    made TEMP."""
    return tuple((p, _MACRO.sub("CREATE OR REPLACE TEMP MACRO", p.read_text()))
                 for p in sorted((sql_dir() / "lib").glob("*.sql")))


_INCLUDES = re.compile(r"^--\s*Includes:\s*(.*)$", re.MULTILINE)


@lru_cache(maxsize=1)
def lib_modules() -> dict[str, tuple[Path, str, tuple[str, ...], tuple[str, ...]]]:
    """The library as modules: file stem -> (path, statements made TEMP, the macros it defines,
    the modules it includes: its header's ``-- Includes:`` line, '(none)' for none)."""
    out = {}
    for path, text in library():
        raw = path.read_text()
        m = _INCLUDES.search(raw)
        if not m:
            raise ValueError(f"{path}: no '-- Includes: <modules>' line (or '-- Includes: (none)') in the header")
        inc = tuple(x.strip() for x in m.group(1).split(",") if x.strip() and x.strip() != "(none)")
        out[path.stem] = (path, text, tuple(_MACRO_NAME.findall(raw)), inc)
    for path, _t, _m, inc in out.values():
        unknown = [i for i in inc if i not in out]
        if unknown:
            raise ValueError(f"{path}: '-- Includes:' names no library file {', '.join(unknown)}")
    return out


@lru_cache(maxsize=1)
def _macro_module() -> dict[str, str]:
    return {m.lower(): name for name, (_p, _t, macros, _i) in lib_modules().items() for m in macros}


def lib_needed(text: str) -> list[str]:
    """The library modules that SQL ``text`` calls a macro of, with the modules they include,
    each after those it includes; raises on an include cycle."""
    mods = lib_modules()
    owner = _macro_module()
    out: list[str] = []

    def visit(name: str, stack: tuple[str, ...]) -> None:
        if name in stack:
            raise ValueError(f"sql/lib: include cycle {' -> '.join(stack + (name,))}")
        if name in out:
            return
        for dep in mods[name][3]:
            visit(dep, stack + (name,))
        out.append(name)

    for w in dict.fromkeys(x.lower() for x in _WORD.findall(text)):
        if w in owner:
            visit(owner[w], ())
    return out


def register_library(con: duckdb.DuckDBPyConnection, modules: list[str] | None = None) -> None:
    """Create the macros of ``sql/lib/`` on the connection (the views use them): of the modules
    named (`lib_needed` gives them in order), or of every file."""
    mods = lib_modules()
    for name in (modules if modules is not None else lib_needed(" ".join(_macro_module()))):
        path, text = mods[name][0], mods[name][1]
        try:
            con.execute(text)
        except duckdb.Error as e:
            raise RuntimeError(f"{path}: {str(e).splitlines()[0]}") from None


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@lru_cache(maxsize=1)
def _order() -> dict[str, tuple[str, ...]]:
    """Per view, the views it needs (itself last), in an order that creates each after the views
    it declares it uses."""
    by_name = {v.name: v for v in all_views()}
    uses = {}
    for v in all_views():
        unknown = [u for u in v.uses if u not in by_name]
        if unknown:
            raise ValueError(f"{v.path}: '-- Uses:' names no view {', '.join(unknown)}")
        uses[v.name] = set(v.uses)
    out = {}

    def visit(name, seen, order, stack):
        if name in stack:
            raise ValueError(f"sql/: the views' '-- Uses:' lines form a cycle: {' -> '.join(stack + (name,))}")
        if name in seen:
            return
        seen.add(name)
        for dep in sorted(uses[name]):
            visit(dep, seen, order, stack + (name,))
        order.append(name)

    for name in by_name:
        order: list[str] = []
        visit(name, set(), order, ())
        out[name] = tuple(order)
    return out


def referenced(query: str) -> list[str]:
    """The views a query names, with the views those need, in creation order."""
    order = _order()
    out: list[str] = []
    for w in dict.fromkeys(_WORD.findall(query)):
        for name in order.get(w, ()):
            if name not in out:
                out.append(name)
    return out


def register(con: duckdb.DuckDBPyConnection, names: list[str]) -> None:
    """Create the views named, in the order given (each after the views it uses: see
    `referenced`); the library (`register_library`) must be on the connection already."""
    by_name = {v.name: v for v in all_views()}
    for name in names:
        v = by_name[name]
        try:
            con.execute(v.sql)
        except duckdb.Error as e:
            raise RuntimeError(f"{v.path}: {str(e).splitlines()[0]}") from None


@lru_cache(maxsize=1)
def _by_name() -> dict[str, View]:
    return {v.name: v for v in all_views()}


def by_name(name: str) -> View:
    """The view called ``name``."""
    return _by_name()[name]


@lru_cache(maxsize=1)
def kept_views() -> frozenset[str]:
    """The views whose rows a read-only query session keeps once a second query needs them
    (`Store`, "shared views, computed once"): the views that other views read and that read
    views themselves. A view over tables alone (gpu_activity, kernel_bounds, ranks ...) is left
    out: reading it costs about one scan of its tables, as reading kept rows would."""
    return frozenset(u for v in all_views() for u in v.uses if _by_name()[u].uses)


_PARAM = re.compile(r"getvariable\(\s*'([A-Za-z_][A-Za-z0-9_]*)'\s*\)")


@lru_cache(maxsize=64)
def parameters(name: str) -> tuple[str, ...]:
    """The parameters (DuckDB variables read with ``getvariable``) that view ``name`` and the
    views it reads use, sorted; the library's macros read none (a test checks)."""
    return tuple(sorted({p for n in _order()[name] for p in _PARAM.findall(_by_name()[n].text)}))


@lru_cache(maxsize=1)
def all_parameters() -> tuple[str, ...]:
    """Every parameter some view reads (`parameters`), sorted: the names `--param` takes."""
    return tuple(sorted({p for v in all_views() for p in _PARAM.findall(v.text)}))


_MACRO_NAME = re.compile(r"CREATE\s+OR\s+REPLACE\s+MACRO\s+([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)
_CREATE_ANY = re.compile(r"CREATE\s+OR\s+REPLACE\s+(VIEW|MACRO)\s+", re.IGNORECASE)


def macro_names() -> list[str]:
    """The macros of the library, in file order."""
    return [m for _p, _t, macros, _i in lib_modules().values() for m in macros]


def creation_order() -> list[str]:
    """Every view, each after the views it uses."""
    out: list[str] = []
    for _name, order in _order().items():
        out += [n for n in order if n not in out]
    return out


def digest() -> str:
    """A hash of the library's and the views' SQL text: equal digests, equal persisted objects."""
    import hashlib

    h = hashlib.sha256()
    for path, _ in library():
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for v in all_views():
        h.update(v.name.encode() + b"\0" + v.text.encode() + b"\0")
    return h.hexdigest()[:16]


def persist(con: duckdb.DuckDBPyConnection) -> tuple[list[str], list[str]]:
    """Create the macros of ``sql/lib/`` and every view of ``sql/`` as persistent objects in the
    ``main`` schema of the connection's current database: the files' own statements, the names
    qualified (never TEMP), so that a DuckDB client without tracekit finds them in the store.
    Returns the (macro names, view names) created; the caller runs it inside a transaction."""
    cat = con.execute("SELECT current_database()").fetchall()[0][0]
    where = '"' + cat.replace('"', '""') + '".main.'

    def run(path: Path, text: str, count: int = 0) -> None:
        try:
            con.execute(_CREATE_ANY.sub(lambda m: f"CREATE OR REPLACE {m.group(1).upper()} {where}", text,
                                        count=count))
        except duckdb.Error as e:
            raise RuntimeError(f"{path}: {str(e).splitlines()[0]}") from None

    for path, _ in library():
        run(path, path.read_text())
    by_name = {v.name: v for v in all_views()}
    names = creation_order()
    for name in names:
        run(by_name[name].path, by_name[name].text, count=1)
    return macro_names(), names


_QUERY_HEADER = re.compile(r"^--\s*([a-z_][a-z0-9_]*)\s*:\s*(.+)$")


@lru_cache(maxsize=32)
def queries(module: str) -> dict[str, str]:
    """The named statements of ``sql/queries/<module>.sql``: the SQL that one Python module runs
    (a report, an export) over the views and tables, kept here so that every rule has its one
    home in sql/. The file opens with a header comment (what the module is), then a blank line;
    each statement follows, its own header comment first (``-- <name>: <what it returns>``, its
    columns and ``$parameters``), and ends with ``;`` at the end of a line. Statements name
    their values as DuckDB prepared parameters (``$sid``); `query` gives one statement's text."""
    return statements(sql_dir() / "queries" / f"{module}.sql")


@lru_cache(maxsize=64)
def statements(path: Path) -> dict[str, str]:
    """The named statements of a file laid out as `queries` describes (sql/queries/*.sql,
    sql/diagnose/*.sql): name -> SQL text, comment lines removed."""
    out: dict[str, str] = {}
    chunks: list[list[str]] = [[]]
    for line in path.read_text().split("\n\n", 1)[1].split("\n"):  # a statement ends at a code line ending ';'
        if chunks[-1] or line.strip():
            chunks[-1].append(line)
        if not line.startswith("--") and line.rstrip().endswith(";"):
            chunks[-1][-1] = line.rstrip()[:-1]
            chunks.append([])
    for lines in chunks:
        if not "".join(lines).strip():
            continue
        m = _QUERY_HEADER.match(lines[0])
        if not m:
            raise ValueError(f"{path}: a statement must start with '-- <name>: <description>': {lines[0]!r}")
        if m.group(1) in out:
            raise ValueError(f"{path}: statement {m.group(1)} is defined twice")
        out[m.group(1)] = "\n".join(x for x in lines if not x.startswith("--")).strip()
    return out


def query(module: str, name: str) -> str:
    """The SQL of statement ``name`` of ``sql/queries/<module>.sql`` (`queries`)."""
    return queries(module)[name]
