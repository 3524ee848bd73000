"""The input formats (one registry) and the detection of an input's format from its content (the
file name is only a tie-breaker).

A format is one entry of ``REGISTRY``: its name (``--format NAME``), a few words for error
messages, the module of its reader and the reader class (imported only when used), and its
sniffer: a function ``sniff(probe: Probe) -> int`` that the module defines (``module.sniff``
unless the entry names another ``"module:function"``) and that answers how sure it is that the
input is of its format: 0 (not it), ``GUESS`` (a JSON start, a file name), ``CONTENT`` (the text
says so), ``NAME`` (a report's file name), ``MAGIC`` (the file's magic bytes).  The highest answer
wins; a tie goes to the format listed first.  Adding a format is a module with its reader class
and ``sniff`` plus one ``Format`` line here (docs/contributing.md).
"""

from __future__ import annotations

import gzip
import importlib
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from .base import Adapter, TraceError

#: how sure a sniffer is (see the module docstring)
GUESS, CONTENT, NAME, MAGIC = 1, 2, 3, 4

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
NSYS_REP_MAGIC = b"NVIDIA Tegra Profiler Report"
NCU_REP_MAGIC = b"NVR\x00"


@dataclass(frozen=True)
class Format:
    name: str      # --format NAME, sources.format
    what: str      # the inputs in a few words, for "unrecognized format (not a ...)"
    module: str    # the reader's module
    reader: str    # the Adapter subclass in it
    sniffer: str = ""  # "module:function" when the sniffer lives elsewhere (default: module.sniff)


#: every input format; the order breaks ties between sniffers' answers
REGISTRY: tuple[Format, ...] = (
    # the sniffers live here: detecting one format then imports no other reader (the nsys
    # package, with sqlite3, subprocess and a thread pool, takes ~8 ms to import; ncu's ~5 ms)
    Format("kineto", "Kineto/Chrome JSON trace", "tracekit.adapters.kineto", "KinetoAdapter",
           sniffer="tracekit.adapters.detect:sniff_kineto"),
    Format("nsys", "nsys SQLite or report", "tracekit.adapters.nsys", "NsysAdapter",
           sniffer="tracekit.adapters.detect:sniff_nsys"),
    Format("ncu", "ncu CSV", "tracekit.adapters.ncu", "NcuAdapter",
           sniffer="tracekit.adapters.detect:sniff_ncu"),
)
#: the names, for --format (detection and the messages read REGISTRY itself)
NAMES: tuple[str, ...] = tuple(f.name for f in REGISTRY)


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


class Probe:
    """What sniffers look at: ``path``, ``magic`` (the first 64 bytes), ``suffix`` (the last one,
    lower case), ``suffix2`` (the last two), and ``head``: the first 64 KiB as text bytes
    (gunzipped, a UTF-8 BOM dropped, UTF-16 re-encoded as UTF-8), read on first use; b"" when the
    gzip data is corrupt (``error`` then holds the one-line error, raised when no sniffer is
    surer than ``CONTENT``)."""

    def __init__(self, path: Path):
        self.path = path
        with open(path, "rb") as f:
            self.magic = f.read(64)
        self.suffix = path.suffix.lower()
        self.suffix2 = "".join(path.suffixes[-2:]).lower()
        self.error: TraceError | None = None
        self._text: bytes | None = None

    @property
    def head(self) -> bytes:
        if self._text is None:
            try:
                head = _head(self.path)
            except TraceError as e:
                self.error, head = e, b""
            if head[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 text (e.g. PowerShell redirection)
                head = head[: len(head) // 2 * 2].decode("utf-16", "replace").encode("utf-8", "replace")
            elif head[:3] == b"\xef\xbb\xbf":  # UTF-8 BOM
                head = head[3:]
            self._text = head
        return self._text


def sniff_kineto(p: Probe) -> int:
    """Kineto / Chrome trace-event JSON (moves to the Kineto adapter's module)."""
    head = p.head
    text = head.lstrip()
    if text[:1] in (b"{", b"[") and (b'"traceEvents"' in head or b'"ph"' in head):
        return CONTENT
    if text[:1] in (b"{", b"["):
        return GUESS  # JSON without the keys in the first 64 KiB: let the Kineto reader judge
    if p.suffix2.endswith(".json") or p.suffix2.endswith(".json.gz"):
        return GUESS
    return 0


def sniff_nsys(p: Probe) -> int:
    """An nsys SQLite export or report: SQLite's or the report's magic, else a report's name
    (.nsys-rep / .qdrep; the reader says what is wrong with it).  (``nsys.sniff`` is this.)"""
    if p.magic.startswith(SQLITE_MAGIC) or p.magic.startswith(NSYS_REP_MAGIC):
        return MAGIC
    return NAME if p.suffix in (".nsys-rep", ".qdrep") else 0


# an ncu table header written with another delimiter (the ncu reader explains the problem)
_NCU_OTHER_DELIMITER = re.compile(rb'(?m)^"?ID"?[;\t|]"?Process ID"?[;\t|]')


def sniff_ncu(p: Probe) -> int:
    """ncu input: a report (magic 'NVR', or the .ncu-rep / .ncu-repz name), ncu's CSV (the header
    of the details / raw pages or of --print-summary, ==PROF== console lines), or what the reader
    refuses with a precise message (another delimiter, ncu's text mode).  (``ncu.sniff`` is this.)"""
    if p.magic.startswith(NCU_REP_MAGIC):
        return MAGIC
    if p.suffix in (".ncu-rep", ".ncu-repz"):
        return NAME
    head = p.head
    if b'"ID","Process ID"' in head or b"==PROF==" in head or b'"Process ID","Process Name"' in head:
        return CONTENT
    if _NCU_OTHER_DELIMITER.search(head) or (b"  Section: " in head and b"Metric Name" in head):
        return CONTENT
    return 0


def _sniffer(f: Format):
    mod, _, fn = (f.sniffer or f"{f.module}:sniff").partition(":")
    try:
        return getattr(importlib.import_module(mod), fn)
    except ModuleNotFoundError as e:
        if e.name == mod:  # a reader left out of this build: it recognizes nothing
            return None
        raise


def check_file(path: Path):
    """The input's ``os.stat``, once it is known to be a regular file with a UTF-8 name that
    can be read; else TraceError: no such file, a symbolic link loop, a directory, not a regular
    file (a device such as /dev/zero, a FIFO: nothing to convert as a whole)."""
    import errno
    import os
    import stat

    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise TraceError(path, "the file's name is not UTF-8 text", "rename it (tracekit stores the "
                         "path of each source as text)") from None
    try:
        st = os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise TraceError(path, "a symbolic link loop (the link points back at itself)",
                             "point it at the trace file") from None
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            if os.path.lexists(path):
                raise TraceError(path, "a symbolic link to a missing file", "point it at the trace file") from None
            raise TraceError(path, "no such file") from None
        raise TraceError(path, f"cannot read ({e.strerror or e})", "check the path and its permissions") from None
    if stat.S_ISDIR(st.st_mode):
        raise TraceError(path, "is a directory", "pass the trace files inside it")
    if not stat.S_ISREG(st.st_mode):
        what = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else
                "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "special")
        raise TraceError(path, f"not a regular file ({what})", "save the trace to a file and convert that")
    return st


def sniff(path: Path) -> str:
    """The name of the input's format (the registry's surest sniffer), or raise TraceError."""
    st = check_file(path)
    if st.st_size == 0:
        raise TraceError(path, "empty file (0 bytes)", "re-export the trace; the profiler may not have finished writing")
    probe = Probe(path)
    best, level = None, 0
    for f in REGISTRY:
        fn = _sniffer(f)
        got = fn(probe) if fn is not None else 0
        if got > level:
            best, level = f.name, got
    if probe.error is not None and level <= CONTENT:
        raise probe.error
    if best is None:
        whats = [f.what for f in REGISTRY]
        raise TraceError(path, f"unrecognized format (not a {', '.join(whats[:-1])}, or {whats[-1]})",
                         f"pass --format {'|'.join(f.name for f in REGISTRY)} if it is one of these")
    return best


def adapter_for(path: Path, fmt: str | None = None) -> Adapter:
    """The reader of the input's format (``fmt``, else the sniffed one)."""
    fmt = fmt or sniff(Path(path))
    entry = next((f for f in REGISTRY if f.name == fmt), None)
    if entry is None:
        names = [f.name for f in REGISTRY]
        raise TraceError(path, f"unknown format {fmt!r}", f"use {', '.join(names[:-1])} or {names[-1]}")
    check_file(Path(path))
    mod, cls = entry.module, entry.reader
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
