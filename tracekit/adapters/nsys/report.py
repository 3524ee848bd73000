"""``.nsys-rep`` / ``.qdrep`` reports: exported to SQLite with ``nsys export`` (cached beside the
input, or in the temp folder when that is read-only)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..base import TraceError
from .common import NSYS_REP_MAGIC


def find_nsys() -> str | None:
    env = os.environ.get("NSYS")
    if env:
        if os.path.isdir(env):  # an install folder: look for the binary inside
            for cand in ("nsys", "bin/nsys", "target-linux-x64/nsys"):
                p = os.path.join(env, cand)
                if os.path.isfile(p) and os.access(p, os.X_OK):
                    return p
            return None
        return env if os.path.isfile(env) and os.access(env, os.X_OK) else shutil.which(env)
    return shutil.which("nsys")


def is_report(path: Path) -> bool:
    """True for an ``.nsys-rep`` / ``.qdrep`` report (by magic, else by suffix)."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(NSYS_REP_MAGIC))
    except OSError:
        return False
    if head == NSYS_REP_MAGIC:
        return True
    return not head.startswith(b"SQLite format 3") and path.suffix.lower() in (".nsys-rep", ".qdrep")


def _cache_path(path: Path) -> Path:
    """``<input>.sqlite`` next to the input when that folder is writable, else a temp-dir file
    keyed by the input's path, size and modification time."""
    beside = path.with_name(path.name + ".sqlite")
    if os.access(path.parent, os.W_OK) and (not beside.exists() or os.access(beside, os.W_OK)):
        return beside
    st = path.stat()
    key = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
    d = Path(tempfile.gettempdir()) / "tracekit-nsys-export"
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{path.stem}-{key}.sqlite"


def export_report(path: Path) -> tuple[Path, dict]:
    """Export a report to SQLite with ``nsys export`` (reusing a fresh cache); returns the SQLite
    path and notes for ``sources.metadata``."""
    cache = _cache_path(path)
    note = {"report": str(path.resolve()), "exported_sqlite": str(cache)}
    if cache.exists() and cache.stat().st_mtime_ns >= path.stat().st_mtime_ns and cache.stat().st_size:
        note["export"] = "reused the cached export"
        return cache, note
    nsys = find_nsys()
    if nsys is None:
        raise TraceError(path, "is an Nsight Systems report, and reading it needs `nsys`, which is not on "
                         "PATH (or in the NSYS environment variable)",
                         "install Nsight Systems (https://developer.nvidia.com/nsight-systems) or pass "
                         "the SQLite export instead (`nsys export --type sqlite REPORT`)")
    tmp = cache.with_name(f"{cache.stem}.tmp{os.getpid()}.sqlite")
    cmd = [nsys, "export", "--type", "sqlite", "--force-overwrite=true", "-o", str(tmp), str(path)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    except OSError as e:
        raise TraceError(path, f"could not run {nsys} ({e.strerror or e})",
                         "check the NSYS variable / PATH, or pass the SQLite export instead") from None
    if r.returncode != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        lines = [l.strip() for l in (r.stderr or r.stdout or "").splitlines() if l.strip()]
        why = lines[-1] if lines else f"exit status {r.returncode}"
        raise TraceError(path, f"`nsys export --type sqlite` failed ({why})",
                         "open the report in Nsight Systems to check it, or export it by hand")
    os.replace(tmp, cache)
    note["export"] = " ".join(cmd[:-3] + ["-o", str(cache), str(path)])
    return cache, note
