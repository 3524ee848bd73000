"""Export options, the result summary, the one-line error, and the format from the file name."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from ...names import plural

JSON_SUFFIXES = (".json", ".json.gz")
PROTO_SUFFIXES = (".pftrace", ".perfetto-trace", ".pb")


class ExportError(Exception):
    """A problem with the selection or the output path; printed as one line."""


@dataclass
class ExportOptions:
    sources: tuple[int, ...] = ()
    start_ns: int | None = None  # common clock (Unix epoch ns)
    end_ns: int | None = None
    devices: tuple[int, ...] = ()
    align: dict[int, int] = field(default_factory=dict)
    counters: bool = True  # GPU utilization and launch-queue depth
    util_bucket_ns: int | None = None  # default: about 2,000 buckets over the exported span
    format: str | None = None  # 'json' or 'proto'; default from the output suffix
    gzip_level: int = 3
    # {'start': True} when start_ns is relative to the earliest start of the selected sources
    relative: dict = field(default_factory=dict)


@dataclass
class ExportResult:
    path: str
    format: str
    t0_ns: int = 0
    slices: int = 0
    flows: int = 0
    counter_samples: int = 0
    counter_tracks: int = 0
    extra_lanes: int = 0
    processes: dict[int, str] = field(default_factory=dict)
    threads: dict[tuple[int, int], str] = field(default_factory=dict)
    sources: list[dict] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    util_bucket_ns: int | None = None
    bytes_written: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        parts = [plural(self.slices, "slice"), plural(self.flows, "flow"),
                 f"{plural(self.counter_samples, 'counter sample')} on {plural(self.counter_tracks, 'track')}",
                 plural(len(self.processes), "process", nouns="processes"), plural(len(self.threads), "thread")]
        if self.extra_lanes:
            parts.append(plural(self.extra_lanes, "overlap lane"))
        line = f"wrote {self.path} ({self.format}, {self.bytes_written / 1e6:.1f} MB, " \
               f"{self.seconds:.1f} s): " + ", ".join(parts)
        if self.skipped:
            line += "; not exported: " + "; ".join(f"{n:,} {r}" for r, n in self.skipped.most_common())
        return line


def output_format(path: str | os.PathLike, fmt: str | None = None) -> str:
    if fmt:
        if fmt not in ("json", "proto"):
            raise ExportError(f"unknown format {fmt!r}; use json or proto")
        return fmt
    name = str(path).lower()
    if name.endswith(JSON_SUFFIXES):
        return "json"
    if name.endswith(PROTO_SUFFIXES):
        return "proto"
    raise ExportError(f"{path}: cannot tell the format from the name; use .json, .json.gz or "
                      ".pftrace (or --format json|proto)")
