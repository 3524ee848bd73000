"""Kineto / torch.profiler Chrome-trace JSON (``.json``, ``.json.gz``) → unified schema.

Reading strategy (memory: the input blocks in flight plus one chunk, whatever the trace size):

* The file is read, and inflated (by ISA-L where its wheel installs, else zlib), in blocks by
  a background thread (inflating lets the other core work meanwhile).  The top-level keys
  before ``traceEvents`` are decoded as raw JSON values; the events array is cut into chunks of
  a few MB at event boundaries (``},`` + newline: a JSON string cannot hold a raw newline, and a
  cut inside an event leaves its brackets unbalanced, so the chunk fails to decode and is
  extended instead); the keys after the array are read at the end.
* Each chunk is read by the compiled scanner (``tracekit/_native.c``, built at install where a
  C compiler is found) straight into Arrow columns (``args`` kept as raw JSON text), and routed
  with Arrow compute (scanned.py).  The scanner accepts only the shapes that the rules below
  take column-wise and declines any other chunk, which then goes the Python way: decoded in one
  msgspec call into small typed structs, ``args`` kept as raw text, the ``args`` fields that
  map to columns decoded in one call per table, rows routed and built as Arrow columns
  (columnar.py).  Both give the same rows (tests/adapters/test_kineto_scan.py); without the scanner
  (``TRACEKIT_KINETO_SCAN=0``, or no compiler at install) large traces read ~1.5x slower.
* A document that does not look like that (one line of JSON, say) is read whole and cut into
  chunks of its event slices.  A chunk whose events have unusual shapes (fields of other types,
  B/E pairs, invalid UTF-8) is converted event by event, with the same rules.
* When a chunk ends, its events are nested (``events.depth`` / ``parent_id``, with the rows the
  chunks before left open: `tracekit.nesting.StreamNesting`) and its GPU rows get the pid of
  their launching call (gpu_pid.py), so that the store need not UPDATE them after; the store
  completes what the reader could not (tracks out of order, calls it had not seen).

Timestamps are parsed from their decimal text into exact int64 ns (``ts`` is µs with up to three
decimals; epoch-µs floats with ns digits do not fit a float64): vectorized through Arrow decimals,
falling back to exact per-value parsing for texts Arrow does not take.  Every event is either
converted or counted in ``skipped_rows`` with a reason.  See docs/schema.md for the column mapping.

The modules: stream.py (the bytes: blocks, gzip, encodings, bombs), decode.py (structs, exact
times, repairs), mapping.py (raw field -> column: the one table every reader evaluates),
flows.py (the flow rule), rows.py / columnar.py / scanned.py (the three readers of a chunk),
memory.py (`[memory]` instants -> memory_events), gpu_pid.py (GPU rows' pid), adapter.py
(`KinetoAdapter`).
"""

from __future__ import annotations

import os

from ...native import native as _native

# Settings, read where they are used (so that setting them here takes effect; the tests do):
# use the compiled scanner where it is built (TRACEKIT_KINETO_SCAN=0 turns it off: the results
# are the same, only slower; the tests compare both)
SCAN = _native is not None and os.environ.get("TRACEKIT_KINETO_SCAN", "1") != "0"
BLOCK_BYTES = 8 << 20      # JSON text read (inflated) per step, and so the size of a chunk
HEAD_LIMIT = 64 << 20      # traceEvents must start within this many bytes to be streamed
WHOLE_CHUNK_EVENTS = 20_000  # events per chunk when the document is read whole

from .adapter import KinetoAdapter  # noqa: E402
from .decode import TS_LIMIT, us_text_to_ns  # noqa: E402
from .mapping import INT64_MAX  # noqa: E402
from .stream import INFLATE_FLOOR, INFLATE_RATIO  # noqa: E402

__all__ = ["KinetoAdapter", "us_text_to_ns", "SCAN", "BLOCK_BYTES", "HEAD_LIMIT", "WHOLE_CHUNK_EVENTS",
           "INFLATE_RATIO", "INFLATE_FLOOR", "TS_LIMIT", "INT64_MAX"]
