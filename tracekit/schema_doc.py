"""docs/schema.md, written from the schema (`tracekit schema --markdown`)."""

from __future__ import annotations

from . import schema


def markdown() -> str:
    """The schema documentation (docs/schema.md is this text): every table of `schema.TABLES`
    with its columns, their meaning and their input mapping per format."""
    out = [
        "# tracekit unified schema",
        "",
        "Generated from `tracekit/schema.py` by `tracekit schema --markdown`; do not edit by hand.",
        "",
        schema.__doc__.split("\n", 2)[2].strip(),
        "",
        f"Schema version: {schema.SCHEMA_VERSION}.",
        "",
    ]
    for t in schema.TABLES:
        out += [f"## `{t.name}`", "", t.doc, ""]
        has = {f: any(getattr(c, f) for c in t.columns) for f in ("kineto", "nsys", "ncu")}
        hdr = ["column", "type", "meaning"] + [
            {"kineto": "Kineto (torch.profiler)", "nsys": "Nsight Systems SQLite", "ncu": "Nsight Compute"}[f]
            for f in ("kineto", "nsys", "ncu") if has[f]]
        out.append("| " + " | ".join(hdr) + " |")
        out.append("|" + "---|" * len(hdr))
        for c in t.columns:
            row = [f"`{c.name}`", c.sql_type, c.doc] + [
                getattr(c, f) or "—" for f in ("kineto", "nsys", "ncu") if has[f]]
            out.append("| " + " | ".join(x.replace("|", "\\|") for x in row) + " |")
        out.append("")
    return "\n".join(out)
