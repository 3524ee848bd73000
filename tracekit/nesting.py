"""events.depth / parent_id: the nesting of the ranges of each track, derived after a source's rows
are in the store (where the adapter left them NULL), by the compiled module where it is built
(`nest` in tracekit/_native.c) or by SQL; `_nest_track` is the event-by-event rule both equal
(tests/sql/test_nesting.py).  A reader may nest its events itself (`StreamNesting`); what it
leaves is told by the rows alone (depth NULL): the store holds back those that come after nested
ones (`LateRows`) and completes the nesting once the rows are in (`nest_source`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from . import budget
from .native import native

if TYPE_CHECKING:  # (no DuckDB at run time: the Kineto reader uses StreamNesting)
    import duckdb

# events.depth / parent_id by the compiled module where it is built (`derive_nesting`); False:
# always the SQL (tests compare the two). docs/scaling.md, "Tuning constants".
NATIVE_NESTING = True
# The Kineto reader nests the events itself while it reads, chunk by chunk (`StreamNesting`), so
# that no UPDATE of the stored events is needed; False: the store derives them after the rows
# are in (tests compare the two).
STREAM_NESTING = True
# At most this many events are nested in memory at a time and written back per UPDATE (one UPDATE
# of a big source spills under the cap); the memory budget may make it fewer (budget.plan's
# nest_rows: 262,144 at 400 MB).  A source with more events is nested a piece at a time.
NEST_UPDATE_ROWS = 1 << 22
# The store holds back the events rows that a reader left unnested among nested ones (`LateRows`)
# up to this many Arrow bytes, so that it inserts them nested instead of UPDATEing them
# (0: none held; beyond: all inserted unnested).  docs/scaling.md, "Tuning constants".
HOLD_LATE_BYTES = 8 << 20


def _piece_rows() -> int:
    return max(1, min(NEST_UPDATE_ROWS, budget.plan().nest_rows))


def derive_nesting(con: duckdb.DuckDBPyConnection, source_id: int) -> None:
    """Fill events.depth / parent_id where the adapter left them NULL: on each track
    (pid, tid, device_id, stream_id), the parent is the nearest earlier event that encloses it
    (start <= child start and child end <= end, and the child starts before the end;
    ties by input order).  Partial overlaps are not parents.  Instants nest like zero-length ranges.

    With the compiled module, `_nest_track`'s rule itself runs over the rows (`native.nest`,
    ~6x faster than the SQL: a sort and one stack pass, ~0.2 us an event); without it, the SQL
    below.
    """
    if native is not None and NATIVE_NESTING:
        _derive_nesting_native(con, source_id)
    else:
        _derive_nesting_sql(con, source_id)


def _int64_buffers(arr: pa.Array) -> tuple:
    """An integer column as (int64 values, Arrow validity bitmap or None), both at offset 0."""
    arr = arr.cast(pa.int64())
    if arr.offset:
        arr = pa.concat_arrays([pa.array([], pa.int64()), arr])  # a copy at offset 0
    validity, values = arr.buffers()
    return values, (validity if arr.null_count else None)


# the columns `native.nest` takes, as the statements of sql/queries/nesting.sql read them
_NEST_COLS = ("event_id", "pid", "tid", "device_id", "stream_id", "start_ns", "end_ns")
_TRACK = ("pid", "tid", "device_id", "stream_id")


def _nested_columns(tbl: pa.Table, *more) -> tuple:
    """`native.nest` over the rows of ``tbl`` (the columns of _NEST_COLS, any chunking), ``more``
    its optional arguments (want_stack, carry): (depth, parent_id) as Arrow arrays in tbl's row
    order, then the further items it returns (as bytes)."""
    n = tbl.num_rows
    args = []
    for name in _TRACK:
        args += _int64_buffers(tbl.column(name).combine_chunks())
    for name in ("start_ns", "end_ns", "event_id"):
        args.append(_int64_buffers(tbl.column(name).combine_chunks())[0])
    depth, parent, valid, *rest = native.nest(n, *args, *more)
    return (pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(depth)]),
            pa.Array.from_buffers(pa.int64(), n, [valid and pa.py_buffer(valid), pa.py_buffer(parent)]),
            *rest)


def _rows(buf) -> pa.Array:
    """int64 row numbers given as bytes."""
    return pa.Array.from_buffers(pa.int64(), len(buf) // 8, [None, pa.py_buffer(buf)])


def _nest_table(tbl: pa.Table, want_stack: bool = False):
    """`native.nest` over the rows of ``tbl`` (the columns of _NEST_COLS): the table (event_id,
    depth, parent_id), rows in tbl's order, and with ``want_stack`` the row numbers left on the
    stack at the end."""
    depth, parent, *stack = _nested_columns(tbl, want_stack)
    fix = pa.table({"event_id": tbl.column("event_id").combine_chunks(), "depth": depth, "parent_id": parent})
    if not want_stack:
        return fix
    return fix, _rows(stack[0])


def _q(name: str) -> str:
    """Statement ``name`` of sql/queries/nesting.sql."""
    from . import views  # here: views imports DuckDB, which the Kineto reader does without
    return views.query("nesting", name)


def _update(con: duckdb.DuckDBPyConnection, source_id: int, src: str, lo: int, hi: int) -> None:
    con.execute(_q("write_back").replace("{{fix}}", src), {"sid": source_id, "lo": lo, "hi": hi})


def _write_back(con: duckdb.DuckDBPyConnection, source_id: int, fix: pa.Table) -> None:
    """UPDATE the events of ``fix`` (event_id, depth, parent_id; some rows) with its values."""
    fix = fix.sort_by("event_id")
    ids = fix.column("event_id")
    con.register("__tk_fix", fix)
    try:
        _update(con, source_id, "__tk_fix", ids[0].as_py(), ids[-1].as_py())
    finally:
        con.unregister("__tk_fix")


def _derive_nesting_native(con: duckdb.DuckDBPyConnection, source_id: int) -> None:
    """In memory when the source's events fit in one piece (`_piece_rows`); else a piece at a
    time: the events sorted into a temporary table by DuckDB (which spills beyond its memory
    limit), each piece of consecutive rows nested with the rows left on the stack by the piece
    before it (`nest`'s want_stack: the same results as one pass), the results appended to a
    second temporary table and written back in UPDATEs of a piece's worth of event ids.  So the
    memory it takes does not grow with the source."""
    piece = _piece_rows()
    n = con.execute(_q("unnested_count"), {"sid": source_id}).fetchall()[0][0]
    if not n:
        return
    if n > piece and "want_stack" not in (native.nest.__doc__ or ""):
        _derive_nesting_sql(con, source_id)  # a module built before pieces (rebuild it: tracekit/native.py)
        return
    if n <= piece:
        tbl = con.sql(_q("unnested"), params={"sid": source_id}).to_arrow_table()
        fix = _nest_table(tbl)
        del tbl
        _write_back(con, source_id, fix)
        return
    con.execute(_q("sorted_unnested"), {"sid": source_id})
    con.execute(_q("fix_table"))
    try:
        base = con.execute(_q("sorted_base")).fetchall()[0][0]
        carry = None  # the rows left on the stack by the piece before
        for off in range(base, base + n, piece):
            tbl = con.sql(_q("piece"), params={"a": off, "b": off + piece}).to_arrow_table()
            k = 0
            if carry is not None and carry.num_rows:
                k = carry.num_rows
                tbl = pa.concat_tables([carry, tbl.cast(carry.schema)])
            fix, stack = _nest_table(tbl, want_stack=True)
            carry = tbl.take(stack)
            con.from_arrow(fix.slice(k)).insert_into("__tk_nfix")
            del tbl, fix
        if con.execute(_q("fix_count")).fetchall()[0][0] != n:  # never: a bug
            raise RuntimeError("nesting: not every event was nested")
        con.execute("DROP TABLE __tk_nord")
        lo, hi = con.execute(_q("fix_span")).fetchall()[0]
        width = max(1, (hi - lo + 1) * piece // n)  # slices of about a piece of rows where ids are dense
        for a in range(lo, hi + 1, width):
            _update(con, source_id, "__tk_nfix", a, min(hi, a + width - 1))
    finally:
        con.execute("DROP TABLE IF EXISTS __tk_nord")
        con.execute("DROP TABLE IF EXISTS __tk_nfix")


def _derive_nesting_sql(con: duckdb.DuckDBPyConnection, source_id: int) -> None:
    """`derive_nesting` without the compiled module.

    Computed in SQL, for whole tracks at once: with the events of a track in order (start, end
    descending, input order), the events still open when event i starts are the earlier ones
    with end > start_i, and when no two events of the track partially overlap they form a chain,
    so depth_i is their number and the parent is the last earlier event of depth depth_i - 1.
    That holds exactly when every event ends no later than the parent found that way (checked);
    tracks where it does not (partial overlaps) get the rule above event by event (`_nest_track`).
    """
    con.execute(_q("ordered"), {"sid": source_id})  # (the method: sql/queries/nesting.sql)
    if not con.execute(_q("ordered_count")).fetchall()[0][0]:
        con.execute("DROP TABLE __tk_ord")
        return
    con.execute(_q("depths"))
    con.execute("DROP TABLE __tk_ord")
    lo, hi, tracks, positions = con.execute(_q("depth_range")).fetchall()[0]
    # the parent by a one-key ASOF join where (track, depth, pos) packs into one BIGINT
    packed = lo >= 0 and hi < 4000 and tracks < 1 << 20 and positions < 1 << 31
    con.execute(_q("parents_packed" if packed else "parents"))
    con.execute("DROP TABLE __tk_depth")
    bad = [r[0] for r in con.execute(_q("bad_tracks")).fetchall()]
    if bad:  # partial overlaps: the event-by-event rule on those tracks
        tbl = con.sql(_q("bad_events"), params={"sid": source_id, "bad": bad}).to_arrow_table()
        fix = _nest_track(tbl.column("event_id").to_pylist(), tbl.column("start_ns").to_pylist(),
                          tbl.column("end_ns").to_pylist(), tbl.column("track").to_pylist())
        con.register("__tk_fix", fix)
        try:
            con.execute(_q("fix_nest"))
        finally:
            con.unregister("__tk_fix")
    try:
        con.execute(_q("write_nest"), {"sid": source_id})
    finally:
        con.execute("DROP TABLE __tk_nest")


def _nest_track(ids: list, starts: list, ends: list, tracks: list) -> pa.Table:
    """depth / parent_id by the rule of `derive_nesting`, event by event (a stack per track);
    the events in track order."""
    depth = [0] * len(ids)
    parent: list[int | None] = [None] * len(ids)
    stack: list[int] = []  # indices into ids
    cur = None
    for i in range(len(ids)):
        if tracks[i] != cur:
            cur, stack = tracks[i], []
        s, e = starts[i], ends[i]
        while stack and ends[stack[-1]] <= s:
            stack.pop()
        j = len(stack) - 1
        while j >= 0 and ends[stack[j]] < e:  # partial overlap: look further out
            j -= 1
        if j >= 0:
            parent[i] = ids[stack[j]]
            depth[i] = depth[stack[j]] + 1
        stack.append(i)
    return pa.table({"event_id": pa.array(ids, pa.int64()), "depth": pa.array(depth, pa.int32()),
                     "parent_id": pa.array(parent, pa.int64())})


def renest_tracks(con: duckdb.DuckDBPyConnection, source_id: int, tracks: list,
                   held: list | None = None) -> pa.Table | None:
    """Nest again the whole of each track of ``tracks`` ((pid, tid, device_id, stream_id) each:
    those whose rows the reader got out of order, `StreamNesting.late_tracks`), and write back
    only the stored rows whose depth / parent_id change: an UPDATE rewrites every row group it
    touches at COMMIT, and the late rows are few and together (e.g. CUPTI's overhead spans that
    torch.profiler writes at the end of a trace).  ``held``: the
    events rows of those tracks held back from the inserts (`LateRows`), nested here with
    the stored ones and returned as a table with their depth / parent_id, for the caller to insert
    (None: none held).  Tracks of more than a piece of events (`_piece_rows`) in all are reset
    instead and nested with the others left NULL (`derive_nesting`): the held rows are then
    returned as they are (NULL), to be nested with them."""
    late = pa.Table.from_batches(held) if held else None
    keys = pa.table({k: pa.array([t[i] for t in tracks], typ) for i, (k, typ) in
                     enumerate(zip(_TRACK, (pa.int64(), pa.int64(), pa.int32(), pa.int64())))})
    con.register("__tk_late", keys)
    try:
        n = con.execute(_q("late_count"), {"sid": source_id}).fetchall()[0][0]
        if native is None or n + (late.num_rows if late else 0) > _piece_rows():
            con.execute(_q("late_reset"), {"sid": source_id})
            return late
        rows = con.sql(_q("late_rows"), params={"sid": source_id}).to_arrow_table()
    finally:
        con.unregister("__tk_late")
    cols = list(_NEST_COLS)
    both = rows.select(cols)
    if late is not None:
        both = pa.concat_tables([both, late.select(cols).cast(both.schema)])
    fix = _nest_table(both)
    stored = fix.slice(0, rows.num_rows)

    def same(a, b):
        return pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))

    keep = pc.and_(same(stored.column("depth"), rows.column("depth").cast(pa.int32())),
                   same(stored.column("parent_id"), rows.column("parent_id")))
    changed = stored.filter(pc.invert(keep))
    if changed.num_rows:
        _write_back(con, source_id, changed)
    if late is None:
        return None
    new = fix.slice(rows.num_rows)
    for name in ("depth", "parent_id"):
        i = late.schema.get_field_index(name)
        late = late.set_column(i, late.schema.field(i), new.column(name).cast(late.schema.field(i).type))
    return late


def _late_tracks(con: duckdb.DuckDBPyConnection, source_id: int, held: list) -> list[tuple]:
    """The tracks (pid, tid, device_id, stream_id) that a reader began to nest and left to the
    store: those of the rows of depth NULL, held or stored, in a source with rows nested already
    (none where the reader nested nothing: `derive_nesting` nests the whole source)."""
    if not con.execute(_q("any_nested"), {"sid": source_id}).fetchall():
        return []
    keys = set(con.execute(_q("unnested_tracks"), {"sid": source_id}).fetchall())
    for b in held:
        keys.update(zip(*(b.column(k).to_pylist() for k in _TRACK)))
    return sorted(keys, key=repr)


def nest_source(con: duckdb.DuckDBPyConnection, source_id: int, held: list, insert) -> None:
    """events.depth / parent_id of a source whose rows are in, where its reader left them NULL:
    the tracks it began to nest and left (`_late_tracks`) nested again whole, with ``held``, the
    rows held back from the inserts (`LateRows.held`), then given to ``insert`` (a function of
    one events batch); then every row still NULL (`derive_nesting`)."""
    tracks = _late_tracks(con, source_id, held)
    if tracks:
        late = renest_tracks(con, source_id, tracks, held)
        for b in late.combine_chunks().to_batches() if late is not None else ():
            insert(b)
    derive_nesting(con, source_id)


class LateRows:
    """The (table, batch) stream of a reader, with the events rows of depth NULL that come after
    nested ones held back (`held`, up to HOLD_LATE_BYTES): those of the tracks the reader left to
    the store (`StreamNesting`), which `nest_source` nests with the track's stored rows and
    inserts nested, so that no stored event is UPDATEd unless the late rows change its nesting.
    An UPDATE of the events, even of a few rows, rewrites the row groups it touches at COMMIT
    (~0.1 s on a 500 k-event trace).  Beyond HOLD_LATE_BYTES the held rows are handed on,
    unnested, and no more are held.  A reader that nests nothing (depth NULL throughout) is
    passed through as it is."""

    def __init__(self, stream):
        self._stream = stream
        self.held: list[pa.RecordBatch] = []

    def __iter__(self):
        nested, hold, size = False, HOLD_LATE_BYTES > 0, 0
        for name, batch in self._stream:
            if name == "events" and hold and batch.num_rows:
                depth = batch.column("depth")
                nested = nested or depth.null_count < batch.num_rows
                if nested and depth.null_count:
                    late = pc.is_null(depth)
                    self.held.append(batch.filter(late))
                    size += self.held[-1].nbytes
                    batch = batch.filter(pc.invert(late))
                    if size > HOLD_LATE_BYTES:  # too many: handed on unnested, as without holding
                        yield from (("events", b) for b in self.held)
                        self.held, hold = [], False
            yield name, batch

    def close(self) -> None:
        """Stop the reader (an insert stopped early)."""
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


class StreamNesting:
    """events.depth / parent_id set by the reader, a chunk of events at a time, by `native.nest`
    (the rule of `_nest_track`): the rows of each chunk are nested together with the rows that
    the chunks before left open on their tracks' stacks (carried: at most the nesting depth of each
    track), which gives the results of one pass over all rows when each track's rows arrive in its
    order (start, end descending, event_id) from one chunk to the next, as torch.profiler writes
    them.  Then the store need not UPDATE the events afterwards, which would cost ~0.6 us an event,
    most of it in COMMIT, which rewrites every updated row group.

    A track whose rows arrive out of that order (a chunk holds one that sorts before a row of an
    earlier chunk: the Python-stack events that some profilers' traces write after
    the ops they enclose; CUPTI's overhead spans among a trace's last events) is left
    to the store: its later rows keep depth NULL (the reader's `late_tracks`), so that the store
    nests the whole track again after the rows are in (`nest_source`): a track with rows of
    depth NULL in a source whose other rows have theirs is such a track."""

    def __init__(self):
        self.active = native is not None and NATIVE_NESTING and STREAM_NESTING
        self.late_tracks: set[tuple] = set()  # (pid, tid, device_id, stream_id) left to the store
        self._carry: pa.Table | None = None

    def _keys(self, tbl: pa.Table, rows) -> set:
        sub = tbl.take(pa.array(rows, pa.int64())).select(list(_TRACK)).to_pylist()
        return {tuple(r[k] for k in _TRACK) for r in sub}

    def _late_mask(self, tbl: pa.Table) -> pa.Array | None:
        """True for the rows of tbl on a track left to the store (None: there are none).  The
        rows whose every key is one of the late tracks' values (NULL matching NULL) are the
        candidates; their whole keys are then looked up (few rows: no Arrow join, whose import of
        pyarrow.acero alone costs tens of ms)."""
        if not self.late_tracks:
            return None
        cand = None
        for i, k in enumerate(_TRACK):
            c = tbl.column(k)
            hit = pc.is_in(c, value_set=pa.array([t[i] for t in self.late_tracks], c.type), skip_nulls=False)
            cand = hit if cand is None else pc.and_(cand, hit)
        idx = pc.indices_nonzero(cand)
        sub = tbl.select(list(_TRACK)).take(idx)
        miss = [i for i, key in zip(idx.to_pylist(), zip(*(sub.column(k).to_pylist() for k in _TRACK)))
                if key not in self.late_tracks]
        if not miss:
            return cand
        return pc.and_(cand, pc.invert(pc.is_in(pa.array(range(tbl.num_rows), pa.int64()),
                                                value_set=pa.array(miss, pa.int64()))))

    def _nest(self, cols: pa.Table, k: int):
        cols = cols.combine_chunks()
        depth, parent, kept, late = _nested_columns(cols, False, k)
        return cols, depth, parent, _rows(kept), _rows(late).to_pylist()

    def nested(self, batches: list) -> list:
        """The events batches of one chunk, in their order, with depth and parent_id set (NULL
        on the tracks left to the store)."""
        if not batches or not self.active:
            return batches
        new = pa.Table.from_batches(batches).select(list(_NEST_COLS))
        carry = self._carry if self._carry is not None else new.schema.empty_table()
        while True:
            skip = self._late_mask(new)
            part = new if skip is None else new.filter(pc.invert(skip))
            cols, d, p, kept, late = self._nest(pa.concat_tables([carry, part]), carry.num_rows)
            if not late:
                break
            keys = self._keys(cols, late)
            if keys <= self.late_tracks:  # never: those rows were left out
                raise RuntimeError("nesting: a track left to the store was nested")
            self.late_tracks |= keys  # and again, without them
            keep = self._late_mask(carry)
            if keep is not None:
                carry = carry.filter(pc.invert(keep))
        self._carry = cols.take(kept)
        d, p = d.slice(carry.num_rows), p.slice(carry.num_rows)
        if skip is not None:  # back to the chunk's rows: NULL where left to the store
            at = pc.cumulative_sum(pc.invert(skip).cast(pa.int64()))
            pos = pc.if_else(skip, pa.scalar(None, pa.int64()), pc.subtract(at, pa.scalar(1, pa.int64())))
            d, p = d.take(pos), p.take(pos)
        out, at = [], 0
        for b in batches:
            size = b.num_rows
            di, pi = b.schema.get_field_index("depth"), b.schema.get_field_index("parent_id")
            b = b.set_column(di, b.schema.field(di), d.slice(at, size))
            out.append(b.set_column(pi, b.schema.field(pi), p.slice(at, size)))
            at += size
        return out
