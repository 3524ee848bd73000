"""The CSV pages of ``ncu --csv`` (details, details-2020, details with body items, raw): the header
found after any preamble, rows streamed with the ``csv`` module, foreign / repeated / truncated
rows counted or refused (a mixin of NcuAdapter)."""

from __future__ import annotations

import csv
import io
import os
import re
import sys
from pathlib import Path

from ..base import TraceError
from ..detect import GZIP_MAGIC, open_maybe_gzip
from .values import (
    BY_ID,
    BY_LABEL,
    DEVICE_IDS,
    LABEL_UNIT,
    LOCALE_NUMBER,
    MAPPED_ID_COLUMNS,
    WANTED_IDS,
    DETAIL_COLUMNS,
    ID_COLUMNS,
    NONFINITE_SPEEDUP,
    SM_COUNT_LABEL,
    SM_COUNT_METRIC,
    is_nvtx_column,
    Result,
    is_nonfinite,
    metric_value,
    normalize_unit,
    parse_number,
    parse_nvtx,
)

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # kernel names reach thousands of characters


class CsvPages:
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
            if not any(h not in ID_COLUMNS and not is_nvtx_column(h) for h in header):
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

    def _checked_rows(self, path, header, reader, it, row, ragged_min, line0, ends_nl):
        """`row`, then the rows of the iterator `it` over `reader`, that `_check_row` accepts, each
        with its line number (the row after each is read first: the last row is checked as such)."""
        while row is not None:
            lineno = line0 + reader.line_num
            nxt = next(it, None)
            if self._check_row(path, header, row, ragged_min, lineno, nxt is None, ends_nl):
                yield row, lineno
            row = nxt

    def _metric(self, path, lineno, raw_value: str, raw_unit: str | None) -> tuple[str | None, float | None]:
        """(unit, value) of a metric cell, normalized to base units; a locale-formatted number
        (``1,5``) is refused: the whole file would be misread."""
        unit, factor = normalize_unit(raw_unit)
        value = metric_value(raw_value, factor, self.accounting)
        if value is None and raw_value and raw_unit and LOCALE_NUMBER.match(raw_value.strip()):
            raise TraceError(path, f"numbers are locale-formatted ({raw_value!r} at line {lineno})",
                             "re-export with LC_ALL=C so that '.' is the decimal mark")
        return unit, value

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

    def _result(self, row, col, header) -> Result:
        rid = int(row[0])
        r = self._results.get(rid)
        if r is None:
            r = self._results[rid] = Result(rid, len(self._results))
            ident = r.ident
            for name in ID_COLUMNS:
                i = col.get(name)
                if i is not None and i < len(row):
                    ident[name] = row[i]
            for i, h in enumerate(header):
                if is_nvtx_column(h) and i < len(row):
                    v = parse_nvtx(h, row[i])
                    if v:
                        r.nvtx.append(v)
            # identity columns with no ncu_kernels column (Kernel Time; on the details page also
            # unknown ones): one ncu_metrics row each, so nothing is lost
            for i, h in enumerate(header):
                if (h not in MAPPED_ID_COLUMNS and h not in DETAIL_COLUMNS and not is_nvtx_column(h)
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
        n = 0
        for row, lineno in self._checked_rows(path, header, reader, it, next(it, None), ragged_min, line0,
                                              ends_nl):
            if len(row) < width:
                row = row + [""] * (width - len(row))
            if self._repeated((row[0], row[i_sec] if i_sec is not None else None,
                               row[i_body] if i_body is not None else None, row[i_name],
                               row[i_rule] if i_rule is not None else None,
                               row[i_rdesc] if i_rdesc is not None else None), row):
                continue
            r = self._result(row, col, header)
            name = row[i_name]
            rule = row[i_rule] if i_rule is not None else ""
            section = row[i_sec] if i_sec is not None else None
            if name:
                body = (row[i_body] or None) if i_body is not None else None
                raw_unit, raw_value = row[i_unit], row[i_val]
                unit, value = self._metric(path, lineno, raw_value, raw_unit)
                metrics.add(id=r.id, section=section, body_item=body, name=name, unit=unit,
                            value=value, raw_value=raw_value, raw_unit=raw_unit)
                self._note_metric(r, name, value, raw_value, label=body is None and "__" not in name,
                                  unit=unit)
            elif rule:
                speedup = parse_number(row[i_su]) if i_su is not None else None
                if speedup is None and i_su is not None and is_nonfinite(row[i_su]):
                    acc.repair(NONFINITE_SPEEDUP)
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

    def _raw_rows(self, path, header, col, reader, line0, pos, total, progress, ends_nl):
        b = self._b
        metric_cols = [(i, h) for i, h in enumerate(header)
                       if h not in ID_COLUMNS and not is_nvtx_column(h)]
        units: list[str] | None = None
        it = iter(reader)
        first = next(it, None)
        if first is not None and first and first[0] == "" and not any(
                first[i] for i in (col["ID"], col["Kernel Name"]) if i < len(first)):
            units = first + [""] * (len(header) - len(first))
            first = next(it, None)
        metrics = b["ncu_metrics"]
        n = 0
        width = len(header)
        for row, lineno in self._checked_rows(path, header, reader, it, first, width, line0, ends_nl):
            if len(row) > width and any(row[width:]):  # values beyond the header: misaligned
                self.accounting.skip(f"row with values beyond the header's {width} columns (the "
                                     "columns do not line up with the header)", ",".join(row))
                continue
            if self._repeated(int(row[0]), row):
                continue
            r = self._result(row, col, header)
            for i, name in metric_cols:
                raw_value = row[i] if i < len(row) else ""
                if raw_value == "":
                    continue  # not collected for this result
                raw_unit = units[i] if units is not None else None
                unit, value = self._metric(path, lineno, raw_value, raw_unit)
                metrics.add(id=r.id, section=None, body_item=None, name=name, unit=unit, value=value,
                            raw_value=raw_value, raw_unit=raw_unit)
                self._note_metric(r, name, value, raw_value, label=False)
            n += 1
            if progress:
                progress(pos(), total)
            yield from b.ready()

    def _note_metric(self, r: Result, name: str, value, raw_value, label: bool, unit=None) -> None:
        if label:
            if name == SM_COUNT_LABEL and value is not None:
                r.device_attrs.setdefault(SM_COUNT_METRIC, value)
            field = BY_LABEL.get(name)
            if (field is not None and field not in r.labels and value is not None
                    and unit == LABEL_UNIT.get(field, "%")):
                r.labels[field] = value
            return
        if name in WANTED_IDS:
            field = BY_ID.get(name)
            if field is not None:
                if value is not None and field not in r.fields:
                    r.fields[field] = value
            else:
                if value is not None:
                    r.l1[name] = value
        elif name in DEVICE_IDS:
            r.device_attrs[name] = value if value is not None else raw_value


class open_text:
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
