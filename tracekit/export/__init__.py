"""Exporters: the store as other tools' formats (Perfetto JSON and protobuf)."""

from .perfetto import ExportError, ExportOptions, ExportResult, export_perfetto

__all__ = ["ExportError", "ExportOptions", "ExportResult", "export_perfetto"]
