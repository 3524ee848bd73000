"""``.ncu-rep`` reports: read with NVIDIA's ``ncu_report`` module, else through ``ncu --import ...
--csv --page raw`` (a mixin of NcuAdapter)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from ..base import TraceError
from .csvpages import open_text
from .values import NONFINITE_SCALED, NONFINITE_SPEEDUP, Result, finite_value, normalize_unit


class ReportReader:
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
            from ... import install_hint

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
            with open_text(out_path) as (f, pos):
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
                r = self._results[rid] = Result(rid, rid)
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
                    value = finite_value(v, acc)
                    if value is not None:
                        value = finite_value(value * factor, acc, NONFINITE_SCALED)
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
                        speedup_pct=finite_value(speedup, acc, NONFINITE_SPEEDUP))
                    if rr.get("rule_identifier") == "SOLBottleneck" and r.bottleneck is None:
                        t, m_ = msg.get("title"), msg.get("message")
                        r.bottleneck = f"{t}: {m_}" if t and m_ else (m_ or t)
                rid += 1
                if progress:
                    progress(rid, total)
                yield from b.ready()


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
