"""The tests' own interval arithmetic (independent of tracekit's SQL): µs floats → ns, unions,
lengths and intersections of interval lists."""

from __future__ import annotations


def ns(us) -> int:
    """A JSON µs value (float or int) as integer ns."""
    return round(us * 1000)


def union(iv):
    """Sorted, merged [start, end] lists of an iterable of (start, end)."""
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def length(u) -> int:
    return sum(e - s for s, e in u)


def intersect(a, b) -> int:
    """Total length of the intersection of two merged interval lists."""
    i = j = tot = 0
    while i < len(a) and j < len(b):
        tot += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tot
