"""What the click commands share (tracekit/cli.py, diagnose_commands.py, export/commands.py):
an error of the Python API ends the command with one line on standard error and exit status 2."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from .adapters.base import TraceError
from .budget import BudgetError
from .names import shown
from .outputs import OutputError
from .store import StoreError


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
