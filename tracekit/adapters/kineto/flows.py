"""The flow rule: Kineto's flow events ('s' start, 't' step, 'f' end) -> `flows` rows.

A flow is keyed by (cat lower-cased, or 'flow'; id).  An 's' opens it (a second 's' closes the
open one as a row without an end); an 'f' or 't' links the open start to this point ('t' then
starts the next link from here); an 'f' before its 's' in file order waits for it (a later 's'
at or before its time links to it; another 'f' of the key closes the waiting one as a row
without a start).  At the end of the trace the open starts and waiting ends are rows with one
side.  The one definition, used by every reader; `_native.kineto_flows` is its C twin on the
scanner's columns (tests/adapters/test_kineto_scan.py compares them on every real trace).
"""

from __future__ import annotations

from .mapping import as_ints

NAMES = ("kind", "flow_id", "start_pid", "start_tid", "start_ns", "end_pid", "end_tid", "end_ns")


class Flows:
    """The flows state of one trace: the open starts ((kind, id) -> (pid, tid, ts)) and the
    ends that came before their start ((kind, id) -> (id, (pid, tid, ts)))."""

    def __init__(self):
        self.open: dict = {}
        self.early: dict = {}

    def rows(self, phs, cats, ids, pids, tids, tss) -> tuple:
        """The rows of flow events given column-wise in input order: phase, cat, id (as in the
        event), pid and tid (as `mapping._int` makes them), ts (ns); 8 lists (`NAMES`)."""
        open_flows = self.open
        pop = open_flows.pop
        lower: dict = {}
        for c in set(cats):
            lower[c] = (c or "").lower() or "flow"
        keys = list(zip([lower[c] for c in cats], ids))
        ends = list(zip(pids, tids, tss))
        restarted = []  # (key, start) of a start that never ended: a second 's' came
        linked = []     # (key, id, start or None, end)
        early = self.early
        for ph, key, fid, end in zip(phs, keys, ids, ends):
            if ph == "s":
                start = pop(key, None)
                if start is not None:
                    restarted.append((key, fid, start))
                elif key in early and early[key][1][2] >= end[2]:  # its end came first
                    efid, eend = early.pop(key)
                    linked.append((key, efid, end, eend))
                    continue
                open_flows[key] = end
                continue
            start = pop(key, None)
            if ph == "t" and start is not None:  # step: end this link, start the next from here
                open_flows[key] = end
            if ph == "f" and start is None:  # an end before its start (in file order): wait for it
                prev = early.pop(key, None)
                if prev is not None:
                    linked.append((key, prev[0], None, prev[1]))
                early[key] = (fid, end)
                continue
            linked.append((key, fid, start, end))
        rows = [(k[0], fid, st, None) for k, fid, st in restarted] + [
            (k[0], fid, st, en) for k, fid, st, en in linked]
        return _columns(rows)

    def leftover(self) -> tuple:
        """At the end of the trace: the starts that no end met, the ends that no start met."""
        rows = [(kind, fid, start, None) for (kind, fid), start in self.open.items()]
        rows += [(kind, fid, None, end) for (kind, _), (fid, end) in self.early.items()]
        return _columns(rows)


def _columns(rows: list) -> tuple:
    if not rows:
        return ([],) * 8
    none3 = (None, None, None)
    kind, fid, st, en = zip(*rows)
    sp, stid, sts = zip(*[x or none3 for x in st])
    ep, etid, ets = zip(*[x or none3 for x in en])
    return tuple(map(list, (kind, fid, sp, stid, sts, ep, etid, ets)))


def add(b, cols) -> None:
    """Add flow rows (8 lists, `NAMES`) to the builders ``b``."""
    if cols[0]:
        cols = dict(zip(NAMES, cols))
        cols["flow_id"] = as_ints(cols["flow_id"])[0]
        b["flows"].add_columns(len(cols["kind"]), cols)
