"""What the Perfetto lint's checks share (lint.py: Chrome JSON, lint_proto.py: TrackEvent
protobuf): the report, the deepest nesting Perfetto keeps, reading a trace file, the pid / tid rule."""

from __future__ import annotations

import gzip
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

MAX_DEPTH = 512


@dataclass
class LintReport:
    path: str
    format: str
    errors: Counter = field(default_factory=Counter)  # rule -> count
    warnings: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)  # rule -> first example text
    counts: dict = field(default_factory=dict)
    process_names: dict = field(default_factory=dict)
    thread_names: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors

    def error(self, rule: str, example: str = "") -> None:
        self.errors[rule] += 1
        if example and rule not in self.examples:
            self.examples[rule] = example[:300]

    def warn(self, rule: str, example: str = "") -> None:
        self.warnings[rule] += 1
        if example and rule not in self.examples:
            self.examples[rule] = example[:300]

    def lines(self) -> list[str]:
        out = [f"{self.path} ({self.format}): "
               + ", ".join(f"{k} {v:,}" for k, v in self.counts.items())]
        for kind, c in (("error", self.errors), ("warning", self.warnings)):
            for rule, n in c.most_common():
                ex = self.examples.get(rule)
                out.append(f"  {kind}: {rule} ({n:,})" + (f": {ex}" if ex else ""))
        out.append("  OK: Perfetto should import it without errors" if self.ok
                   else f"  FAILED: {sum(self.errors.values()):,} errors")
        return out


def read_trace(path: Path) -> bytes:
    """The bytes of a trace file, gunzipped where it is gzip."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def id_ok(pidtid) -> bool:
    """A pid / tid that Perfetto takes: an int in [1, 2^31)."""
    return isinstance(pidtid, int) and not isinstance(pidtid, bool) and 1 <= pidtid < 2**31
