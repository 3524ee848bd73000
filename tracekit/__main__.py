"""``python -m tracekit``: the `tracekit` command."""

from . import _command

_command()
