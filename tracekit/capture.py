"""Capture from Python: ``tracekit.profile()``, torch.profiler with the settings tracekit's analyses
need, converted into a store on exit.

    import tracekit
    with tracekit.profile("run.duckdb") as cap:
        for _ in range(8):
            with cap.range("decode_step"):
                model(x)
    print(cap.diagnose())

What it sets up: CPU + CUDA activities (CPU only without a GPU), ``record_shapes`` (input
shapes feed the op tables), and for each ``cap.range(name)`` both a ``record_function`` range
(Kineto's user annotation, the unit of the ``phases`` views) and an NVTX range, so the same
script run under ``nsys profile`` gets NVTX phases on nsys's timeline too. Under nsys
(``NSYS_PROFILING_SESSION_ID`` or ``NSYS_...`` variables in the environment, or ``nvtx=True``),
``torch.autograd.profiler.emit_nvtx`` also marks every op. On exit the Chrome trace is written
(``trace=`` path, else next to the store) and converted into the store as one new source.
torch is only needed here (the ``capture`` extra).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
from pathlib import Path

from .store import DEFAULT_DB, SourceSummary


def _torch():
    """torch, or ModuleNotFoundError in one line saying how to install it (the `capture` extra)."""
    try:
        import torch
    except ModuleNotFoundError as e:
        if e.name != "torch":
            raise
        from . import install_hint

        raise ModuleNotFoundError("tracekit.profile() needs PyTorch, which is not installed: "
                                  f"{install_hint('capture')} (or PyTorch for your CUDA version "
                                  "from pytorch.org)", name="torch") from None
    return torch


def _under_nsys() -> bool:
    return any(k.startswith("NSYS_") for k in os.environ)


class Capture:
    """What ``tracekit.profile`` yields: ``range(name)`` for phases, then (after the block)
    ``summary``, ``trace`` and ``diagnose()``."""

    def __init__(self, db: Path, trace: Path):
        self.db = db
        self.trace = trace
        self.prof = None  # the torch.profiler.profile object, while capturing
        self.summary: SourceSummary | None = None

    @contextlib.contextmanager
    def range(self, name: str):
        """A phase: a record_function range (Kineto) plus an NVTX range (nsys) of this name."""
        import torch

        with contextlib.ExitStack() as stack:
            stack.enter_context(torch.profiler.record_function(name))
            if torch.cuda.is_available():
                stack.enter_context(torch.cuda.nvtx.range(name))
            yield

    def step(self) -> None:
        """Advance a torch.profiler schedule, when one was given."""
        self.prof.step()

    def diagnose(self, **kwargs):
        """Run ``tracekit diagnose`` on the new source (keywords: those of `api_report.diagnose`);
        ``str()`` of the result is the text report."""
        from .api_report import diagnose

        if self.summary is None:
            raise RuntimeError("diagnose() is available after the profile block has ended")
        return _Text(*diagnose(self.db, source_id=self.summary.source_id, **kwargs))


class _Text:
    def __init__(self, diagnosis, text: str):
        self.diagnosis, self.text = diagnosis, text

    @property
    def findings(self):
        return self.diagnosis.findings

    def __str__(self) -> str:
        return self.text


@contextlib.contextmanager
def profile(db: str | os.PathLike = DEFAULT_DB, *, trace: str | os.PathLike | None = None,
            replace: bool = False, nvtx: bool | None = None, record_shapes: bool = True,
            with_stack: bool = False, rank: int | None = None, **profiler_kwargs):
    """Profile the block with torch.profiler and convert the trace into ``db`` on exit.

    ``trace``: where the Chrome trace goes (default ``<db dir>/tracekit-<UTC time>.json.gz``);
    ``replace``: start the store afresh; ``nvtx``: also emit NVTX for every op (default: when
    running under nsys); other keyword arguments go to ``torch.profiler.profile`` (e.g. a
    ``schedule``; then call ``cap.step()`` per iteration).  Without torch it raises
    ModuleNotFoundError in one line with the install hint."""
    torch = _torch()
    from torch.profiler import ProfilerActivity

    db = Path(db)
    if trace is None:
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        trace = db.resolve().parent / f"tracekit-{stamp}.json.gz"
    cap = Capture(db, Path(trace))
    acts = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(ProfilerActivity.CUDA)
    profiler_kwargs.setdefault("activities", acts)
    with contextlib.ExitStack() as stack:
        cap.prof = stack.enter_context(torch.profiler.profile(
            record_shapes=record_shapes, with_stack=with_stack, **profiler_kwargs))
        if nvtx if nvtx is not None else _under_nsys():
            stack.enter_context(torch.autograd.profiler.emit_nvtx(record_shapes=record_shapes))
        yield cap
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    _export(cap.prof, cap.trace)
    cap.prof = None
    from .api import convert

    # (its fingerprint is recorded: a later convert of the trace is refused)
    [cap.summary] = convert([cap.trace], db, replace=replace, rank=rank, allow_duplicate=True).summaries


def _export(prof, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        import gzip
        import shutil
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            raw = Path(d) / "trace.json"
            prof.export_chrome_trace(str(raw))
            with open(raw, "rb") as f, gzip.open(path, "wb", compresslevel=6) as g:
                shutil.copyfileobj(f, g)
    else:
        prof.export_chrome_trace(str(path))
