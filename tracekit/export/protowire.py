"""A minimal protobuf wire-format encoder and decoder (no dependency, no .proto compilation).

Only what the Perfetto exporter writes (varint, 64-bit and length-delimited fields) and what its
tests read back.  Field numbers are Perfetto's (protos/perfetto/trace/*.proto); they are spelled
out in tracekit/export/perfetto/proto_writer.py next to their use.
"""

from __future__ import annotations

import struct

_PACK_D = struct.Struct("<d").pack
_PACK_Q = struct.Struct("<Q").pack
_UNPACK_D = struct.Struct("<d").unpack_from
_UNPACK_Q = struct.Struct("<Q").unpack_from

_SMALL = [bytes([i]) for i in range(128)]


def varint(n: int) -> bytes:
    """Unsigned LEB128; negative ints are written as 64-bit two's complement (int64 fields)."""
    if 0 <= n < 128:
        return _SMALL[n]
    if n < 0:
        n &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def key(field: int, wire_type: int) -> bytes:
    return varint((field << 3) | wire_type)


def f_varint(field: int, n: int) -> bytes:
    return varint(field << 3) + varint(n)


def f_bool(field: int, b: bool) -> bytes:
    return varint(field << 3) + (b"\x01" if b else b"\x00")


def f_fixed64(field: int, n: int) -> bytes:
    return varint((field << 3) | 1) + _PACK_Q(n & 0xFFFFFFFFFFFFFFFF)


def f_double(field: int, x: float) -> bytes:
    return varint((field << 3) | 1) + _PACK_D(x)


def f_bytes(field: int, b: bytes) -> bytes:
    return varint((field << 3) | 2) + varint(len(b)) + b


def f_str(field: int, s: str) -> bytes:
    b = s.encode("utf-8", "surrogatepass")
    return varint((field << 3) | 2) + varint(len(b)) + b


# -- decoding (used by the tests and the lint of .pftrace files) ---------------------------------
def read_varint(buf, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def fields(buf, start: int = 0, end: int | None = None):
    """Yield (field_number, wire_type, value) of one message; value is an int for varint and
    64/32-bit fields and a memoryview for length-delimited ones."""
    mv = memoryview(buf)
    pos = start
    end = len(buf) if end is None else end
    while pos < end:
        k, pos = read_varint(mv, pos)
        fn, wt = k >> 3, k & 7
        if wt == 0:
            v, pos = read_varint(mv, pos)
        elif wt == 1:
            v = _UNPACK_Q(mv, pos)[0]
            pos += 8
        elif wt == 2:
            n, pos = read_varint(mv, pos)
            v = mv[pos:pos + n]
            pos += n
        elif wt == 5:
            v = int.from_bytes(mv[pos:pos + 4], "little")
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wt} at byte {pos}")
        if pos > end:
            raise ValueError("message truncated")
        yield fn, wt, v


def as_double(v: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", v))[0]


def as_int64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v
