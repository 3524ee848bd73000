"""The output file: chunks written from a background thread (gzip there), then moved into place."""

from __future__ import annotations

import gzip
import os
import queue
import threading
from pathlib import Path

from .options import ExportError


class Sink:
    """Writes byte chunks to a file from a background thread (gzip compression runs there, off
    the main thread: zlib releases the GIL).  The queue is bounded, so memory is too."""

    def __init__(self, path: Path, gz: bool, level: int):
        from ...store import os_error_line

        self.path = path
        self.tmp = path.with_name(path.name + ".tmp")
        if path.exists() and not path.is_file():
            raise ExportError(f"{path}: not a regular file (the export is written beside it and "
                              "moved into place); give -o a file path")
        try:
            self.f = open(self.tmp, "wb")
        except OSError as e:
            raise ExportError(os_error_line(e)) from None
        self.out = gzip.GzipFile(fileobj=self.f, mode="wb", compresslevel=level, mtime=0) if gz else self.f
        self.q: queue.Queue = queue.Queue(maxsize=16)
        self.err: BaseException | None = None
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while True:
            chunk = self.q.get()
            if chunk is None:
                return
            if self.err is None:
                try:
                    self.out.write(chunk)
                except BaseException as e:  # reported by close()
                    self.err = e

    def write(self, chunk: bytes) -> None:
        if self.err is not None:
            raise ExportError(f"{self.path}: write failed ({self.err})")
        self.q.put(chunk)

    def close(self, ok: bool = True) -> int:
        self.q.put(None)
        self.t.join()
        try:
            if self.out is not self.f:
                self.out.close()
            self.f.close()
        except OSError as e:  # the last bytes did not fit (full disk)
            self.err = self.err or e
        if not ok or self.err is not None:
            self.tmp.unlink(missing_ok=True)
            if self.err is not None:
                raise ExportError(f"{self.path}: write failed ({self.err})")
            return 0
        try:
            os.replace(self.tmp, self.path)
        except OSError as e:
            self.tmp.unlink(missing_ok=True)
            from ...store import os_error_line

            raise ExportError(os_error_line(e, self.path)) from None
        return self.path.stat().st_size
