"""Reply extraction (pipelines/inbound/replies.py over mail-parser-reply) on a public set of
replies with the answers their authors expect: planer's plain-text cases (the npm port of
Mailgun's talon; tests/pipelines/inbound_corpus/README.md). The extracted reply is compared
with the expected one whole — so the quoted thread being left out is checked too.

Where mail-parser-reply (what we use: maintained, 13 languages) answers differently from
talon's rules the case is listed in DIFFERENT, with why, and expected to fail (strict: a
library release that closes the gap shows up here). Whatever the answer, the new text the
sender wrote is never lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.inbound.parsing import parse_inbound
from pipelines.inbound.replies import extract_reply

CASES = json.loads((Path(__file__).parent / "inbound_corpus" / "replies" / "planer_cases.json").read_text("utf-8"))
BY_NAME = {case["name"]: case for case in CASES}

_ONE_LINE = "the 'On … wrote:' header shares its line with the reply: the library finds headers at a line's start"
_BELOW = "talon keeps text written below the quote; the library keeps the newest reply, above it"
_UNKNOWN_HEADER = "a quote header the library's patterns do not know"
DIFFERENT = {
    "Notices when real test is on the splitter line": _ONE_LINE,
    "Notices when real test is on the splitter line (2)": _ONE_LINE,
    "Notices when real test is on the splitter line (3)": _ONE_LINE,
    "picks up replies after the quotation": "a bottom-posted reply (nothing above the quote): the whole text is "
                                            "kept, the reply with it",
    "detects wrapping replies": _BELOW,
    "detects wrapping of nested replies": _BELOW,
    "is not fooled by 2 line splitters": _BELOW,
    "detects inline replies": "answers between the quoted lines: talon keeps the whole message, the library the "
                              "text above the first quote",
    "is not fooled bt indents": _UNKNOWN_HEADER + " ('------On … wrote-----')",
    "does not barf on unicode characters in a name": _UNKNOWN_HEADER + " (a date and a name, no 'wrote')",
    "understands Polish date person wrote splitters": _UNKNOWN_HEADER + " (Polish, the header cut over two lines)",
    "understands Swedish date person wrote splitters": _UNKNOWN_HEADER + " (Swedish 'Den … skrev:')",
    "understands Norwegian date person wrote splitters": _UNKNOWN_HEADER + " (Norwegian: not among its languages)",
    "understands Norwegian date person wrote splitters (2)": _UNKNOWN_HEADER + " (Dutch 'Op … het volgende "
                                                                              "geschreven:')",
    "is not fooled into thinking a link ends a quotation": _UNKNOWN_HEADER + " (a lone 'From:' line)",
    "is not fooled when stars surround headers": _UNKNOWN_HEADER + " ('*From:*' split over two lines)",
    "preserves forwarded messages": "a forward's header block is taken for a quoted message: 'FYI' and the "
                                    "separator are kept, the forwarded text is not",
}


def test_the_set_is_whole():
    assert len(CASES) == 38 and set(DIFFERENT) <= set(BY_NAME)


@pytest.mark.parametrize("name", [c["name"] for c in CASES])
def test_the_reply_is_exactly_the_new_text(name, request):
    if name in DIFFERENT:
        request.applymarker(pytest.mark.xfail(reason=DIFFERENT[name], strict=True))
    case = BY_NAME[name]
    assert extract_reply(case["body"], None) == case["expected"].strip()


@pytest.mark.parametrize("name", [c["name"] for c in CASES])
def test_the_new_text_is_never_lost(name):
    case = BY_NAME[name]
    first_line = case["expected"].strip().splitlines()[0]
    assert first_line in extract_reply(case["body"], None)


def test_a_reply_in_a_received_message_leaves_quote_and_signature_out():
    raw = (b"From: ann@sender.example\r\nSubject: Re: Invoice\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
           b"Paid this morning, thanks.\r\n\r\n-- \r\nAnn Example\r\nAcme Ltd\r\n\r\n"
           b"Am 01.02.2024 um 10:00 schrieb Billing <billing@inbound.example>:\r\n> Your invoice is due.\r\n")
    assert parse_inbound(raw)["reply"] == "Paid this morning, thanks."
