"""What the click commands share (tracekit/cli.py, diagnose_commands.py, export/commands.py):
an error of the Python API ends the command with one line on standard error and exit status 2."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from .adapters.base import TraceError
from .budget import BudgetError
from .names import shown
from .outputs import OutputError
from .store import DEFAULT_DB, StoreError

#: the options several commands take alike
DB_OPTION = click.option("--db", "db", default=DEFAULT_DB, show_default=True, type=click.Path(dir_okay=False),
                         help="The tracekit store (a DuckDB file).")
OUTPUT_OPTION = click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
                             help="Write to this file instead of standard output.")


def fail(msg: str) -> None:
    """``tracekit: error: MSG`` (names in it with their control characters escaped, a DuckDB
    error's hint lines kept), exit status 2."""
    click.echo(f"tracekit: error: {shown(msg, keep_newlines=True)}", err=True)
    sys.exit(2)


@contextmanager
def one_line_errors() -> Iterator[None]:
    """An error of the API (bad input, options, store or output) ends the command: one line, exit 2."""
    try:
        yield
    except TraceError as e:
        fail(e.one_line())
    except (StoreError, BudgetError, OutputError) as e:
        fail(str(e))
