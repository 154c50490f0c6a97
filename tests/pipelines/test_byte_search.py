"""byte_search.contains answers as `in` does, through memmem or without it."""

from __future__ import annotations

import pytest

from pipelines.core import byte_search

MESSAGE = b"Subject: Hi\r\n\r\n" + b"a line of quoted-printable text=\r\n" * 1000

CASES = [
    (MESSAGE, b"\r\n."),                       # absent from a long message
    (MESSAGE + b"\r\n.dot\r\n", b"\r\n."),     # present at the very end
    (b".starts", b"."),
    (b"two  spaces", b"  "),
    (b"one space", b"  "),
    (b"ends with a space \r\n", b" \r\n"),
    (b"", b"x"),
    (b"abc", b"abcd"),                         # a needle longer than the haystack
    (b"nul\x00 inside", b"\x00 "),
]


@pytest.mark.parametrize("haystack, needle", CASES)
def test_contains_answers_as_in_does(haystack, needle):
    assert byte_search.contains(haystack, needle) is (needle in haystack)


@pytest.mark.parametrize("haystack, needle", CASES)
def test_without_memmem_the_answers_are_the_same(monkeypatch, haystack, needle):
    monkeypatch.setattr(byte_search, "_MEMMEM", None)
    assert byte_search.contains(haystack, needle) is (needle in haystack)


def test_the_c_library_search_is_used_here():
    """This machine (glibc) has memmem: the fast path is the one measured."""
    assert byte_search._MEMMEM is not None


def test_other_buffers_and_an_empty_needle_fall_back_to_in():
    assert byte_search.contains(bytearray(b"a  b"), b"  ") is True
    assert byte_search.contains(b"abc", b"") is True
