"""Nsight Compute results (``ncu --csv`` output, ``.ncu-rep`` reports) → unified schema.

Inputs, all streamed row by row with the ``csv`` module (never column positions, always header
names):

* **details page** (``ncu --csv``, ``ncu -i X --csv --page details``): one row per result × metric,
  ragged (metric rows end one field after ``Metric Value``), full-width rule rows, optional
  ``Body Item Label``, NVTX columns, the 2020 layout with ``Kernel Time`` and no geometry columns.
* **raw page** (``--page raw``): one row per result, one column per metric id, a units row.
* anything before the header (application output, ``==PROF==``/``==WARNING==`` lines) is kept in
  ``sources.metadata.preamble``; rows after it that are not result rows are counted as skipped.
* ``.ncu-rep`` reports: read with NVIDIA's ``ncu_report`` module (PyPI ``ncu-report``, the
  ``ncu`` extra of the ``tracekit-gpu`` distribution); else ``ncu --import X --csv --page raw --print-units base`` when ``ncu``
  is on PATH; else a one-line error.

Numbers: thousands separators stripped, ``n/a`` → NULL, instance lists (``"1,024 (512; 512)"``) →
the part before `` (``; values are scaled to base units (ns, byte, byte/s, hz, %, ...) by
``normalize_unit``.  A file whose numbers are locale-formatted (``866,86``) is refused rather than
guessed.  Tables: ``ncu_kernels`` (one row per result), ``ncu_metrics`` (one per result × metric),
``ncu_rules`` (one per result × rule row), ``devices``, ``processes``.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..names import short_kernel_name
from .base import Adapter, Builders, TraceError
from .detect import GZIP_MAGIC, open_maybe_gzip

REPORT_MAGIC = b"NVR\x00"

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # kernel names reach thousands of characters

# -- units ---------------------------------------------------------------------------------------

_TIME_NS = {"ns": 1.0, "nsecond": 1.0, "nsec": 1.0, "us": 1e3, "usecond": 1e3, "usec": 1e3,
            "\u00b5s": 1e3, "ms": 1e6, "msecond": 1e6, "msec": 1e6, "s": 1e9, "second": 1e9,
            "sec": 1e9}
_PER_S = {k: 1e9 / v for k, v in _TIME_NS.items()}  # x/<time unit> → x/s
_PREFIX = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BASES = {"byte", "hz", "inst", "cycle", "warp", "thread", "block", "sector", "request", "register",
          "bit", "flop", "pass", "wavefront", "transaction", "msg", "packet", "op", "instruction",
          "sample", "event", "cta", "lane", "elem", "element", "lsu", "tex", "unit"}


def _prefixed(text: str) -> tuple[str, float] | None:
    """``Mbyte`` → (``byte``, 1e6); ``Ghz`` → (``hz``, 1e9); None when not a known base."""
    low = text.lower()
    if low in _BASES:
        return low, 1.0
    if len(text) > 1 and text[0] in _PREFIX and text[1:].lower() in _BASES:
        return text[1:].lower(), _PREFIX[text[0]]
    return None


_UNIT_CACHE: dict[str, tuple[str, float]] = {}


def normalize_unit(unit: str | None) -> tuple[str | None, float]:
    """(base unit, factor): ``value_in_base = value * factor``.  ``usecond`` → (``ns``, 1000),
    ``Gbyte/s`` → (``byte/s``, 1e9), ``cycle/nsecond`` → (``hz``, 1e9), ``Kbyte/block`` →
    (``byte/block``, 1000).  Unknown units come back unchanged with factor 1."""
    if unit is None:
        return None, 1.0
    hit = _UNIT_CACHE.get(unit)
    if hit is not None:
        return hit
    u = unit.strip()
    out: tuple[str, float]
    if u in ("", "%"):
        out = (u, 1.0)
    elif u in _TIME_NS:
        out = ("ns", _TIME_NS[u])
    elif "/" in u:
        num, den = u.split("/", 1)
        n = _prefixed(num) if num not in _TIME_NS else None
        if n is None:
            out = (u, 1.0)
        elif den in _PER_S:
            base, f = n
            out = ("hz", f * _PER_S[den]) if base == "cycle" else (f"{base}/s", f * _PER_S[den])
        else:
            d = _prefixed(den)
            if d is None:
                out = (f"{n[0]}/{den}", n[1])
            else:
                out = (f"{n[0]}/{d[0]}", n[1] / d[1])
    else:
        n = _prefixed(u)
        out = n if n is not None else (u, 1.0)
    _UNIT_CACHE[unit] = out
    return out


# -- numbers -------------------------------------------------------------------------------------

_C_NUMBER = re.compile(r"^[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d*)?(?:[eE][-+]?\d+)?$")
# evidence of a locale that writes ',' as the decimal mark or groups with spaces
_LOCALE_NUMBER = re.compile(r"^[-+]?(?:\d+,\d{1,2}|\d+,\d{4,}|\d{1,3}(?:[ \u00a0\u202f]\d{3})+(?:,\d+)?)$")
_NA = {"n/a", "N/A", "na", "-", "nan", "NaN"}


def parse_number(text: str | None) -> float | None:
    """ncu's number text → float; None for text, ``n/a`` or empty.  ``"1,073,741,824"`` →
    1073741824.0; ``"281,845,760 (270,336; 270,336)"`` → 281845760.0."""
    if not text:
        return None
    t = text.strip()
    cut = t.find(" (")
    if cut > 0:
        t = t[:cut]
    if not t or t in _NA:
        return None
    if not _C_NUMBER.match(t) or t in (".", "-", "+"):
        low = t.lower()
        if low in ("inf", "+inf", "-inf"):
            return float(low)
        return None
    try:
        return float(t.replace(",", ""))
    except ValueError:
        return None


def _int_or_none(v) -> int | None:
    if v is None:
        return None
    try:
        return int(round(float(v)))
    except (TypeError, ValueError, OverflowError):
        return None


def _int_cell(v) -> int | None:
    """An identity cell as an integer only when it is one ('7', '7.0'): '17333.549' is not a
    device, and rounding it would change the value silently (the text is kept instead)."""
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return int(f) if f.is_integer() and abs(f) < 2**63 else None


_DIM3 = re.compile(r"^\s*\(?\s*(\d[\d,]*)\s*,\s*(\d[\d,]*)\s*,\s*(\d[\d,]*)\s*\)?\s*$")


def _dim3(text: str | None) -> tuple[int | None, int | None, int | None]:
    if not text:
        return None, None, None
    m = _DIM3.match(text)
    if not m:
        return None, None, None
    return tuple(int(g.replace(",", "")) for g in m.groups())  # type: ignore[return-value]


# -- what the columns and metrics mean --------------------------------------------------------------

#: identity columns of the details and raw pages (everything else in a raw header is a metric)
ID_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context",
              "Stream", "Block Size", "Grid Size", "Device", "CC")
DETAIL_COLUMNS = ("Section Name", "Body Item Label", "Metric Name", "Metric Unit", "Metric Value",
                  "Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type",
                  "Estimated Speedup")
_MAPPED_ID_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context",
                      "Stream", "Block Size", "Grid Size", "Device", "CC"}

#: ncu_kernels column ← (metric ids, display labels on the details page with no body item)
KERNEL_METRICS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "dur_ns": (("gpu__time_duration.sum",), ("Duration",)),
    "sm_throughput_pct": (("sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm__sol_pct"),
                          ("Compute (SM) Throughput", "SM [%]")),
    "memory_throughput_pct": (("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                               "gpu__compute_memory_sol_pct"),
                              ("Memory Throughput", "Memory [%]")),
    "dram_throughput_pct": (("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                             "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
                            ("DRAM Throughput", "SOL FB")),
    "achieved_occupancy_pct": (("sm__warps_active.avg.pct_of_peak_sustained_active",),
                               ("Achieved Occupancy",)),
    "theoretical_occupancy_pct": (("sm__maximum_warps_per_active_cycle_pct",),
                                  ("Theoretical Occupancy",)),
    "registers_per_thread": (("launch__registers_per_thread",), ("Registers Per Thread",)),
    "l1_sectors_per_request": (("l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio",),
                               ()),
    "grid_x": (("launch__grid_dim_x",), ()), "grid_y": (("launch__grid_dim_y",), ()),
    "grid_z": (("launch__grid_dim_z",), ()), "block_x": (("launch__block_dim_x",), ()),
    "block_y": (("launch__block_dim_y",), ()), "block_z": (("launch__block_dim_z",), ()),
    "device_id": (("launch__device_id", "device__attribute_device_index"), ()),
    "context_id": (("launch__context_id",), ()),
    "stream_id": (("launch__stream_id",), ()),
}
_L1_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
_L1_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
_INT_FIELDS = {"dur_ns", "registers_per_thread", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
               "block_z", "device_id", "context_id", "stream_id"}
_BY_ID = {mid: field for field, (ids, _) in KERNEL_METRICS.items() for mid in ids}
_BY_LABEL = {lab: field for field, (_, labels) in KERNEL_METRICS.items() for lab in labels}
#: a display label only counts with the unit its field needs ("Memory Throughput" is also a byte/s)
_LABEL_UNIT = {"dur_ns": "ns", "registers_per_thread": "register/thread"}
_WANTED_IDS = set(_BY_ID) | {_L1_SECTORS, _L1_REQUESTS}

#: devices column ← device attribute metric (factor to the schema's unit)
DEVICE_METRICS = {
    "name": ("device__attribute_display_name", None),
    "sm_count": ("device__attribute_multiprocessor_count", 1),
    "total_memory_bytes": ("device__attribute_total_memory", 1),
    "clock_rate_hz": ("device__attribute_clock_rate", 1000),  # kHz
    "max_threads_per_sm": ("device__attribute_max_threads_per_multiprocessor", 1),
    "warp_size": ("device__attribute_warp_size", 1),
}
_DEVICE_IDS = {m for m, _ in DEVICE_METRICS.values()} | {
    "device__attribute_compute_capability_major", "device__attribute_compute_capability_minor"}


def _is_nvtx_column(name: str) -> bool:
    return "Domain:" in name or name.startswith(("thread Domain", "Id:Domain"))


_NVTX_SEGMENT = re.compile(r'"([^"]*)"')


def parse_nvtx(header: str, cell: str | None) -> str | None:
    """An NVTX cell → ``range/range`` (default domain) or ``domain@range/range``; the cell text
    itself when its layout is not understood; None when empty.

    Header ``thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg``, cell
    ``2362  "<default domain>:step:none:none:none:none:none:none" `` (thread id, then one quoted
    segment per open range, outermost first)."""
    if cell is None:
        return None
    text = cell.strip()
    if not text:
        return None
    fields = header.split(":")
    if not fields:
        return text
    lead = fields[0].split()  # 'thread Domain' → ['thread', 'Domain']
    nfields = len(fields)
    segs = _NVTX_SEGMENT.findall(text)
    if not segs:
        return None if text.split()[0:1] == [text] and text.isdigit() else text
    by_domain: dict[str, list[str]] = {}
    for seg in segs:
        parts = seg.split(":")
        if len(parts) < 2:
            return text
        if len(parts) > nfields:  # a ':' inside the range name: keep the middle together
            extra = len(parts) - nfields
            parts = [parts[0], ":".join(parts[1:2 + extra])] + parts[2 + extra:]
        if len(lead) == 1 and lead[0] == "Id" and len(parts) >= 3:  # Id:Domain:Start/Stop_Range
            domain, name = parts[1], parts[2]
        else:
            domain, name = parts[0], parts[1]
        by_domain.setdefault(domain, []).append(name)
    out = []
    for domain, names in by_domain.items():
        path = "/".join(names)
        out.append(path if domain in ("<default domain>", "", "default") else f"{domain}@{path}")
    return "; ".join(out)


# -- the adapter ---------------------------------------------------------------------------------

class _Result:
    """What is known of one result (launch) while its rows stream by."""

    __slots__ = ("id", "ident", "fields", "labels", "l1", "nvtx", "bottleneck", "device_attrs", "order")

    def __init__(self, rid: int, order: int):
        self.id = rid
        self.order = order
        self.ident: dict[str, str] = {}
        self.fields: dict[str, float] = {}  # from metric ids (win over labels)
        self.labels: dict[str, float] = {}  # from display labels
        self.l1: dict[str, float] = {}
        self.nvtx: list[str] = []
        self.bottleneck: str | None = None
        self.device_attrs: dict[str, object] = {}


class NcuAdapter(Adapter):
    FORMAT = "ncu"

    def read(self, path, source_id, progress=None):
        path = Path(path)
        with open(path, "rb") as f:
            magic = f.read(4)
        b = Builders(source_id, self.accounting)
        self._b = b
        self._path = path
        self._results: dict[int, _Result] = {}
        self._processes: dict[tuple, None] = {}
        self._devices: dict[int, dict] = {}
        self._hosts: dict[str, None] = {}
        if magic == REPORT_MAGIC or path.suffix.lower() == ".ncu-repz":
            yield from self._read_report(path, progress)
        elif path.suffix.lower() == ".ncu-rep":
            raise TraceError(path, "not an Nsight Compute report (the file does not start with the "
                             "report magic 'NVR')", "check that the file was copied completely")
        else:
            with _open_text(path) as (f, pos):
                try:
                    yield from self._read_csv(path, f, pos, os.path.getsize(path), progress)
                except (EOFError, OSError) as e:  # truncated / corrupt gzip
                    raise TraceError(path, f"truncated or corrupt compressed data ({e})",
                                     "re-copy or re-export the file") from None
        yield from self._finish()

    # -- CSV -------------------------------------------------------------------------------------
    def _read_csv(self, path: Path, f, pos, total: int, progress, layout_hint: str | None = None):
        preamble: list[str] = []
        header_line = None
        lineno = 0
        text_mode = delimiter = None
        for line in f:
            lineno += 1
            s = line.rstrip("\r\n")
            if s.startswith('"ID",') or s.startswith("ID,"):
                header_line = s
                break
            if s.startswith(('"Process ID",', '"Domain",')):
                raise TraceError(path, f"line {lineno} starts an ncu --print-summary table (aggregates "
                                 "over launches, no result IDs)", "export per-launch results with "
                                 "`ncu --import X.ncu-rep --csv --page raw --print-units base`")
            if s.startswith('"Kernel Name",'):
                raise TraceError(path, f"line {lineno} starts an ncu --page source table (per "
                                 "instruction, not per launch)", "export `--page raw` or `--page details`")
            if delimiter is None:
                m = re.match(r'^"?ID"?([;\t|])"?Process ID', s)
                if m:
                    delimiter = m.group(1)
            if text_mode is None and (s.lstrip().startswith("Section: ") or
                                      re.match(r"^\s+Metric Name\s+Metric Unit\s+Metric Value", s)):
                text_mode = lineno
            if len(preamble) < 200:
                preamble.append(s[:1000])
        if header_line is None:
            if delimiter is not None:
                raise TraceError(path, f"the ncu table uses {delimiter!r} as field delimiter, not ','",
                                 "re-export with `ncu --csv` (comma-separated) or replace the delimiter")
            if text_mode is not None:
                raise TraceError(path, f"ncu text-mode output (line {text_mode}), not CSV",
                                 "re-run with `ncu --csv ...` or export `ncu --import X.ncu-rep --csv "
                                 "--page raw --print-units base`")
            if any(p.startswith("==PROF==") for p in preamble):
                raise TraceError(path, "ncu console output without a result table (only ==PROF== "
                                 "messages and program output)", "the CSV goes to stdout or --log-file; "
                                 "pass that file, or export it from the .ncu-rep report")
            raise TraceError(path, 'no ncu CSV header (a line starting "ID","Process ID",...)',
                             "pass `ncu --csv` output or a .ncu-rep report")
        try:
            header = next(csv.reader([header_line]))
        except csv.Error as e:
            raise TraceError(path, f"unreadable ncu CSV header at line {lineno} ({e})") from None
        col = {name: i for i, name in reversed(list(enumerate(header)))}  # first of duplicates
        detail = "Metric Name" in col or "Metric Value" in col
        if detail:
            missing = [c for c in ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")
                       if c not in col]
            if missing:
                raise TraceError(path, f"ncu details CSV without column(s) {', '.join(missing)}",
                                 "re-export with `ncu --import X.ncu-rep --csv --page details`")
            layout = "details"
            if "Kernel Time" in col:
                layout = "details-2020"
            if "Body Item Label" in col:
                layout = "details-body"
        else:
            missing = [c for c in ("ID", "Kernel Name") if c not in col]
            if missing:
                raise TraceError(path, f"ncu CSV without column(s) {', '.join(missing)}",
                                 "pass `ncu --csv` details or raw output")
            if not any(h not in ID_COLUMNS and not _is_nvtx_column(h) for h in header):
                raise TraceError(path, "ncu CSV without metric columns (neither Metric Name/Value "
                                 "nor per-metric columns)", "export `--page raw` or `--page details`")
            layout = "raw"
        self._layout = layout_hint or layout
        self._preamble = preamble
        ends_with_newline = _ends_with_newline(path) if layout_hint is None else True
        reader = csv.reader(f, strict=True)
        rows = self._detail_rows if detail else self._raw_rows
        try:
            yield from rows(path, header, col, reader, lineno, pos, total, progress, ends_with_newline)
        except csv.Error as e:
            if "end of data" in str(e) or "EOF" in str(e):
                raise TraceError(path, f"the CSV is truncated (the file ends inside a quoted field, "
                                 f"after line {reader.line_num + lineno})",
                                 "the capture did not finish writing; re-export it") from None
            raise TraceError(path, f"malformed CSV at line {reader.line_num + lineno} ({e})",
                             "pass unmodified `ncu --csv` output") from None

    def _check_row(self, path, header, row, ragged_min, lineno, is_last, ends_nl) -> bool:
        """True for a row to convert; counts foreign rows as skipped; raises on truncation."""
        acc = self.accounting
        if not row or (len(row) == 1 and not row[0].strip()):
            return False  # blank line
        first = row[0]
        if row == header:
            raise TraceError(path, f"a second ncu table header at line {lineno} (several captures "
                             "in one file)", "split the file into one CSV per capture")
        if not first.isdigit():
            if first.startswith("=="):
                acc.skip("ncu message line (==PROF==/==WARNING==/==ERROR==) inside the table",
                         ",".join(row))
            else:
                acc.skip("row that is not a result row (first field is not a result ID: program "
                         "output or another table)", ",".join(row))
            return False
        if len(row) < ragged_min or len(row) > len(header) + 1:
            if is_last and not ends_nl and len(row) < ragged_min:
                raise TraceError(path, f"the CSV is truncated (the last row, line {lineno}, has "
                                 f"{len(row)} of {len(header)} fields)",
                                 "the capture did not finish writing; re-export it")
            acc.skip(f"row whose width is neither the header's ({len(header)}) nor a metric row's "
                     "(another table inside the output)", ",".join(row))
            return False
        return True

    def _repeated(self, key, row) -> bool:
        """A row the file already gave (a raw-page result ID met again; a details-page (ID,
        section, body item, metric or rule) met again: two captures' tables pasted into one
        file, or a copied row): counted as skipped, never merged into the first one."""
        seen = self.__dict__.setdefault("_seen_keys", set())
        if key in seen:
            self.accounting.skip("row that repeats one the file already gave (same result ID and "
                                 "metric: two ncu tables in one file?): not merged", ",".join(row))
            return True
        seen.add(key)
        return False

    def _result(self, row, col, header) -> _Result:
        rid = int(row[0])
        r = self._results.get(rid)
        if r is None:
            r = self._results[rid] = _Result(rid, len(self._results))
            ident = r.ident
            for name in ID_COLUMNS:
                i = col.get(name)
                if i is not None and i < len(row):
                    ident[name] = row[i]
            for i, h in enumerate(header):
                if _is_nvtx_column(h) and i < len(row):
                    v = parse_nvtx(h, row[i])
                    if v:
                        r.nvtx.append(v)
            # identity columns with no ncu_kernels column (Kernel Time; on the details page also
            # unknown ones): one ncu_metrics row each, so nothing is lost
            for i, h in enumerate(header):
                if (h not in _MAPPED_ID_COLUMNS and h not in DETAIL_COLUMNS and not _is_nvtx_column(h)
                        and (self._layout != "raw" or h in ID_COLUMNS) and i < len(row) and row[i]):
                    self._b["ncu_metrics"].add(id=rid, section=None, name=h, unit=None, value=None,
                                               raw_value=row[i], raw_unit=None)
        return r

    def _detail_rows(self, path, header, col, reader, line0, pos, total, progress, ends_nl):
        b = self._b
        acc = self.accounting
        i_sec, i_body = col.get("Section Name"), col.get("Body Item Label")
        i_name, i_unit, i_val = col["Metric Name"], col["Metric Unit"], col["Metric Value"]
        i_rule, i_rtype, i_rdesc = col.get("Rule Name"), col.get("Rule Type"), col.get("Rule Description")
        i_sut, i_su = col.get("Estimated Speedup Type"), col.get("Estimated Speedup")
        width = len(header)
        ragged_min = i_val + 1
        metrics = b["ncu_metrics"]
        it = iter(reader)
        row = next(it, None)
        n = 0
        while row is not None:
            lineno = line0 + reader.line_num
            nxt = next(it, None)
            if not self._check_row(path, header, row, ragged_min, lineno, nxt is None, ends_nl):
                row = nxt
                continue
            if len(row) < width:
                row = row + [""] * (width - len(row))
            if self._repeated((row[0], row[i_sec] if i_sec is not None else None,
                               row[i_body] if i_body is not None else None, row[i_name],
                               row[i_rule] if i_rule is not None else None,
                               row[i_rdesc] if i_rdesc is not None else None), row):
                row = nxt
                continue
            r = self._result(row, col, header)
            name = row[i_name]
            rule = row[i_rule] if i_rule is not None else ""
            section = row[i_sec] if i_sec is not None else None
            if name:
                body = (row[i_body] or None) if i_body is not None else None
                raw_unit, raw_value = row[i_unit], row[i_val]
                unit, factor = normalize_unit(raw_unit)
                value = parse_number(raw_value)
                if value is None and raw_value and raw_unit and _LOCALE_NUMBER.match(raw_value.strip()):
                    raise TraceError(path, f"numbers are locale-formatted ({raw_value!r} at line {lineno})",
                                     "re-export with LC_ALL=C so that '.' is the decimal mark")
                if value is not None:
                    value *= factor
                metrics.add(id=r.id, section=section, body_item=body, name=name, unit=unit,
                            value=value, raw_value=raw_value, raw_unit=raw_unit)
                self._note_metric(r, name, value, raw_value, label=body is None and "__" not in name,
                                  unit=unit)
            elif rule:
                speedup = parse_number(row[i_su]) if i_su is not None else None
                desc = row[i_rdesc] if i_rdesc is not None else None
                b["ncu_rules"].add(id=r.id, section=section, rule=rule,
                                   type=(row[i_rtype] or None) if i_rtype is not None else None,
                                   title=None, description=desc,
                                   speedup_type=(row[i_sut] or None) if i_sut is not None else None,
                                   speedup_pct=speedup)
                if rule == "SOLBottleneck" and r.bottleneck is None:
                    r.bottleneck = desc
            else:
                acc.skip("result row with neither a metric name nor a rule name", ",".join(row))
            n += 1
            if n % 4096 == 0:
                if progress:
                    progress(pos(), total)
                yield from b.ready()
            row = nxt

    def _raw_rows(self, path, header, col, reader, line0, pos, total, progress, ends_nl):
        b = self._b
        metric_cols = [(i, h) for i, h in enumerate(header)
                       if h not in ID_COLUMNS and not _is_nvtx_column(h)]
        units: list[str] | None = None
        it = iter(reader)
        row = next(it, None)
        if row is not None and row and row[0] == "" and not any(
                row[i] for i in (col["ID"], col["Kernel Name"]) if i < len(row)):
            units = row + [""] * (len(header) - len(row))
            row = next(it, None)
        metrics = b["ncu_metrics"]
        n = 0
        width = len(header)
        while row is not None:
            lineno = line0 + reader.line_num
            nxt = next(it, None)
            if not self._check_row(path, header, row, width, lineno, nxt is None, ends_nl):
                row = nxt
                continue
            if len(row) > width and any(row[width:]):  # values beyond the header: misaligned
                self.accounting.skip(f"row with values beyond the header's {width} columns (the "
                                     "columns do not line up with the header)", ",".join(row))
                row = nxt
                continue
            if self._repeated(int(row[0]), row):
                row = nxt
                continue
            r = self._result(row, col, header)
            for i, name in metric_cols:
                raw_value = row[i] if i < len(row) else ""
                if raw_value == "":
                    continue  # not collected for this result
                raw_unit = units[i] if units is not None else None
                unit, factor = normalize_unit(raw_unit)
                value = parse_number(raw_value)
                if value is None and raw_unit and _LOCALE_NUMBER.match(raw_value.strip()):
                    raise TraceError(path, f"numbers are locale-formatted ({raw_value!r} at line {lineno})",
                                     "re-export with LC_ALL=C so that '.' is the decimal mark")
                if value is not None:
                    value *= factor
                metrics.add(id=r.id, section=None, body_item=None, name=name, unit=unit, value=value,
                            raw_value=raw_value, raw_unit=raw_unit)
                self._note_metric(r, name, value, raw_value, label=False)
            n += 1
            if progress:
                progress(pos(), total)
            yield from b.ready()
            row = nxt

    def _note_metric(self, r: _Result, name: str, value, raw_value, label: bool, unit=None) -> None:
        if label:
            field = _BY_LABEL.get(name)
            if (field is not None and field not in r.labels and value is not None
                    and unit == _LABEL_UNIT.get(field, "%")):
                r.labels[field] = value
            return
        if name in _WANTED_IDS:
            field = _BY_ID.get(name)
            if field is not None:
                if value is not None and field not in r.fields:
                    r.fields[field] = value
            else:
                if value is not None:
                    r.l1[name] = value
        elif name in _DEVICE_IDS:
            r.device_attrs[name] = value if value is not None else raw_value

    # -- .ncu-rep ----------------------------------------------------------------------------------
    def _read_report(self, path: Path, progress):
        try:
            import ncu_report  # type: ignore[import-not-found]
        except ImportError:
            ncu_report = None
        if ncu_report is not None:
            yield from self._read_report_api(path, ncu_report, progress)
            return
        ncu = shutil.which("ncu")
        if ncu is None:
            from .. import install_hint

            raise TraceError(path, "reading a .ncu-rep report needs NVIDIA's ncu-report package or "
                             "the ncu command, and neither is available",
                             f"{install_hint('ncu')}, or export a CSV where ncu is installed: "
                             "ncu --import X.ncu-rep --csv --page raw --print-units base > X.csv")
        with tempfile.TemporaryDirectory(prefix="tracekit-ncu-") as tmp:
            out_path = Path(tmp) / "raw.csv"
            try:
                with open(out_path, "wb") as out:
                    proc = subprocess.run([ncu, "--import", str(path), "--csv", "--page", "raw",
                                           "--print-units", "base"], stdout=out, stderr=subprocess.PIPE,
                                          stdin=subprocess.DEVNULL)
            except OSError as e:
                raise TraceError(path, f"cannot run {ncu} ({e.strerror or e})") from None
            if proc.returncode != 0:
                err = " ".join(proc.stderr.decode("utf-8", "replace").split())[:200]
                raise TraceError(path, f"`ncu --import` failed: {err or f'exit status {proc.returncode}'}",
                                 "check that the report is complete and that ncu is as new as the report")
            self._report_reader = f"ncu --import ({ncu})"
            with _open_text(out_path) as (f, pos):
                yield from self._read_csv(path, f, pos, out_path.stat().st_size, progress, layout_hint="raw")

    def _read_report_api(self, path: Path, ncu_report, progress):
        acc = self.accounting
        self._layout = "ncu-rep"
        self._preamble = []
        self._report_reader = f"ncu_report {getattr(ncu_report, '__version__', '')}".strip()
        try:
            ctx = ncu_report.load_report(str(path))
            nranges = ctx.num_ranges()
        except Exception as e:  # the SWIG layer raises plain RuntimeErrors
            raise TraceError(path, f"ncu_report cannot read the report ({str(e).splitlines()[0] if str(e) else type(e).__name__})",
                             "check that the file is complete; a newer ncu-report may be needed") from None
        try:
            self._report_reader = f"ncu_report {ctx.get_version()}"
        except Exception:
            pass
        if not nranges:
            raise TraceError(path, "ncu_report found no results in the report (unreadable or empty)",
                             "check that the file is complete; a newer ncu-report may be needed")
        b = self._b
        metrics = b["ncu_metrics"]
        speedup_types = {getattr(ncu_report, "SpeedupType_LOCAL", 1): "local",
                         getattr(ncu_report, "SpeedupType_GLOBAL", 2): "global",
                         getattr(ncu_report, "SpeedupType_UNKNOWN", 0): None}
        rule_types = {getattr(ncu_report, f"MsgType_{k}", v): t for k, (v, t) in {
            "OK": (1, "INF"), "OPTIMIZATION": (2, "OPT"), "WARNING": (3, "WRN"), "ERR": (4, "ERR")}.items()}
        rid = 0
        total = sum(ctx.range_by_idx(i).num_actions() for i in range(nranges))
        for ri in range(nranges):
            rng = ctx.range_by_idx(ri)
            for ai in range(rng.num_actions()):
                act = rng.action_by_idx(ai)
                r = self._results[rid] = _Result(rid, rid)
                try:
                    r.ident["Kernel Name"] = act.name(act.NameBase_DEMANGLED)
                except Exception:
                    r.ident["Kernel Name"] = act.name()
                section_of: dict[str, str] = {}
                try:
                    for sec in act.sections():
                        for m in tuple(sec.header_metrics()) + tuple(sec.body_metrics()):
                            section_of.setdefault(m.name(), sec.name())
                except Exception:
                    pass
                for name in act.metric_names():
                    m = act.metric_by_name(name)
                    if m is None:
                        acc.skip("metric listed by the report but not readable", name)
                        continue
                    raw_unit = m.unit()
                    unit, factor = normalize_unit(raw_unit)
                    v = m.value()
                    if isinstance(v, bool):
                        v = int(v)
                    value = float(v) * factor if isinstance(v, (int, float)) else None
                    raw_value = None if v is None else (repr(v) if isinstance(v, float) else str(v))
                    metrics.add(id=rid, section=section_of.get(name), body_item=None, name=name,
                                unit=unit, value=value, raw_value=raw_value, raw_unit=raw_unit)
                    self._note_metric(r, name, value, raw_value, label=False)
                nvtx = _report_nvtx(act)
                if nvtx:
                    r.nvtx.append(nvtx)
                for rr in act.rule_results_as_dicts():
                    msg = rr.get("rule_message") or {}
                    sp = rr.get("speedup_estimation") or {}
                    speedup = sp.get("speedup") if isinstance(sp, dict) else None
                    stype = sp.get("type") if isinstance(sp, dict) else None
                    stype = speedup_types.get(stype, stype) if not isinstance(stype, str) else stype.lower()
                    b["ncu_rules"].add(
                        id=rid, section=rr.get("section_identifier"), rule=rr.get("rule_identifier"),
                        type=rule_types.get(msg.get("type")), title=msg.get("title"),
                        description=msg.get("message"), speedup_type=stype,
                        speedup_pct=float(speedup) if isinstance(speedup, (int, float)) else None)
                    if rr.get("rule_identifier") == "SOLBottleneck" and r.bottleneck is None:
                        t, m_ = msg.get("title"), msg.get("message")
                        r.bottleneck = f"{t}: {m_}" if t and m_ else (m_ or t)
                rid += 1
                if progress:
                    progress(rid, total)
                yield from b.ready()

    # -- end -------------------------------------------------------------------------------------
    def _finish(self):
        b = self._b
        if not self._results:
            raise TraceError(self._path_for_errors(), "the ncu table has a header but no result rows",
                             "the profiled program may have launched no kernels (check ncu's filters)")
        for r in sorted(self._results.values(), key=lambda r: r.id):
            yield from self._emit_kernel(b, r)
        for (pid, name) in self._processes:
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

    def _emit_kernel(self, b, r: _Result):
        ident = r.ident
        f = dict(r.labels)
        f.update(r.fields)
        if "l1_sectors_per_request" not in f and r.l1.get(_L1_REQUESTS):
            if _L1_SECTORS in r.l1:
                f["l1_sectors_per_request"] = r.l1[_L1_SECTORS] / r.l1[_L1_REQUESTS]
        gx, gy, gz = _dim3(ident.get("Grid Size"))
        bx, by, bz = _dim3(ident.get("Block Size"))
        geo = {"grid_x": gx, "grid_y": gy, "grid_z": gz, "block_x": bx, "block_y": by, "block_z": bz}
        for k, v in geo.items():
            if v is None and k in f:
                geo[k] = _int_or_none(f[k])
        pid = _int_cell(ident.get("Process ID")) if ident.get("Process ID", "").strip() else None
        pname = ident.get("Process Name") or None
        device = _int_cell(ident.get("Device")) if ident.get("Device", "").strip() else None
        if device is None and "device_id" in f:
            device = _int_or_none(f["device_id"])
        ctx = _int_cell(ident.get("Context")) if ident.get("Context", "").strip() else None
        stream = _int_cell(ident.get("Stream")) if ident.get("Stream", "").strip() else None
        if ctx is None and "context_id" in f:
            ctx = _int_or_none(f["context_id"])
        if stream is None and "stream_id" in f:
            stream = _int_or_none(f["stream_id"])
        name = ident.get("Kernel Name") or None
        # an identity cell that does not parse keeps its text (an ncu_metrics row), never dropped;
        # so does a CC its device does not carry (the devices row keeps the first one)
        cell_ints = {c: _int_cell(ident.get(c)) if (ident.get(c) or "").strip() else None
                     for c in ("Process ID", "Device", "Context", "Stream")}
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
            self._processes.setdefault((pid, pname), None)
        if ident.get("Host Name"):
            self._hosts.setdefault(ident["Host Name"], None)
        if device is not None:
            self._note_device(device, ident.get("CC"), r.device_attrs)
        reg = f.get("registers_per_thread")
        dur = f.get("dur_ns")
        b["ncu_kernels"].add(
            id=r.id, pid=pid, process_name=pname, name=name, short_name=short_kernel_name(name),
            device_id=device, context_id=ctx, stream_id=stream, **geo,
            dur_ns=_int_or_none(dur), sm_throughput_pct=f.get("sm_throughput_pct"),
            memory_throughput_pct=f.get("memory_throughput_pct"),
            dram_throughput_pct=f.get("dram_throughput_pct"),
            achieved_occupancy_pct=f.get("achieved_occupancy_pct"),
            theoretical_occupancy_pct=f.get("theoretical_occupancy_pct"),
            registers_per_thread=_int_or_none(reg), l1_sectors_per_request=f.get("l1_sectors_per_request"),
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
                d[col] = str(v) if factor is None else _int_or_none(float(v) * factor) \
                    if isinstance(v, (int, float)) else None


def _report_nvtx(act) -> str | None:
    try:
        state = act.nvtx_state()
    except Exception:
        return None
    if state is None:
        return None
    out = []
    try:
        for did in state.domains():
            dom = state.domain_by_id(did)
            names = []
            for i in range(len(dom.push_pop_ranges())):  # outermost first (call-stack order)
                rng = dom.push_pop_range(i)
                if rng is not None:
                    names.append(rng.name())
            names += [str(n) for n in dom.start_end_ranges()]
            dname = dom.name()
            path = "/".join(names)
            if path:
                out.append(path if dname in ("", "<default domain>", "default") else f"{dname}@{path}")
    except Exception:  # an NVTX state the installed ncu_report cannot walk: leave it out
        return None
    return "; ".join(out) or None


class _open_text:
    """Context manager: (text file with newline='', position function in bytes)."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        raw = open_maybe_gzip(self.path)
        self.raw = raw
        under = getattr(raw, "fileobj", None) or raw
        # a byte-order mark says the encoding (UTF-16 from Windows redirection; UTF-8 from editors)
        bom = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
        encoding = "utf-16" if bom in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig"
        self.text = io.TextIOWrapper(raw, encoding=encoding, errors="replace", newline="")
        return self.text, under.tell

    def __exit__(self, *exc):
        self.text.close()


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        magic = f.read(2)
        if magic == GZIP_MAGIC:
            return True  # cannot tell cheaply; gzip has its own end-of-stream check
        f.seek(0, os.SEEK_END)
        if f.tell() == 0:
            return False
        if magic in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16: the last code unit
            f.seek(-2, os.SEEK_END)
            last = f.read(2)
            return (last[0:1] if magic == b"\xff\xfe" else last[1:2]) in (b"\n", b"\r")
        f.seek(-1, os.SEEK_END)
        return f.read(1) in (b"\n", b"\r")
