"""The store's tuning constants, read where they act (at call time, so a value set on the package
-- ``tracekit.store.INSERT_THREADS = 2`` -- takes effect: tracekit/store/__init__.py forwards it here).
Each one's default, what it trades and the measurement that chose it are in docs/scaling.md
("Knobs"); a comment here says what the value is, not why."""

# DuckDB's memory cap while converting (beyond it the open transaction spills to disk) is the
# memory budget's share (tracekit/budget.py: 128 MiB of the default 400 MB, 64 MiB for one
# inserting thread).
# For adapters with long runs of one table (Adapter.PARALLEL_INSERT: nsys), each run is inserted
# by one statement on up to INSERT_THREADS threads (fewer where the budget says: budget.plan),
# without keeping the input order: queries order explicitly (rowid order is no promise of the store).
PARALLEL_INSERT = True
INSERT_THREADS = 4
# DuckDB threads while the gathered tables of a serial reader (Kineto, ncu) are inserted (None:
# leave `threads` as it is).
SERIAL_INSERT_THREADS = 1
# Arrow memory pool while converting without parallel inserts (None: leave pyarrow's default).
# Arrays keep the pool they came from, so switching back afterwards is safe.
CONVERT_ARROW_POOL = "system"
# Process-wide tuning while converting -- Python's cyclic garbage collector paused, pyarrow's
# default memory pool switched to CONVERT_ARROW_POOL (both restored after) -- only where tracekit
# owns the process: the `tracekit` command (cli.entry), its worker processes (parallel.py),
# tracekit.convert(..., own_process=True), a benchmark job. A library call changes neither.
OWN_PROCESS = False
# Rows per row group of a store opened for writing (None: DuckDB's default, 122,880); stores
# opened read-only are unaffected.
ROW_GROUP_SIZE = 32768
# The DuckDB storage format a new store is written in (ATTACH's STORAGE_VERSION; None: the
# running DuckDB's default).  DuckDB 2.0 writes format 69 by default, which DuckDB 1.x (the
# `duckdb` CLI on PyPI, duckdb-cli 1.5.6; notebooks with an older duckdb) refuses to open; with
# "v1.5.0" any DuckDB >= 1.5 opens the store.  Measured on the kineto fixtures decode_b32 +
# decode_b1: the same file size (5.8 MB) and convert time within noise.  A store keeps the format
# it was created in (adding sources does not change it).
STORAGE_VERSION = "v1.5.0"
# Rows per Arrow batch of a shared view's kept rows (Store._keep_view: each batch's text columns
# are dictionary-encoded as it comes, so a batch of long names is the most held twice).
KEEP_BATCH_ROWS = 16384
# At most this many bytes of kept rows per session (the 179 MB Kineto capture's 16 shared views
# take 69 MB; beyond the cap a session keeps no more).
KEEP_MAX_BYTES = 256 << 20
# A store with more GPU operations (kernels + memops) keeps nothing: its shared views would take
# more than KEEP_MAX_BYTES (~1.05 kB per operation for all 16 on the 179 MB capture), and finding
# that out by computing them cost a 1 M-kernel store's second query 7.9 s and 1.5 GB more than
# computing them inside the query (2.7 s).
KEEP_MAX_GPU_ROWS = 200_000
# Rows per Arrow batch of a streamed result (Store.head, Store.stream; one DuckDB vector): the
# fewest bytes held while a result streams past (idle_gaps on the 179 MB capture, `tracekit sql` peak RSS: 2,048 rows 244 MB,
# against 338 MB with the result held whole; 2,048-row batches were also the fastest, 0.14-0.15 s
# against 0.16-0.19 s for 8,192 and 65,536 rows and 0.18-0.23 s whole).
STREAM_BATCH_ROWS = 2048
