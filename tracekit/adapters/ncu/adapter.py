"""NcuAdapter: picks the reader (CSV pages or a report), then emits one ``ncu_kernels`` row per
result, the processes and devices, and the ``sources`` fields."""

from __future__ import annotations

import os
from pathlib import Path

from ... import schema
from ...names import short_kernel_name
from ..base import Adapter, Builders, TraceError
from ..fit import fits
from ..detect import NCU_REP_MAGIC, sniff_ncu
from .csvpages import CsvPages, open_text
from .report import ReportReader
from .values import (
    L1_REQUESTS,
    L1_SECTORS,
    DEVICE_METRICS,
    SM_COUNT_METRIC,
    dim3,
    int_cell,
    int_or_none,
    Result,
)

# the report's magic and the sniffer live in the format registry (detecting another format
# imports no ncu module)
REPORT_MAGIC = NCU_REP_MAGIC
sniff = sniff_ncu

_COLUMN = {f.name: f.type for f in schema.table("ncu_kernels").arrow}
#: identity cells -> their ncu_kernels column
_IDENTITY_COLUMNS = {"Process ID": "pid", "Device": "device_id", "Context": "context_id", "Stream": "stream_id"}


def _cell_int(ident: dict, cell: str) -> int | None:
    """An identity cell as its column's integer; None when empty, not an integer, or beyond the
    column's type (the caller keeps the cell's text)."""
    if not (ident.get(cell) or "").strip():
        return None
    v = int_cell(ident.get(cell))
    return v if fits(v, _COLUMN[_IDENTITY_COLUMNS[cell]]) else None


class NcuAdapter(CsvPages, ReportReader, Adapter):
    FORMAT = "ncu"

    def read(self, path, source_id, progress=None):
        path = Path(path)
        with open(path, "rb") as f:
            magic = f.read(4)
        b = Builders(source_id, self.accounting)
        self._b = b
        self._path = path
        self._results: dict[int, Result] = {}
        self._processes: dict[int | None, str | None] = {}  # pid -> its first name: one row per pid
        self._devices: dict[int, dict] = {}
        self._hosts: dict[str, None] = {}
        if magic == REPORT_MAGIC or path.suffix.lower() == ".ncu-repz":
            yield from self._read_report(path, progress)
        elif path.suffix.lower() == ".ncu-rep":
            raise TraceError(path, "not an Nsight Compute report (the file does not start with the "
                             "report magic 'NVR')", "check that the file was copied completely")
        else:
            with open_text(path) as (f, pos):
                try:
                    yield from self._read_csv(path, f, pos, os.path.getsize(path), progress)
                except (EOFError, OSError) as e:  # truncated / corrupt gzip
                    raise TraceError(path, f"truncated or corrupt compressed data ({e})",
                                     "re-copy or re-export the file") from None
        yield from self._finish()

    # -- end -------------------------------------------------------------------------------------
    def _finish(self):
        b = self._b
        if not self._results:
            raise TraceError(self._path_for_errors(), "the ncu table has a header but no result rows",
                             "the profiled program may have launched no kernels (check ncu's filters)")
        for r in sorted(self._results.values(), key=lambda r: r.id):
            yield from self._emit_kernel(b, r)
        for pid, name in self._processes.items():
            b["processes"].add(pid=pid, name=name)
        for dev, info in sorted(self._devices.items()):
            b["devices"].add(device_id=dev, **info)
        yield from b.drain()
        self.source = {
            "format_version": self._layout,
            "tool_version": None,
            "host": ", ".join(h for h in self._hosts if h) or None,
            "clock_origin": "unknown",
            "clock_offset_ns": None,
            "metadata": {"layout": self._layout, "preamble": self._preamble,
                         **({"reader": self._report_reader} if getattr(self, "_report_reader", None) else {})},
        }

    def _path_for_errors(self):
        return getattr(self, "_path", "ncu input")

    def _emit_kernel(self, b, r: Result):
        ident = r.ident
        f = dict(r.labels)
        f.update(r.fields)
        if "l1_sectors_per_request" not in f and r.l1.get(L1_REQUESTS):
            if L1_SECTORS in r.l1:
                f["l1_sectors_per_request"] = r.l1[L1_SECTORS] / r.l1[L1_REQUESTS]
        # a number its column cannot hold (the rule of fit.fit) reads as NULL, and its cell's text
        # is kept as an ncu_metrics row (ncu's args), as the text of a cell that does not parse is
        gx, gy, gz = dim3(ident.get("Grid Size"))
        if not all(fits(v, _COLUMN["grid_x"]) for v in (gx, gy, gz)):
            gx = gy = gz = None
        bx, by, bz = dim3(ident.get("Block Size"))
        if not all(fits(v, _COLUMN["block_x"]) for v in (bx, by, bz)):
            bx = by = bz = None
        geo = {"grid_x": gx, "grid_y": gy, "grid_z": gz, "block_x": bx, "block_y": by, "block_z": bz}
        for k, v in geo.items():
            if v is None and k in f:
                geo[k] = int_or_none(f[k])
        cell_ints = {c: _cell_int(ident, c) for c in _IDENTITY_COLUMNS}
        pid = cell_ints["Process ID"]
        pname = ident.get("Process Name") or None
        device = cell_ints["Device"]
        if device is None and "device_id" in f:
            device = int_or_none(f["device_id"])
        ctx, stream = cell_ints["Context"], cell_ints["Stream"]
        if ctx is None and "context_id" in f:
            ctx = int_or_none(f["context_id"])
        if stream is None and "stream_id" in f:
            stream = int_or_none(f["stream_id"])
        name = ident.get("Kernel Name") or None
        # an identity cell that does not parse keeps its text (an ncu_metrics row), never dropped;
        # so does a CC its device does not carry (the devices row keeps the first one)
        for col, got in (*cell_ints.items(), ("Grid Size", gx), ("Block Size", bx)):
            raw = (ident.get(col) or "").strip()
            if raw and got is None:
                self._b["ncu_metrics"].add(id=r.id, section=None, name=col, unit=None, value=None,
                                           raw_value=ident[col], raw_unit=None)
        cc = (ident.get("CC") or "").strip()
        if cc and device is not None and (self._devices.get(device) or {}).get("compute_capability") not in (None, cc):
            self._b["ncu_metrics"].add(id=r.id, section=None, name="CC", unit=None, value=None,
                                       raw_value=ident["CC"], raw_unit=None)
        if pid is not None or pname:
            if self._processes.get(pid) is None:
                self._processes[pid] = pname
            elif pname and pname != self._processes[pid]:
                self.accounting.repair("processes.name: a process named otherwise by another result "
                                       "(the first name kept; each result's own in ncu_kernels.process_name)")
        if ident.get("Host Name"):
            self._hosts.setdefault(ident["Host Name"], None)
        if device is not None:
            self._note_device(device, ident.get("CC"), r.device_attrs)
        reg = f.get("registers_per_thread")
        dur = f.get("dur_ns")
        b["ncu_kernels"].add(
            id=r.id, pid=pid, process_name=pname, name=name, short_name=short_kernel_name(name),
            device_id=device, context_id=ctx, stream_id=stream, **geo,
            dur_ns=int_or_none(dur), sm_throughput_pct=f.get("sm_throughput_pct"),
            memory_throughput_pct=f.get("memory_throughput_pct"),
            dram_throughput_pct=f.get("dram_throughput_pct"),
            achieved_occupancy_pct=f.get("achieved_occupancy_pct"),
            theoretical_occupancy_pct=f.get("theoretical_occupancy_pct"),
            registers_per_thread=int_or_none(reg), l1_sectors_per_request=f.get("l1_sectors_per_request"),
            nvtx="; ".join(r.nvtx) or None, bottleneck_rule=r.bottleneck)
        if b["ncu_kernels"].full():
            yield from b.ready()

    def _note_device(self, device: int, cc: str | None, attrs: dict) -> None:
        d = self._devices.get(device)
        if d is None:
            d = self._devices[device] = {"vendor": "nvidia"}
        if cc and not d.get("compute_capability"):
            d["compute_capability"] = cc.strip()
        if not d.get("compute_capability"):
            ma = attrs.get("device__attribute_compute_capability_major")
            mi = attrs.get("device__attribute_compute_capability_minor")
            if isinstance(ma, float) and isinstance(mi, float):
                d["compute_capability"] = f"{int(ma)}.{int(mi)}"
        for col, (metric, factor) in DEVICE_METRICS.items():
            if d.get(col) is None and metric in attrs and attrs[metric] is not None:
                v = attrs[metric]
                d[col] = str(v) if factor is None else int_or_none(float(v) * factor) \
                    if isinstance(v, (int, float)) else None
        if d.get("sm_count") is None and isinstance(attrs.get(SM_COUNT_METRIC), (int, float)):
            d["sm_count"] = int_or_none(attrs[SM_COUNT_METRIC])  # Launch Statistics' "# SMs"
