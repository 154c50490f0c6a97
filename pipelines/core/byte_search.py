"""Whether a message's bytes hold a short sequence, found with the C library's `memmem`.

The send path asks this of every composed message (35 KB in bench/send) several times:
DKIM's relaxed body canonicalisation (a space before a line end, a run of spaces) and
SMTP dot-stuffing (a line that starts with a dot). Python's own `needle in haystack`
scans a 35 KB message for a two- or three-byte needle in 20–25 µs; glibc's memmem in
6 µs for three bytes (measured on the bench box; bench.send, bench/RESULTS.md). Where the C
library has no memmem (Windows), Python's scan gives the same answer."""

from __future__ import annotations

import ctypes
import ctypes.util


def _memmem():
    try:
        library = ctypes.CDLL(ctypes.util.find_library("c") or None)
        found = library.memmem
    except (OSError, AttributeError, TypeError):
        return None
    found.restype = ctypes.c_void_p
    found.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    return found


_MEMMEM = _memmem()


def contains(haystack: bytes, needle: bytes) -> bool:
    """`needle in haystack`, for `bytes` (ctypes passes their buffer, not a copy)."""
    if _MEMMEM is None or type(haystack) is not bytes or type(needle) is not bytes or not needle:
        return needle in haystack
    return _MEMMEM(haystack, len(haystack), needle, len(needle)) is not None
