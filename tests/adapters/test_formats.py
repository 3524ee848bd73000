"""The registry of input formats (adapters/detect.py): every format's sniffer and reader come from
one entry, --format's choices and the error messages from the list; a new format is one module and
one entry.  Real fixtures for the three formats; the fourth format is a synthetic edge case."""

from __future__ import annotations

import importlib

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, need
from tracekit.adapters import detect
from tracekit.adapters.base import Adapter, TraceError
from tracekit.cli import main


def test_every_format_has_a_reader_and_a_sniffer():
    assert detect.NAMES == ("kineto", "nsys", "ncu")
    for f in detect.REGISTRY:
        cls = getattr(importlib.import_module(f.module), f.reader)
        assert issubclass(cls, Adapter) and cls.FORMAT == f.name
        assert callable(detect._sniffer(f))


@pytest.mark.parametrize("path, fmt", [
    ("nsys/matmul.sqlite", "nsys"), ("nsys/matmul.nsys-rep", "nsys"),
    ("ncu/mm_raw.csv", "ncu"), ("ncu/lat_details.csv.gz", "ncu"), ("ncu/mm_summary.txt", "ncu"),
    ("labelled/gemm_loop.json.gz", "kineto")])
def test_fixtures_are_recognized(path, fmt):
    assert detect.sniff(need(FIXTURES / path)) == fmt


def test_magic_beats_name(tmp_path):
    """An SQLite export named .ncu-rep is nsys (magic); an ncu report named .nsys-rep is ncu."""
    p = tmp_path / "x.ncu-rep"
    p.write_bytes(need(FIXTURES / "nsys" / "matmul.sqlite").read_bytes())
    assert detect.sniff(p) == "nsys"
    q = tmp_path / "y.nsys-rep"
    q.write_bytes(b"NVR\x00" + b"\x00" * 60)
    assert detect.sniff(q) == "ncu"


def test_corrupt_gzip_head_is_one_line(tmp_path):
    p = tmp_path / "t.bin"
    p.write_bytes(b"\x1f\x8b" + b"junk" * 10)
    with pytest.raises(TraceError, match="corrupt gzip data at the start"):
        detect.sniff(p)


def test_format_option_and_messages_come_from_the_registry(tmp_path, monkeypatch):
    p = tmp_path / "t.abc"
    p.write_text("ABC-TRACE v1\n")
    with pytest.raises(TraceError) as e:
        detect.sniff(p)
    assert e.value.one_line() == (
        f"{p}: unrecognized format (not a Kineto/Chrome JSON trace, nsys SQLite or report, or ncu "
        "CSV); pass --format kineto|nsys|ncu if it is one of these")
    r = CliRunner().invoke(main, ["convert", "--help"])
    assert "[kineto|nsys|ncu]" in r.output

    # a fourth format: one entry (its module would define sniff and the reader class)
    def sniff_abc(probe):
        return detect.CONTENT if probe.head.startswith(b"ABC-TRACE") else 0

    monkeypatch.setattr(detect, "sniff_abc", sniff_abc, raising=False)
    fourth = detect.Format("abc", "ABC trace", "tracekit.adapters.base", "Adapter",
                           sniffer="tracekit.adapters.detect:sniff_abc")
    monkeypatch.setattr(detect, "REGISTRY", (*detect.REGISTRY, fourth))
    assert detect.sniff(p) == "abc"
    assert type(detect.adapter_for(p)) is Adapter
    q = tmp_path / "u.xyz"
    q.write_text("nothing\n")
    with pytest.raises(TraceError, match=r"or ABC trace\); pass --format kineto\|nsys\|ncu\|abc"):
        detect.sniff(q)
    with pytest.raises(TraceError, match="unknown format 'zzz'; use kineto, nsys, ncu or abc"):
        detect.adapter_for(q, "zzz")
