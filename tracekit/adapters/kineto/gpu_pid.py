"""The pid of GPU rows (kernels, memops, syncs), which Kineto does not give: the pid of the API
call with the same correlation id, as the store's rule has it (`store.convert.finish_source`: the one pid
of the source's API calls with that correlation, none where they name several).  The reader fills
it while it reads, from the calls seen so far, so that the store need not UPDATE those rows
afterwards (an UPDATE rewrites the row groups it touches at COMMIT: ~5 % of a conversion); the store then
checks every GPU row's pid of a format whose GPU rows have none of their own
(`schema.pid_from_launch`) against all the source's calls and takes back the few that another call
contradicts, and fills the rows left without one (their call came later, or was forgotten: the
map keeps the last `LIMIT` correlation ids, so its memory does not grow with the trace: a
kernel comes next to its launch in torch.profiler's files)."""

from __future__ import annotations

from itertools import islice

import pyarrow as pa

#: correlation ids remembered at most (~70 bytes each); the oldest are forgotten beyond
LIMIT = 1 << 16
_SEVERAL = object()  # calls with this correlation name several pids


class LaunchPids:
    def __init__(self):
        self._pid: dict = {}

    def calls(self, batch: pa.RecordBatch) -> None:
        """Remember the pids of a batch of api_calls rows, by correlation id."""
        corr, pid = batch.column("correlation_id"), batch.column("pid")
        if corr.null_count == len(corr):
            return
        m = self._pid
        cs, ps = corr.to_pylist(), pid.to_pylist()
        if corr.null_count == 0 and pid.null_count == 0:  # as a rule: one call per correlation,
            new = dict(zip(cs, ps))                     # none seen before (dict operations in C)
            if len(new) == len(cs) and not (m.keys() & new.keys()):
                m.update(new)
                cs = ps = ()
        for c, p in zip(cs, ps):
            if c is None or p is None:
                continue
            was = m.get(c)
            if was is None:
                m[c] = p
            elif was is not _SEVERAL and was != p:
                m[c] = _SEVERAL
        if len(m) > LIMIT:
            for c in list(islice(m, len(m) - LIMIT // 2)):
                del m[c]

    def fill(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """A GPU batch with pid set where it is NULL and a remembered call has the correlation."""
        pid, corr = batch.column("pid"), batch.column("correlation_id")
        if pid.null_count == 0 or corr.null_count == len(corr) or not self._pid:
            return batch
        m = self._pid
        if pid.null_count == len(pid):  # as a rule (Kineto's GPU rows have no pid): look-ups in C
            new = list(map(m.get, corr.to_pylist()))
            if _SEVERAL in new:
                new = [None if q is _SEVERAL else q for q in new]
        else:
            new = [p if p is not None or c is None else (None if (q := m.get(c)) is _SEVERAL else q)
                   for p, c in zip(pid.to_pylist(), corr.to_pylist())]
        i = batch.schema.get_field_index("pid")
        return batch.set_column(i, batch.schema.field(i), pa.array(new, pid.type))

