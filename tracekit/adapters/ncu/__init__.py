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


# the package's public names (tests, bench and the registry import them from here)
# ruff: noqa: F401
from .adapter import REPORT_MAGIC, NcuAdapter, sniff
from .values import (
                     DETAIL_COLUMNS,
                     DEVICE_METRICS,
                     ID_COLUMNS,
                     KERNEL_METRICS,
                     normalize_unit,
                     parse_number,
                     parse_nvtx,
)
