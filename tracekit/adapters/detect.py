"""Detect an input's format from its content (the file name is only a tie-breaker)."""

from __future__ import annotations

import gzip
import importlib
import re
import zlib
from pathlib import Path

from .base import Adapter, TraceError

FORMATS = {
    "kineto": ("tracekit.adapters.kineto", "KinetoAdapter"),
    "nsys": ("tracekit.adapters.nsys", "NsysAdapter"),
    "ncu": ("tracekit.adapters.ncu", "NcuAdapter"),
}

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
NSYS_REP_MAGIC = b"NVIDIA Tegra Profiler Report"
NCU_REP_MAGIC = b"NVR\x00"
# an ncu table header written with another delimiter (the ncu reader explains the problem)
_NCU_OTHER_DELIMITER = re.compile(rb'(?m)^"?ID"?[;\t|]"?Process ID"?[;\t|]')


def _head(path: Path, n: int = 65_536) -> bytes:
    with open(path, "rb") as f:
        raw = f.read(n)
    if raw[:2] == GZIP_MAGIC:
        try:
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, n)
        except zlib.error:
            raise TraceError(path, "corrupt gzip data at the start of the file",
                             "check that the file was copied completely") from None
    return raw


def sniff(path: Path) -> str:
    """Return 'kineto', 'nsys' or 'ncu', or raise TraceError."""
    if not path.exists():
        raise TraceError(path, "no such file")
    if path.is_dir():
        raise TraceError(path, "is a directory", "pass the trace files inside it")
    if path.stat().st_size == 0:
        raise TraceError(path, "empty file (0 bytes)", "re-export the trace; the profiler may not have finished writing")
    with open(path, "rb") as f:
        magic = f.read(64)
    if magic.startswith(SQLITE_MAGIC) or magic.startswith(NSYS_REP_MAGIC):
        return "nsys"
    suffix = "".join(path.suffixes[-2:]).lower()
    if path.suffix.lower() in (".nsys-rep", ".qdrep"):
        return "nsys"
    if path.suffix.lower() in (".ncu-rep", ".ncu-repz") or magic.startswith(NCU_REP_MAGIC):
        return "ncu"
    head = _head(path)
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 text (e.g. PowerShell redirection)
        head = head[: len(head) // 2 * 2].decode("utf-16", "replace").encode("utf-8", "replace")
    elif head[:3] == b"\xef\xbb\xbf":  # UTF-8 BOM
        head = head[3:]
    text = head.lstrip()
    if text[:1] in (b"{", b"[") and (b'"traceEvents"' in head or b'"ph"' in head):
        return "kineto"
    if b'"ID","Process ID"' in head or b"==PROF==" in head or b'"Process ID","Process Name"' in head:
        return "ncu"
    if _NCU_OTHER_DELIMITER.search(head) or (b"  Section: " in head and b"Metric Name" in head):
        return "ncu"  # another delimiter, or ncu's text mode: the ncu reader says what to do
    if text[:1] in (b"{", b"["):
        return "kineto"  # JSON without the keys in the first 64 KiB: let the Kineto reader judge
    if suffix.endswith(".json") or suffix.endswith(".json.gz"):
        return "kineto"
    raise TraceError(path, "unrecognized format (not a Kineto/Chrome JSON trace, nsys SQLite or "
                     "report, or ncu CSV)", "pass --format kineto|nsys|ncu if it is one of these")


def adapter_for(path: Path, fmt: str | None = None) -> Adapter:
    fmt = fmt or sniff(Path(path))
    if fmt not in FORMATS:
        raise TraceError(path, f"unknown format {fmt!r}", "use kineto, nsys or ncu")
    if not Path(path).exists():
        raise TraceError(path, "no such file")
    mod, cls = FORMATS[fmt]
    try:
        module = importlib.import_module(mod)
    except ModuleNotFoundError as e:
        if e.name == mod:
            raise TraceError(path, f"the {fmt} reader is not available in this tracekit build") from None
        raise
    return getattr(module, cls)()


def open_maybe_gzip(path: Path):
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open(path, "rb") if magic == GZIP_MAGIC else open(path, "rb")
