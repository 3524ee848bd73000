"""The byte stream of a Kineto trace: the file read (and inflated: ISA-L where its wheel
installs, else zlib) in blocks by a background thread, gzip members with junk after them, text
encodings (a UTF-8 BOM dropped, UTF-16 / UTF-32 transcoded), and decompression bombs refused."""

from __future__ import annotations

import gzip
import io
import os
import queue
import sys
import threading
import zlib
from pathlib import Path

from ... import budget
from ..base import TraceError

try:  # ISA-L's inflate: 3-4x zlib's speed on these traces (~0.35 ms vs ~1.2 ms per MB of JSON)
    from isal import igzip as _gzip
    from isal.isal_zlib import error as _inflate_error
except ImportError:  # pragma: no cover - a platform without isal wheels
    _gzip, _inflate_error = gzip, zlib.error



def setting(name: str):
    """A setting of the package (``tracekit.adapters.kineto.SCAN``, ``BLOCK_BYTES``, ...), read
    where it is used, so that changing it there (as the tests do) takes effect."""
    return getattr(sys.modules[__package__], name)

def block_bytes() -> int:
    """Bytes per block: BLOCK_BYTES, or fewer under the memory budget (budget.plan: 4 MiB at the
    default 400 MB; each MiB of block is ~5 MB of peak memory, blocks in flight and the Arrow
    columns of a chunk)."""
    return max(1, min(setting("BLOCK_BYTES"), budget.plan().kineto_block))


#: A .gz input may inflate to at most this many times its size (beyond INFLATE_FLOOR bytes): real
#: traces inflate 5-25x; 2 MB of gzip holding 2 GiB of whitespace is a
#: decompression bomb, refused before it takes the memory.
INFLATE_RATIO = int(os.environ.get("TRACEKIT_MAX_INFLATE_RATIO", "100"))
INFLATE_FLOOR = 64 * 2**20


class Blocks:
    """The file's (inflated) bytes in blocks, read ahead by a background thread."""

    def __init__(self, path: Path, block: int | None = None):
        self.path = path
        self.total = os.path.getsize(path)
        self.done = 0  # compressed bytes read so far
        self._q: queue.Queue = queue.Queue(maxsize=2)
        self._stop = threading.Event()
        self._block = block or block_bytes()
        self.notes: dict[str, int] = {}  # repairs of the byte stream (BOM, UTF-16, gzip tail)
        self._t = threading.Thread(target=self._work, name="tracekit-read", daemon=True)
        self._t.start()

    def _work(self):
        try:
            with open(self.path, "rb") as raw:
                gz = raw.read(2) == b"\x1f\x8b"
                raw.seek(0)
                f = _gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw
                inflated, dec = 0, None
                while not self._stop.is_set():
                    try:
                        raw_blk = f.read(self._block)
                    except (EOFError, OSError, zlib.error, _inflate_error):
                        found = _gzip_trailing_garbage(self.path) if gz else None
                        if found is None or len(found[0]) < inflated:
                            raise
                        members, junk = found
                        self.notes["bytes after the end of the gzip data, ignored"] = junk
                        raw_blk = members[inflated:]  # what the gzip reader had not handed out
                        f = io.BytesIO(b"")  # then the end
                    at_eof = not raw_blk
                    first = inflated == 0
                    inflated += len(raw_blk)
                    if gz and inflated > INFLATE_FLOOR and inflated > INFLATE_RATIO * self.total:
                        raise TraceError(self.path, f"the gzip data inflates to over {INFLATE_RATIO}x its "
                                         f"size ({inflated:,} bytes from {self.total:,}): not a trace "
                                         "(a decompression bomb?)", "set TRACEKIT_MAX_INFLATE_RATIO "
                                         "higher if this really is your trace")
                    if first and raw_blk:
                        blk, dec = _sniff_encoding(raw_blk, self.notes)
                    elif dec is not None:
                        blk = dec(raw_blk, at_eof)
                    else:
                        blk = raw_blk
                    if blk:
                        self._put((blk, raw.tell()))
                    if at_eof:
                        self._put((b"", raw.tell()))
                        return
        except BaseException as e:  # handed to the reader
            self._put((e, 0))

    def _put(self, item):
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def next(self) -> bytes:
        """The next block; b"" at the end.  Raises TraceError for corrupt gzip data."""
        item, pos = self._q.get()
        if isinstance(item, BaseException):
            if isinstance(item, TraceError):
                raise item
            if isinstance(item, (EOFError, OSError, zlib.error, _inflate_error)):
                raise TraceError(self.path, f"truncated or corrupt gzip data ({item})",
                                 "re-copy or re-export the trace") from None
            raise item
        self.done = pos
        return item

    def close(self):
        self._stop.set()
        self._t.join()


def _sniff_encoding(blk: bytes, notes: dict):
    """The first block of the document: a UTF-8 byte order mark dropped; UTF-16 / UTF-32 (by their
    BOM, or ASCII characters alternating with NULs) transcoded to UTF-8, block by block (returns the decoder
    for the next blocks: f(block, final) -> bytes). Each noted in ``notes``."""
    import codecs

    if blk.startswith(codecs.BOM_UTF8):
        notes["UTF-8 byte order mark removed"] = 1
        return blk[3:], None
    enc = None
    for bom, e in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                   (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if blk.startswith(bom):
            enc = e
            break
    head = blk[:4]
    if enc is None and len(head) == 4 and head[1] == 0 and head[3] == 0 and head[0] and head[2]:
        enc = "utf-16-le"  # ASCII text (whitespace, '{') as 2-byte units, no BOM
    elif enc is None and len(head) == 4 and head[0] == 0 and head[2] == 0 and head[1] and head[3]:
        enc = "utf-16-be"
    if enc is None:
        return blk, None
    d = codecs.getincrementaldecoder(enc)(errors="replace")
    notes[f"text encoded as {enc.upper()}, read as such (transcoded to UTF-8)"] = 1

    def dec(b: bytes, final: bool) -> bytes:
        return d.decode(b, final).encode("utf-8")

    return dec(blk, False), dec


def _gzip_trailing_garbage(path: Path) -> tuple[bytes, int] | None:
    """When a .gz file is whole gzip members followed by bytes that are not gzip (a copy that
    appended junk): (the members' inflated bytes, the number of junk bytes). None when the gzip
    data itself is truncated or corrupt, or there is no junk."""
    with open(path, "rb") as f:
        data = f.read()
    out, pos, n = [], 0, 0
    while pos < len(data) and data[pos:pos + 2] == b"\x1f\x8b":
        d = zlib.decompressobj(31)
        try:
            out.append(d.decompress(data[pos:]))
        except zlib.error:
            return None
        if not d.eof:
            return None  # truncated
        pos = len(data) - len(d.unused_data)
        n += 1
    junk = len(data) - pos
    return (b"".join(out), junk) if n and junk else None



def read_bytes(path: Path, notes: dict | None = None) -> bytes:
    """The whole (inflated, UTF-8) document: `Blocks`' reading, joined."""
    src = Blocks(path)
    parts = []
    try:
        while True:
            blk = src.next()
            if not blk:
                break
            parts.append(blk)
    finally:
        src.close()
    if notes is not None:
        notes.update(src.notes)
    return b"".join(parts)

