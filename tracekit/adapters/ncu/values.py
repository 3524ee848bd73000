"""What ncu's text means: units scaled to base units, number cells, identity / metric columns and
the metrics that fill ``ncu_kernels`` and ``devices``, NVTX cells; and ``Result``, what is known
of one result while its rows stream by."""

from __future__ import annotations

import math
import re

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
LOCALE_NUMBER = re.compile(r"^[-+]?(?:\d+,\d{1,2}|\d+,\d{4,}|\d{1,3}(?:[ \u00a0\u202f]\d{3})+(?:,\d+)?)$")
_NA = {"n/a", "N/A", "na", "-"}
# what ncu (and the C library under it) writes for a metric it could not compute: nan, -nan,
# nan(ind), inf, -inf, infinity, and the MSVC spellings 1.#INF / -1.#IND / 1.#QNAN
_NONFINITE = re.compile(r"^[-+]?(?:nan(?:\([^)]*\))?|inf(?:inity)?|1\.#(?:inf|ind|qnan|snan)0*)$",
                        re.IGNORECASE)
#: the repair reason of a metric value that is not a finite number (its text stays in raw_value)
NONFINITE_METRIC = ("ncu_metrics.value: nan / inf (a metric ncu could not compute) read as NULL, "
                    "the text kept in raw_value")
NONFINITE_SPEEDUP = "ncu_rules.speedup_pct: nan / inf (an estimate ncu could not compute) read as NULL"
NONFINITE_SCALED = ("ncu_metrics.value: beyond a double once scaled to its base unit, read as NULL, "
                    "the text kept in raw_value")


def _number_text(text: str | None) -> str:
    """The number part of a cell: ``"281,845,760 (270,336; 270,336)"`` → ``"281,845,760"``."""
    if not text:
        return ""
    t = text.strip()
    cut = t.find(" (")
    return t[:cut] if cut > 0 else t


def is_nonfinite(text: str | None) -> bool:
    """Whether a cell is ncu's text for a value it could not compute (``nan``, ``-nan``,
    ``inf``, ...): read as NULL like ``n/a``, but counted as a repair."""
    t = _number_text(text)
    if not t:
        return False
    if _NONFINITE.match(t):
        return True
    if _C_NUMBER.match(t) and t not in (".", "-", "+"):  # '1e999'
        try:
            return not math.isfinite(float(t.replace(",", "")))
        except ValueError:
            return False
    return False


def metric_value(raw: str | None, factor: float, accounting) -> float | None:
    """A metric cell in its base unit (``parse_number`` times the unit's ``factor``), or None;
    a value that is not a finite number (``nan``, ``inf``, or beyond a double once scaled) is
    None and counted in ``accounting.repairs`` (a NaN stored as a DOUBLE would compare greater
    than every threshold in the views)."""
    v = parse_number(raw)
    if v is None:
        if is_nonfinite(raw):
            accounting.repair(NONFINITE_METRIC)
        return None
    v *= factor
    if not math.isfinite(v):
        accounting.repair(NONFINITE_SCALED)
        return None
    return v


def finite_value(v, accounting, reason: str = NONFINITE_METRIC) -> float | None:
    """A number ncu_report gave (int or float) as a finite float, or None (counted when it was
    nan / inf)."""
    if not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:  # an int beyond a double
        f = math.inf
    if math.isfinite(f):
        return f
    accounting.repair(reason)
    return None


def parse_number(text: str | None) -> float | None:
    """ncu's number text → a finite float; None for text, ``n/a``, ``nan`` / ``inf`` (see
    ``is_nonfinite``) or empty.  ``"1,073,741,824"`` → 1073741824.0; ``"281,845,760 (270,336;
    270,336)"`` → 281845760.0."""
    t = _number_text(text)
    if not t or t in _NA:
        return None
    if not _C_NUMBER.match(t) or t in (".", "-", "+"):
        return None
    try:
        v = float(t.replace(",", ""))
    except ValueError:
        return None
    return v if math.isfinite(v) else None  # '1e999'


def int_or_none(v) -> int | None:
    if v is None:
        return None
    try:
        return int(round(float(v)))
    except (TypeError, ValueError, OverflowError):
        return None


def int_cell(v) -> int | None:
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


def dim3(text: str | None) -> tuple[int | None, int | None, int | None]:
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
MAPPED_ID_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context",
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
L1_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
L1_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
_INT_FIELDS = {"dur_ns", "registers_per_thread", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
               "block_z", "device_id", "context_id", "stream_id"}
BY_ID = {mid: field for field, (ids, _) in KERNEL_METRICS.items() for mid in ids}
BY_LABEL = {lab: field for field, (_, labels) in KERNEL_METRICS.items() for lab in labels}
#: a display label only counts with the unit its field needs ("Memory Throughput" is also a byte/s)
LABEL_UNIT = {"dur_ns": "ns", "registers_per_thread": "register/thread"}
WANTED_IDS = set(BY_ID) | {L1_SECTORS, L1_REQUESTS}

#: devices column ← device attribute metric (factor to the schema's unit)
DEVICE_METRICS = {
    "name": ("device__attribute_display_name", None),
    "sm_count": ("device__attribute_multiprocessor_count", 1),
    "total_memory_bytes": ("device__attribute_total_memory", 1),
    "clock_rate_hz": ("device__attribute_clock_rate", 1000),  # kHz
    "max_threads_per_sm": ("device__attribute_max_threads_per_multiprocessor", 1),
    "warp_size": ("device__attribute_warp_size", 1),
}
#: the device's SM count as each launch reports it (Launch Statistics "# SMs", unit SM), where the
#: device attributes were not collected (a details page of sections only): sm_count's fallback
SM_COUNT_METRIC, SM_COUNT_LABEL = "launch__sm_count", "# SMs"
DEVICE_IDS = {m for m, _ in DEVICE_METRICS.values()} | {
    "device__attribute_compute_capability_major", "device__attribute_compute_capability_minor",
    SM_COUNT_METRIC}


def is_nvtx_column(name: str) -> bool:
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


class Result:
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
